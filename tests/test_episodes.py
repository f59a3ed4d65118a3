"""Sessions become episodic memories: pure rules, then through the real pipeline."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from projections.queries import memories
from tests.helpers import unique_user, wait_for

T0 = datetime(2026, 5, 8, 13, 0, tzinfo=UTC)


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
    # what the user said, in the third person; the assistant's lines are not something the user told
    assert ep["content"].startswith("Conversation on 2026-05-08: User spent the weekend repairing their grandfather's sailboat")
    assert "sailboat" in ep["content"] and "wonderful" not in ep["content"] and " I " not in ep["content"]
    with psycopg.connect(settings.pg_dsn()) as conn:   # tied to its session in the read model
        (session,) = conn.execute(f'SELECT session FROM "{settings.namespace}".memory_items WHERE memory_id = %s',
                                  (ep["memory_id"],)).fetchone()
    assert session == "trip"
