"""The memory processor's core, in-process: no Kafka, Postgres or Neo4j.

The same class runs live (streams/memory_processor.py, state in faust tables, sealed) and in
what-if (replay/whatif.py, state in dicts, plain); these tests drive it directly.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import orjson
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kernel.config import Settings
from domain.memory_state import Rules
from kernel.errors import InvalidEvent
from kernel.ids import uuid7
from replay.whatif import in_memory_core
from schemas.codec import DecisionKey, control_mac, decode, encode, make_envelope
from schemas.events import DecayTicked, FactExtracted, MemoryForgotten, UserErased, UserForgotten
from streams.memory_core import MemoryCore, PlainStates, SealedStates
from streams.routing import memory_input, partition_of, partitioner

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RULES = Rules(dedup_threshold=0.95, link_threshold=0.80, recent_window=5, link_max=2, consolidate_every=3,
              decay_rate=0.9, expire_ttl_days=10, expire_min_importance=0.3)


class StaticKeys:
    """A key ring held in memory: one AES-GCM key per user (what the key store does, minus Postgres)."""

    def __init__(self):
        self.keys: dict[str, bytes] = {}

    def key_for_write(self, user: str):
        self.keys.setdefault(user, AESGCM.generate_key(bit_length=256))
        return "k1", AESGCM(self.keys[user])

    def key_for_read(self, user: str, kid: str):
        return AESGCM(self.keys[user]) if user in self.keys else None

    control = ("c1", bytes(range(32)))

    def control_key(self, kid: str | None = None):
        return self.control if kid in (None, self.control[0]) else None

    def decision_key(self):
        return DecisionKey("d1", bytes(range(32, 64)), 0)


def settings(**over) -> Settings:
    return Settings(partitions=3, tick_slice_users=2, **over)


def unit(*xs):
    v = np.asarray(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


def fact(user: str, vec, at: datetime, content="c", importance=0.5, key=None, value=None):
    fid = uuid7()
    data = FactExtracted(fact_id=fid, source_turn=uuid7(), channel="rule", key=key, value=value, content=content,
                         category="general", importance=importance, embedding=vec, embed_model="m")
    return make_envelope(data, user=user, time=at, id=fid, producer="test")


def sealed_core(keys=None, **kw) -> MemoryCore:
    keys = keys or StaticKeys()
    return MemoryCore(settings(), RULES, keys, {}, {}, SealedStates(keys), partition_of=partitioner(3), **kw)


def plain_core(keys=None) -> MemoryCore:
    return MemoryCore(settings(), RULES, keys or StaticKeys(), {}, {}, PlainStates(), partition_of=partitioner(3))


def memory_record(core: MemoryCore, key: bytes, value: bytes | None, partition: int) -> list:
    """A raw memory-topic record as the drivers hand it to the core: picked and decoded
    (streams/routing.py memory_input), then `on_control`."""
    env = memory_input(key, value, core.keys, appended_ms=None, max_future_skew_s=core.max_future_skew_s)
    return [] if env is None else list(core.on_control(env, partition))


def summary(outs) -> list[tuple]:
    """What a run emitted, by value: ids, types, times and data."""
    return [(o.key, o.envelope.id, o.envelope.type, o.envelope.time, o.envelope.data.model_dump(), o.partition)
            for o in outs]


FACTS = [fact("alice", unit(1, 0, 0), T0, "likes tea", key="likes:tea", value="true"),
         fact("alice", unit(1, 0.3, 0), T0 + timedelta(days=1), "likes green tea"),
         fact("alice", unit(1, 0.01, 0), T0 + timedelta(days=2), "likes tea a lot", importance=0.9),
         fact("bob", unit(0, 1, 0), T0 + timedelta(days=3), "has a dog"),
         fact("alice", unit(0, 0, 1), T0 + timedelta(days=40), "moved house", importance=0.2)]


def run(core: MemoryCore, facts=FACTS) -> list:
    return [out for f in facts for out in core.on_fact(f)]


def test_facts_become_decisions_with_ids_derived_from_the_fact():
    outs = run(sealed_core())
    types = [o.envelope.type for o in outs]
    assert types[:2] == ["memory.created", "preference.set"]
    assert "memory.linked" in types and "memory.reinforced" in types
    first = FACTS[0]
    assert all(o.envelope.causation for o in outs)
    assert outs[0].envelope.causation == first.id and outs[0].envelope.time == first.time
    assert {o.key for o in outs} == {"alice", "bob"}


def test_the_state_is_sealed_and_survives_a_new_core():
    keys = StaticKeys()
    core = sealed_core(keys)
    run(core, FACTS[:2])
    assert b"likes" not in core.states[b"alice"]            # sealed with the user's key
    assert all(b"tea" not in v for v in core.ledgers.values())
    # a restarted processor (a new core over the same tables, nothing cached) decides as the first would have
    again = MemoryCore(settings(), RULES, keys, dict(core.states), dict(core.ledgers), SealedStates(keys),
                       vectors=dict(core.window_vectors.store))
    assert again.load_state("alice") == core.load_state("alice")
    assert summary(again.on_fact(FACTS[2])) == summary(core.on_fact(FACTS[2]))
    # without the key (erased), the state reads as unreadable, not as an error
    keys.keys.pop("alice")
    assert again.load_state("alice") is None


def test_state_is_saved_only_after_every_decision_was_taken():
    """A driver that dies after sending the first decision leaves the state unsaved; the re-read
    fact then emits exactly what a clean run emits."""
    core = plain_core()
    step = core.on_fact(FACTS[0])
    next(step)          # the first decision was sent …
    del step            # … and the process died before the rest
    assert core.states == {}
    clean = summary(plain_core().on_fact(FACTS[0]))
    assert summary(core.on_fact(FACTS[0])) == clean


def test_a_redelivered_fact_re_emits_identical_events():
    core = plain_core()
    first = summary(core.on_fact(FACTS[0]))
    assert summary(core.on_fact(FACTS[0])) == first


def test_consolidation_follows_the_facts_own_decisions():
    core = plain_core()
    days = [fact("carol", unit(*np.eye(3)[i]), T0 + timedelta(days=20 * i), f"fact {i}", importance=0.8)
            for i in range(3)]
    emitted = [[o.envelope for o in core.on_fact(f)] for f in days]
    # the third store runs consolidation at the user's clock (day 40): the fact's own
    # memory.created goes first, then the decay of the older memories (rate 0.9 a day)
    assert [e.type for e in emitted[1]] == ["memory.created", "memory.linked"]
    last = emitted[-1]
    assert last[0].type == "memory.created"
    decayed = [e for e in last if e.type == "memory.decayed"]
    assert decayed and all(e.time == days[2].time for e in decayed)
    assert core.load_state("carol").stores == 0          # the count starts over


def test_live_and_whatif_cores_decide_alike():
    keys = StaticKeys()
    live = run(sealed_core(keys))
    whatif = run(in_memory_core(settings(), RULES, keys))
    assert summary(live) == summary(whatif)


def test_ticks_age_a_slice_of_users_and_continue():
    s = settings()
    users = [u for u in (f"user{i}" for i in range(40)) if partition_of(u.encode(), s.partitions) == 1][:3]
    core = plain_core()
    for i, u in enumerate(users):
        list(core.on_fact(fact(u, unit(1, i, 0), T0, importance=0.5)))
    tick = make_envelope(DecayTicked(partition=1, period_s=86400.0), user="system:ticker",
                         time=T0 + timedelta(days=30), producer="test")
    outs = list(core.on_control(tick, partition=1))
    aged = {o.key for o in outs if not o.continuation}
    conts = [o for o in outs if o.continuation]
    assert aged == set(sorted(users)[:2])
    assert len(conts) == 1 and conts[0].partition == 1 and conts[0].envelope.data.after == sorted(users)[1]
    rest = list(core.on_control(conts[0].envelope, partition=1))
    assert {o.key for o in rest} == {sorted(users)[2]} and not any(o.continuation for o in rest)
    # a tick is for its own partition only
    assert list(core.on_control(tick, partition=0)) == []


def test_erasure_drops_state_and_tells_the_session_summarizer_forgetting_does_not():
    keys = StaticKeys()
    erased: list[str] = []
    core = sealed_core(keys, on_user_erased=erased.append)
    run(core, FACTS[:4])
    forgotten = make_envelope(UserForgotten(), user="bob", time=T0 + timedelta(days=5), producer="test")
    assert memory_record(core, b"bob", encode(forgotten, keys), 0) == []
    assert b"bob" not in core.states and erased == []
    gone = make_envelope(UserErased(), user="alice", time=T0 + timedelta(days=5), producer="test")
    memory_record(core, b"alice", encode(gone, keys), 0)
    assert b"alice" not in core.states and not any(k.startswith(b"alice\x00") for k in core.ledgers)
    assert not any(k.startswith((b"alice\x00", b"bob\x00")) for k in core.window_vectors.store)   # their window vectors too
    assert erased == ["alice"]


@pytest.mark.parametrize("forge", ["unsigned", "wrong key", "altered"])
def test_a_forged_control_event_acts_on_nothing(forge):
    """user.erased / user.forgotten / memory.forgotten / decay.ticked must carry the MAC of the key
    store's control key: one without it, made with another key, or altered after signing, drops nothing."""
    keys = StaticKeys()
    core = sealed_core(keys)
    outs = run(core, FACTS[:2])
    mid = next(o.envelope.data.memory_id for o in outs if o.envelope.type == "memory.created")
    before = (dict(core.states), dict(core.ledgers), dict(core.window_vectors.store))
    for data in (UserErased(), UserForgotten(), MemoryForgotten(memory_id=mid, memory_ids=[mid])):
        wire = orjson.loads(encode(make_envelope(data, user="alice", time=T0 + timedelta(days=5), producer="test"), keys))
        if forge == "unsigned":
            del wire["auth"]
        elif forge == "wrong key":
            wire["auth"]["mac"] = control_mac(b"\x01" * 32, b"anything")
        else:
            wire["time"] = "2027-01-01T00:00:00Z"
        with pytest.raises(InvalidEvent, match="proof of origin|fails its MAC"):
            decode(orjson.dumps(wire), keys)
        assert memory_record(core, b"alice", orjson.dumps(wire), 0) == []
    assert (dict(core.states), dict(core.ledgers), dict(core.window_vectors.store)) == before, "a forged control event changed the state"


