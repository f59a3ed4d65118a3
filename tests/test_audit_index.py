"""The audit index: memory_ids_of (pure), positions as published, and what erasure leaves behind."""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from adapters.erasure import erase_user
from projections.audit_index import AuditIndexProjector
from projections.queries import audit_events, memories, session_window, task_status, task_steps
from projections.runner import Item, ProjectorRunner
from projections.session_windows import SessionWindowsProjector
from projections.task_buffers import TaskBuffersProjector
from schemas.envelope import Envelope
from tests.helpers import unique_user, wait_for
from tests.fast.test_audit_ids import NOW

AUDIT_COLUMNS = {"event_id", "user_id", "type", "version", "event_time", "topic", "partition", "offset",
                 "causation_id", "correlation_id", "producer", "memory_ids"}


# -- memory_ids_of: pure --------------------------------------------------------------------


# -- on the real stack ----------------------------------------------------------------------

def by_position(rows):
    return {(r["topic"], r["partition"], r["offset"]): r for r in rows}


def test_audit_rows_carry_the_published_positions_and_no_content(settings, client, pipeline):
    user = unique_user("au")
    turn = client.record_turn(user, "s1", "user", "I like oolong tea")
    start = client.start_task(user, "t1", goal="brew")
    step = client.record_step(user, "t1", "boil water")
    rows = wait_for(lambda: (r := by_position(audit_events(settings, user))) and all(
        (p.topic, p.partition, p.offset) in r for p in (turn, start, step)) and r, what="the three published events")
    for pos, type_ in ((turn, "turn.recorded"), (start, "task.started"), (step, "step.observed")):
        row = rows[(pos.topic, pos.partition, pos.offset)]
        assert (row["type"], row["user_id"], row["producer"]) == (type_, user, "sdk/1")
        assert set(row) == AUDIT_COLUMNS, "ids, types, times and positions only: no content"
    assert rows[(turn.topic, turn.partition, turn.offset)]["version"] == 2
    turn_id = rows[(turn.topic, turn.partition, turn.offset)]["event_id"]

    # The memory's life, read back by its id (a new memory takes its fact's id): extracted from
    # the turn, created, set as a preference.
    memory_id = wait_for(lambda: (m := memories(settings, user)) and m[0]["memory_id"], what="the memory")
    wanted = ["fact.extracted", "memory.created", "preference.set"]
    life = wait_for(lambda: (a := audit_events(settings, memory_id=memory_id)) and [r["type"] for r in a] == wanted and a,
                    what="the memory's life")
    assert [r["topic"] for r in life] == [settings.topic("facts"), settings.topic("memory"), settings.topic("memory")]
    assert all(r["user_id"] == user and r["correlation_id"] == turn_id and r["memory_ids"] == [memory_id] for r in life)
    assert life[0]["causation_id"] == turn_id


@pytest.fixture
def private(settings):
    """A namespace of its own for a projector fed events that are not in the log: rows written
    into the session's namespace would make `replay verify` over it (test_memories_replay.py)
    find rows no replay can produce."""
    from replay.stores import drop_schema, shadow_settings
    own = shadow_settings(settings, "audit" + uuid.uuid4().hex[:6])
    projector = AuditIndexProjector(own)
    projector.setup()
    try:
        yield own, projector
    finally:
        projector.close()
        drop_schema(settings, own.namespace)


def test_an_erased_event_is_still_indexed_without_its_memory_ids(private):
    own, projector = private
    user = unique_user("unreadable")
    event = Envelope(str(uuid.uuid4()), "memory.created", 1, user, NOW, None, "corr", "memory/1", None, 1)
    projector.apply([Item(own.topic("memory"), 0, 1_000_000, event)], {})
    [row] = audit_events(own, user)
    assert (row["event_id"], row["type"], row["offset"], row["memory_ids"]) == (event.id, "memory.created", 1_000_000, [])


