"""Sessions become episodic memories: pure rules, then through the real pipeline."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from memstream.domain.sessions import SessionState, add_turn, episode_content, idle_sessions, tell, untold
from projections.queries import memories
from tests.helpers import unique_user, wait_for

T0 = datetime(2026, 5, 8, 13, 0, tzinfo=UTC)


def msgs(*texts, role="user", start=0.0):
    return [[start + i, f"id{start + i:08.1f}", role, t] for i, t in enumerate(texts)]


def test_an_episode_tells_each_message_once():
    state = SessionState()
    first = msgs("I went hiking", "it rained")
    assert untold(state, first) == first
    assert tell(state, first) == 1
    assert untold(state, first) == []
    later = first + msgs("we saw a deer", start=10.0)
    assert untold(state, later) == later[2:]
    assert tell(state, later[2:]) == 2
    # the state survives its serialised form, old states (without episode fields) load too
    again = SessionState.from_dict(state.to_dict())
    assert again.episode_through == state.episode_through and again.episodes == 2
    old = {k: v for k, v in state.to_dict().items() if k not in ("episode_through", "episodes")}
    assert SessionState.from_dict(old).episodes == 0


def test_episode_content_needs_the_user_to_have_said_something():
    assert episode_content("2026-05-08", msgs("hello, how can I help?", role="assistant"), 600) is None
    text = episode_content("2026-05-08", msgs("I adopted a cat. She is called Miso") + msgs("Lovely!", role="assistant", start=5), 600)
    assert text == "Conversation on 2026-05-08: User: I adopted a cat. She is called Miso / Assistant: Lovely!"
    assert len(episode_content("2026-05-08", msgs(*["word " * 40] * 30), 200)) == 200


def test_idle_sessions_are_the_others_quiet_for_long_enough():
    open_sessions = {"a": 0.0, "b": 3000.0, "c": 100.0}
    assert idle_sessions(open_sessions, "c", 3600.0, 1800.0) == ["a"]
    assert idle_sessions(open_sessions, "a", 1000.0, 1800.0) == []


def test_chunks_summarised_and_idle_sessions_become_episodic_memories(settings, client, pipeline):
    user = unique_user("ep")
    lines = ["I spent the weekend repairing my grandfather's sailboat", "It needed a new mast and fresh paint",
             "We finally took it out on the lake on Sunday"]
    for i, text in enumerate(lines):
        client.record_turn(user, "trip", "user", text, at=T0 + timedelta(minutes=i))
        client.record_turn(user, "trip", "assistant", "That sounds wonderful", at=T0 + timedelta(minutes=i, seconds=30))
    # a new session a day later closes the first one
    client.record_turn(user, "next-day", "user", "Good morning", at=T0 + timedelta(days=1))
    episode = wait_for(lambda: [m for m in memories(settings, user)
                                if m["category"] == "episodic" and m["content"].startswith("Conversation on")],
                       timeout=120, what="an episodic memory of the first session")
    (ep,) = episode       # one: the second session is still open
    assert ep["content"].startswith("Conversation on 2026-05-08: User: I spent the weekend repairing")
    assert "sailboat" in ep["content"] and "Assistant: That sounds wonderful" in ep["content"]
    with psycopg.connect(settings.pg_dsn()) as conn:   # tied to its session in the read model
        (session,) = conn.execute(f'SELECT session FROM "{settings.namespace}".memory_items WHERE memory_id = %s',
                                  (ep["memory_id"],)).fetchone()
    assert session == "trip"
