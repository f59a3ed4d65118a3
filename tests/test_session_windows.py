"""Session windows on the real stack: the last MaxTurns × 2 messages, by event time, exactly once."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from projections.queries import session_window
from projections.runner import Item
from projections.session_windows import SessionWindowsProjector
from schemas.codec import decode
from tests.helpers import unique_user, wait_for
from tests.kafka_helpers import read_all

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def window(settings, user, session):
    return [(m["role"], m["content"]) for m in session_window(settings, user, session)]


def test_window_keeps_the_last_2x_max_turns_messages_by_event_time(settings, client, keys, pipeline):
    user = unique_user("sw")
    assert settings.short_term_turns * 2 == 20
    roles = ["user", "assistant"]
    for n in range(25):
        client.record_turn(user, "s1", roles[n % 2], f"message {n}", at=T0 + timedelta(seconds=n))
    client.record_turn(user, "s2", "user", "another session has its own window", at=T0)
    expected = [(roles[n % 2], f"message {n}") for n in range(5, 25)]
    wait_for(lambda: window(settings, user, "s1") == expected, what="the newest 20 messages")
    rows = session_window(settings, user, "s1")
    assert rows[0]["time"] == (T0 + timedelta(seconds=5)).isoformat()
    assert all(r["event_id"] for r in rows)

    # A late turn from before the window (event time, not arrival, orders it) changes nothing;
    # one in the middle of the window pushes the oldest out.
    client.record_turn(user, "s1", "user", "late and old", at=T0 - timedelta(seconds=1))
    client.record_turn(user, "s1", "user", "late but recent", at=T0 + timedelta(seconds=20, milliseconds=500))
    expected = expected[1:16] + [("user", "late but recent")] + expected[16:]
    wait_for(lambda: window(settings, user, "s1") == expected, what="the late turn in event-time order")
    assert window(settings, user, "s2") == [("user", "another session has its own window")]

    # Every turn of the user again, at other offsets and in reverse: nothing changes.
    mine = [m for m in read_all(settings, settings.topic("turns")) if m.key() == user.encode()]
    items = [Item(m.topic(), m.partition(), m.offset() + 10_000, decode(m.value(), keys)) for m in mine]
    direct = SessionWindowsProjector(settings)
    direct.setup()
    try:
        before = direct.checksum()
        direct.apply(items, {})
        direct.apply([replace(i, offset=i.offset + 1) for i in reversed(items)], {})
        assert direct.checksum() == before
    finally:
        direct.close()
    assert window(settings, user, "s1") == expected