def test_erasure_leaves_only_its_record_and_empties_buffers_and_windows(settings, client, keys, pipeline):
    victim, bystander = unique_user("gone"), unique_user("stays")
    for user in (victim, bystander):
        client.record_turn(user, "s1", "user", "I like green tea")
        client.start_task(user, "t1")
        client.record_step(user, "t1", "step a")
        client.record_step(user, "t1", "step b")
    for user in (victim, bystander):
        wait_for(lambda: {"turn.recorded", "fact.extracted", "memory.created", "preference.set", "task.started",
                          "step.observed"} <= {r["type"] for r in audit_events(settings, user)}
                 and len(task_steps(settings, user, "t1")) == 2 and len(session_window(settings, user, "s1")) == 1,
                 what=f"{user} projected")
    kept = (audit_events(settings, bystander), task_steps(settings, bystander, "t1"),
            session_window(settings, bystander, "s1"), task_status(settings, bystander, "t1"))

    erased_at = erase_user(settings, victim, requested_by="test")

    def only_the_record():
        rows = audit_events(settings, victim)
        return len(rows) == 1 and rows[0]["type"] == "user.erased" and rows
    [record] = wait_for(only_the_record, what="only the erasure record")
    assert (record["topic"], record["partition"], record["offset"]) == (erased_at.topic, erased_at.partition, erased_at.offset)
    wait_for(lambda: not task_steps(settings, victim, "t1") and task_status(settings, victim, "t1") is None
             and not session_window(settings, victim, "s1"), what="victim's buffers and windows empty")

    # Replay after the erasure (fresh positions, every topic in whatever order): the victim's
    # old events, now unreadable, stay out; nothing of the bystander changes.
    for cls in (AuditIndexProjector, TaskBuffersProjector, SessionWindowsProjector):
        projector = cls(settings)
        projector.name += "-replay"
        ProjectorRunner(projector, settings, keys, group_suffix="-replay").run(idle_exit_after=3.0)
    assert audit_events(settings, victim) == [record]
    assert not task_steps(settings, victim, "t1") and not session_window(settings, victim, "s1")
    assert (audit_events(settings, bystander), task_steps(settings, bystander, "t1"),
            session_window(settings, bystander, "s1"), task_status(settings, bystander, "t1")) == kept


def test_erasure_leaves_the_same_rows_whichever_topic_is_read_first(private):
    """An event dated after an erasure (a fact of a turn sealed with a key some process still had
    cached, so read with its memory ids) is indexed the same way whether its topic is read before
    the erasure's (live, where the facts stage ran ahead) or after it, as replay does, reading it
    without the key: kept, without memory ids. What `replay verify` compares."""
    own, projector = private
    rows = {}
    for order in ("fact first", "erasure first"):
        user = unique_user("erase-order")
        erased = Envelope(str(uuid.uuid4()), "user.erased", 1, user, NOW, None, "corr", "operator/1", None, 1)
        mid_before, mid_after = str(uuid.uuid4()), str(uuid.uuid4())
        # read with the key: the fact's data, whose fact_id is the memory id the index keeps
        before = Envelope(mid_before, "fact.extracted", 1, user, NOW - timedelta(seconds=1), None, "corr",
                          "extractor/1", {"fact_id": mid_before}, 1)
        after = Envelope(mid_after, "fact.extracted", 1, user, NOW + timedelta(seconds=1), None, "corr",
                         "extractor/1", {"fact_id": mid_after}, 1)
        facts = [Item(own.topic("facts"), 0, 2_000_000, before), Item(own.topic("facts"), 0, 2_000_001, after)]
        erasure = [Item(own.topic("memory"), 0, 2_000_000, erased)]
        for batch in ((facts, erasure) if order == "fact first" else (erasure, facts)):
            projector.apply(batch, {})
        rows[order] = sorted((r["type"], r["event_time"], tuple(r["memory_ids"])) for r in audit_events(own, user))
    assert rows["fact first"] == rows["erasure first"], rows
    assert rows["fact first"] == [("fact.extracted", (NOW + timedelta(seconds=1)).isoformat(), ()),
                                  ("user.erased", NOW.isoformat(), ())], rows