def test_forgetting_a_memory_removes_it_from_the_window():
    keys = StaticKeys()
    core = sealed_core(keys)
    outs = run(core, FACTS[:2])
    mid = next(o.envelope.data.memory_id for o in outs if o.envelope.type == "memory.created")
    event = make_envelope(MemoryForgotten(memory_id=mid, memory_ids=[mid]), user="alice",
                          time=T0 + timedelta(days=2), producer="test")
    memory_record(core, b"alice", encode(event, keys), 0)
    state = core.load_state("alice")
    assert mid not in [r.memory_id for r in state.recent] and state.ledger.get(mid) is None


def test_own_output_and_unreadable_records_are_ignored():
    core = plain_core()
    outs = run(core, FACTS[:1])
    raw = encode(outs[0].envelope, StaticKeys())
    assert memory_record(core, b"alice", raw, 0) == []
    assert memory_record(core, b"alice", b"\xff not json", 0) == []
    assert memory_record(core, b"alice", None, 0) == []


def test_no_randomness_or_clock_in_the_core():
    """Two cores fed the same facts emit the same events, ids included (event times only)."""
    assert summary(run(plain_core())) == summary(run(plain_core()))


def test_state_values_hold_no_more_memory_than_their_bytes():
    """orjson.dumps keeps its whole growth buffer (a 171 KB result held ~2 MB): the values a state
    table keeps for every user must be exact-size copies, or RSS grows ~10x the state."""
    import tracemalloc

    import orjson

    from streams.memory_core import PlainStates
    big = orjson.dumps({"recent": ["x" * 1700] * 100})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [PlainStates().dump("u", "state:u", orjson.dumps({"recent": ["x" * 1700] * 100, "n": i})) for i in range(20)]
        held = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert all(len(k) >= len(big) for k in kept)
    assert held < 1.2 * len(big), f"{held:.0f} bytes held per {len(big)}-byte value"
