"""The session summarizer's core, in-process: decoded turns in, events out, state in a dict.

The same class runs live (streams/session_summarizer.py drives it from the turns topic, state in
a faust table); these tests drive it directly, with the fast tier's key ring (tests/fast/inmemory.py)
and a stand-in embedder, so nothing here needs a model, an LLM or a service.
"""
from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from kernel.config import Settings
from kernel.ids import derived_id
from schemas.codec import decode, encode, make_envelope
from schemas.events import TurnRecorded, UserForgotten
from streams.session_core import FACTS, MEMORY, PRODUCER, SessionCore
from tests.fast.inmemory import KeyRing

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


class FakeEmbedder:
    """Deterministic vectors from the text's length: episodes need a vector, not a good one."""
    model = "fake-embedder"
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def passages(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[1.0, float(len(t) % 7), 0.5] for t in texts]

    def query(self, text: str) -> list[float]:
        return self.passages([text])[0]


def settings(**over) -> Settings:
    # a window of 2 x 2 messages, summarised by chunks of 2
    return Settings(partitions=3, short_term_turns=2, session_summary_chunk=2, session_idle_minutes=30.0, **over)


def core(keys=None, table=None, embedder=None) -> SessionCore:
    return SessionCore(settings(), keys or KeyRing(), {} if table is None else table, embedder)


def turn(user: str, session: str, i: int, at: datetime, role: str = "user", content: str | None = None):
    data = TurnRecorded(session=session, role=role, content=content or f"message {i} about the garden")
    return make_envelope(data, user=user, time=at, producer="test")


def take(c: SessionCore, env) -> list:
    async def go():
        return [out async for out in c.on_turn(env)]
    return asyncio.run(go())


def conversation(user="alice", session="s1", n=6, start=T0):
    return [turn(user, session, i, start + timedelta(minutes=i), role="user" if i % 2 == 0 else "assistant")
            for i in range(n)]


def summary(outs) -> list[tuple]:
    return [(o.topic, o.key, o.envelope.id, o.envelope.type, o.envelope.time, o.envelope.data.model_dump())
            for o in outs]


def test_a_window_that_overflows_by_a_chunk_is_summarised_once_on_the_memory_topic():
    c = core()
    turns = conversation()
    outs = [take(c, t) for t in turns]
    assert [len(o) for o in outs] == [0, 0, 0, 0, 0, 1]     # 6 messages = window 4 + chunk 2
    out = outs[-1][0]
    assert out.topic == MEMORY and out.key == "alice"
    env = out.envelope
    assert env.type == "session.summarized" and env.producer == PRODUCER
    assert env.id == derived_id(turns[-1].id, "session.summarized") and env.causation == turns[-1].id
    assert env.time == turns[-1].time
    d = env.data
    assert (d.session, d.summary_version, d.message_count, d.channel, d.model) == ("s1", 1, 2, "rule", None)
    assert d.through_event_id == turns[1].id and "garden" in d.summary
    state = c.load("alice", "s1")
    assert state is not None and state.version == 1 and len(state.buf) == 4


def test_the_state_is_sealed_with_the_users_key_and_unreadable_once_erased():
    keys = KeyRing()
    c = core(keys)
    for t in conversation(n=3):
        take(c, t)
    assert set(c.table) == {b"alice\x00s1"}
    assert all(b"garden" not in v for v in c.table.values())
    keys.erase("alice")
    assert c.load("alice", "s1") is None
    # a turn of a session whose state cannot be read any more emits and saves nothing
    before = dict(c.table)
    keys.key_for_write("alice")
    assert take(c, turn("alice", "s1", 9, T0 + timedelta(hours=1))) == [] and c.table == before


def test_state_is_saved_only_after_every_event_was_taken():
    """A driver that dies after sending the summary leaves the state unsaved; the re-read turn
    then emits exactly what a clean run emits (ids derived from the turn)."""
    turns = conversation()
    clean = core()
    for t in turns[:-1]:
        take(clean, t)
    keys = clean.keys
    crashed = core(keys, dict(clean.table))
    before = dict(crashed.table)

    async def first_only():
        step = crashed.on_turn(turns[-1])
        got = await step.__anext__()     # the summary was sent …
        await step.aclose()              # … and the process died before the rest
        return got
    sent = asyncio.run(first_only())
    assert crashed.table == before
    assert summary(take(crashed, turns[-1])) == summary([sent]) == summary(take(clean, turns[-1]))


def test_a_redelivered_turn_emits_nothing_new():
    c = core()
    turns = conversation()
    for t in turns:
        take(c, t)
    assert take(c, turns[-1]) == []          # already in the summary
    assert take(c, turns[-2]) == []          # still in the window


def test_two_cores_fed_the_same_turns_emit_the_same_events():
    keys = KeyRing()
    turns = conversation(n=10)
    a, b = core(keys), core(keys)
    assert summary(o for t in turns for o in take(a, t)) == summary(o for t in turns for o in take(b, t))


def test_the_summarised_chunk_and_an_idle_session_become_episodes_on_the_facts_topic():
    embedder = FakeEmbedder()
    c = core(embedder=embedder)
    morning = conversation(session="s1", n=6)
    outs = [o for t in morning for o in take(c, t)]
    assert [o.topic for o in outs] == [MEMORY, FACTS]          # the summary, then the chunk's episode
    chunk = outs[1].envelope
    assert chunk.type == "fact.extracted" and chunk.data.category == "episodic"
    assert chunk.data.session == "s1" and chunk.data.rule == "session.episode"
    assert chunk.id == derived_id(morning[-1].id, "episode:s1:1") and chunk.data.embed_model == "fake-embedder"
    assert c.load_open("alice") == ["s1"]
    # the user speaks in another session 2 hours later: s1 went idle, its untold messages are an episode
    later = turn("alice", "s2", 0, T0 + timedelta(hours=2))
    outs = take(c, later)
    assert [(o.topic, o.envelope.data.session) for o in outs] == [(FACTS, "s1")]
    assert outs[0].envelope.id == derived_id(later.id, "episode:s1:2") and outs[0].envelope.time == later.time
    assert c.load_open("alice") == ["s2"]
    assert len(embedder.calls) == 2                            # embedded once per turn, in one batch
    # still idle, nothing more to tell
    assert take(c, turn("alice", "s2", 1, T0 + timedelta(hours=3))) == []


def test_without_an_embedder_no_episodes_and_no_session_index():
    c = core()
    outs = [o for t in conversation(n=6) for o in take(c, t)]
    assert [o.topic for o in outs] == [MEMORY]
    assert b"alice\x00" not in c.table


def test_other_events_and_erased_turns_are_ignored():
    keys = KeyRing()
    c = core(keys)
    assert take(c, make_envelope(UserForgotten(), user="alice", time=T0, producer="test")) == []
    raw = encode(turn("alice", "s1", 0, T0), keys)
    keys.erase("alice")
    erased = decode(raw, keys)            # a turn read after its user's key was erased
    assert erased.erased
    assert take(c, erased) == [] and c.table == {}


def test_dropping_a_user_removes_only_that_users_sessions():
    c = core(embedder=FakeEmbedder())
    for user in ("alice", "alicia"):
        for t in conversation(user=user, n=3):
            take(c, t)
    c.drop_user("alice")
    assert c.table and all(k.startswith(b"alicia\x00") for k in c.table)
