"""The recent window's vectors stored apart (streams/window_vectors.py): written once, read back
exact, safe against a crash at any write, bounded in slots, gone with the user."""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from domain.memory_state import Rules, UserState
from kernel.config import Settings
from streams.memory_core import STATE_SPLIT, MemoryCore, SealedStates
from streams.routing import partitioner
from streams.window_vectors import WindowVectorMissing
from tests.fast.test_memory_core import RULES, T0, StaticKeys, fact, settings, summary, unit


class Crash(Exception):
    pass


class CountingStore(dict):
    """A table that counts its writes."""

    def __init__(self):
        super().__init__()
        self.writes = 0

    def __setitem__(self, key, value):
        self.writes += 1
        super().__setitem__(key, value)


def history(n: int = 40, seed: int = 7):
    """Facts of one user that create, reinforce, link and merge: many near a few directions."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((4, 8))
    out = []
    for i in range(n):
        v = base[i % 4] + rng.normal(scale=0.05 if i % 3 else 0.6, size=8)
        out.append(fact("ana", unit(*v), T0 + timedelta(hours=6 * i), content=f"Ana fact {i}",
                        key="location" if i % 7 == 0 else None, value=f"city {i}" if i % 7 == 0 else None))
    return out


def core_over(keys, states, ledgers, vectors, cache_mb: int = 96) -> MemoryCore:
    return MemoryCore(settings(memory_vector_cache_mb=cache_mb), RULES, keys, states, ledgers, SealedStates(keys),
                      partition_of=partitioner(3), vectors=vectors)


def test_a_vector_is_written_when_it_enters_the_window_not_on_every_fact():
    keys = StaticKeys()
    vectors = CountingStore()
    core = core_over(keys, {}, {}, vectors)
    created = 0
    for f in history():
        outs = list(core.on_fact(f))
        created += sum(o.envelope.type == "memory.created" for o in outs)
    # every memory that entered the window was written once (merges add a few rewrites), not 40 × the window
    assert created <= vectors.writes <= created + 10, (created, vectors.writes)
    state = core.load_state("ana")
    assert len(vectors) == len(state.recent) == RULES.recent_window   # slots left behind were popped
    value = core.states[b"ana"]
    for r in state.recent:   # the state value names the vectors, it does not hold them
        assert r.vec.astype("<f4").tobytes()[:16] not in value and r.vec.astype("<f4").tobytes()[:16] not in b"".join(vectors.values())


def test_loaded_from_the_table_or_the_cache_the_state_and_decisions_are_the_same():
    keys = StaticKeys()
    facts = history()
    cached, uncached = core_over(keys, {}, {}, {}), core_over(keys, {}, {}, {}, cache_mb=0)
    assert [summary(cached.on_fact(f)) for f in facts] == [summary(uncached.on_fact(f)) for f in facts]
    assert cached.load_state("ana") == uncached.load_state("ana")
    # a new core over the tables (a restart: nothing cached) reads the state exactly
    restarted = core_over(keys, dict(cached.states), dict(cached.ledgers), dict(cached.window_vectors.store))
    again, first = restarted.load_state("ana"), cached.load_state("ana")
    assert again == first
    for x, y in zip(again.recent, first.recent, strict=True):
        assert x.vec.dtype == np.float32 and np.array_equal(x.vec, y.vec)


@pytest.mark.parametrize("die_at", range(1, 30))
def test_a_crash_at_any_write_of_a_save_loses_and_changes_nothing(die_at):
    """The worker dies at the (3n)-th table write (vectors, then ledger, then state, of some fact):
    a new worker over the same tables, nothing cached, re-decides that fact, and ends where a run
    without the crash ends, with the same decisions."""
    keys = StaticKeys()
    facts = history(24)
    clean = core_over(keys, {}, {}, {})
    clean_out = [summary(clean.on_fact(f)) for f in facts]

    writes = {"n": 0}

    class Dying(dict):
        def __setitem__(self, key, value):
            writes["n"] += 1
            if writes["n"] == die_at * 3:
                raise Crash("killed")
            dict.__setitem__(self, key, value)

    vectors, states, ledgers = Dying(), Dying(), Dying()
    core = core_over(keys, states, ledgers, vectors)
    out, i = [], 0
    while i < len(facts):
        try:
            emitted = summary(core.on_fact(facts[i]))
        except Crash:
            # 1. the process is gone (its cache too); 2. a new one restores the tables as they are
            core = core_over(keys, states, ledgers, vectors)
            continue   # 3. the fact is read again
        out.append(emitted)
        i += 1
    assert out == clean_out
    after, expected = core.load_state("ana").to_dict(), clean.load_state("ana").to_dict()
    # The aging plan may differ after a crash between two ledger buckets (so it did before the
    # vectors moved out): a bucket written before the crash is not dirty when re-decided. It may
    # only err early (due sooner), which costs a read, never a missed transition.
    plan, clean_plan = after.pop("aging")["plan"], expected.pop("aging")["plan"]
    for (b, due, _), (_, clean_due, _) in zip(plan, clean_plan, strict=True):
        assert (due if due is not None else float("inf")) <= (clean_due if clean_due is not None else float("inf")), b
    assert after == expected


def test_slots_stay_below_twice_the_window_and_the_user_leaves_none_behind():
    keys = StaticKeys()
    core = core_over(keys, {}, {}, {})
    for f in history(80, seed=11):
        list(core.on_fact(f))
    slots = [int(k.split(b"\x00")[2]) for k in core.window_vectors.store if k.startswith(b"ana\x00")]
    assert slots and max(slots) < 2 * RULES.recent_window
    core.drop_user("ana", erased=True)
    assert not core.window_vectors.store and not core.window_vectors._cache


def test_a_state_with_its_vectors_inline_still_reads_and_is_stored_apart_when_next_saved():
    keys = StaticKeys()
    facts = history(20)
    split = core_over(keys, {}, {}, {})
    for f in facts[:12]:
        list(split.on_fact(f))
    state = split.load_state("ana")
    # the value as a worker before this change stored it: UserState.to_bytes, vectors inline
    inline = core_over(keys, {b"ana": SealedStates(keys).dump("ana", "state:ana", state.to_bytes())},
                       dict(split.ledgers), {})
    assert inline.load_state("ana") == state
    assert [summary(inline.on_fact(f)) for f in facts[12:]] == [summary(split.on_fact(f)) for f in facts[12:]]
    opened = SealedStates(keys).load("ana", "state:ana", inline.states[b"ana"])
    assert opened.startswith(STATE_SPLIT) and len(inline.window_vectors.store) == RULES.recent_window


def test_a_state_whose_vector_is_missing_fails_loudly_not_silently():
    keys = StaticKeys()
    core = core_over(keys, {}, {}, {}, cache_mb=0)
    for f in history(10):
        list(core.on_fact(f))
    victim = next(iter(core.window_vectors.store))
    del core.window_vectors.store[victim]
    with pytest.raises(WindowVectorMissing):
        core.load_state("ana")


def test_the_cache_is_bounded_and_dropped_on_erasure():
    keys = StaticKeys()
    core = core_over(keys, {}, {}, {}, cache_mb=1)   # 1 MiB: ~680 vectors of 384 floats
    dim = 384
    rng = np.random.default_rng(5)
    for u in range(180):   # 900 window vectors: 1.3 MiB
        for i in range(RULES.recent_window):
            list(core.on_fact(fact(f"u{u}", unit(*rng.standard_normal(dim)), T0 + timedelta(minutes=i), content=f"fact {u}.{i}")))
    assert core.window_vectors._cached <= 1024 * 1024
    assert 100 < len(core.window_vectors._cache) < 180
    held = next(iter(core.window_vectors._cache))
    core.drop_user(held, erased=True)
    assert held not in core.window_vectors._cache
    assert isinstance(core.load_state("u0"), UserState)   # out of the cache: read from the table


def test_stored_apart_or_inline_the_decisions_are_the_same():
    """The same facts through a core that stores the window's vectors apart (and caches them) and
    one whose state is put back after every fact as the worker stored it before (vectors inline,
    nothing cached): identical decisions, at the worker's own settings and 384-d vectors."""
    s = Settings(partitions=3)
    rules = Rules.from_settings(s)
    keys = StaticKeys()
    rng = np.random.default_rng(3)
    pool = rng.standard_normal((16, 384))
    apart = MemoryCore(s, rules, keys, {}, {}, SealedStates(keys), partition_of=partitioner(3))
    inline = MemoryCore(s, rules, keys, {}, {}, SealedStates(keys), partition_of=partitioner(3))
    types: set[str] = set()
    for i in range(600):
        v = pool[rng.integers(16)] + rng.normal(scale=0.15 if i % 3 else 0.6, size=384)
        f = fact("ana", unit(*v), T0 + timedelta(minutes=7 * i), content=f"Ana thing {i % 200}",
                 key="location" if i % 3 == 0 else None, value=f"city {i % 5}" if i % 3 == 0 else None)
        outs = summary(apart.on_fact(f))
        assert outs == summary(inline.on_fact(f)), i
        types.update(o[2] for o in outs)
        state = inline.load_state("ana")
        inline.states[b"ana"] = SealedStates(keys).dump("ana", "state:ana", state.to_bytes())
        inline.window_vectors.store.clear()
        inline.window_vectors.forget_cached()
    assert apart.load_state("ana") == inline.load_state("ana")
    # merges move a window vector, reinforcements and links keep it: all of them happened
    assert {"memory.merged", "memory.reinforced", "memory.linked", "memory.created"} <= types, types
