"""Task ring buffers on the real stack: the newest N steps, reset on task.started, exactly once."""
from __future__ import annotations

from dataclasses import replace

from projections.queries import task_status, task_steps
from projections.runner import Item, ProjectorRunner
from projections.task_buffers import TaskBuffersProjector
from schemas.codec import decode
from tests.helpers import unique_user, wait_for
from tests.kafka_helpers import read_all


def contents(settings, user, task, k=50):
    return [s["content"] for s in task_steps(settings, user, task, k)]


def test_ring_buffer_keeps_the_last_20_of_25_steps_in_order(settings, client, pipeline):
    user = unique_user("tb")
    client.start_task(user, "t1", goal="book a flight")
    for n in range(25):
        client.record_step(user, "t1", f"step {n}", kind="tool_call" if n % 2 else "observation")
    expected = [f"step {n}" for n in range(5, 25)]
    assert settings.task_buffer_size == 20
    wait_for(lambda: contents(settings, user, "t1") == expected, what="the newest 20 steps")
    steps = task_steps(settings, user, "t1")
    assert [s["kind"] for s in steps[:2]] == ["tool_call", "observation"]
    assert contents(settings, user, "t1", k=3) == ["step 22", "step 23", "step 24"]
    assert task_status(settings, user, "t1")["status"] == "running"

    client.finish_task(user, "t1", status="failed")
    wait_for(lambda: task_status(settings, user, "t1")["status"] == "failed", what="task finished")
    assert contents(settings, user, "t1") == expected, "finishing keeps the buffer"


def test_a_new_task_started_resets_the_buffer(settings, client, pipeline):
    user = unique_user("tb")
    client.start_task(user, "t", goal="first try")
    for n in range(3):
        client.record_step(user, "t", f"old {n}")
    client.record_step(user, "other", "another task keeps its steps")
    client.finish_task(user, "t", status="failed")
    wait_for(lambda: task_status(settings, user, "t")["status"] == "failed", what="first run finished")

    client.start_task(user, "t", goal="second try")
    client.record_step(user, "t", "new 0")
    client.record_step(user, "t", "new 1")
    wait_for(lambda: contents(settings, user, "t") == ["new 0", "new 1"], what="only the new run's steps")
    status = task_status(settings, user, "t")
    assert status["status"] == "running" and status["goal"] == "second try" and status["finished_at"] is None
    assert contents(settings, user, "other") == ["another task keeps its steps"]


def test_restart_and_reapplying_apply_nothing_twice(settings, client, keys, pipeline):
    user = unique_user("tb")
    client.start_task(user, "t")
    for n in range(23):
        client.record_step(user, "t", f"s{n}")
    wait_for(lambda: contents(settings, user, "t")[-1:] == ["s22"], what="the last step")
    expected = contents(settings, user, "t")

    # A second projector over the same tables, with its own name (positions) and group: it
    # re-applies the whole log the live one already applied, which must change nothing …
    direct = TaskBuffersProjector(settings)
    direct.setup()
    try:
        before = direct.checksum()
        projector = TaskBuffersProjector(settings)
        projector.name = "task-buffers-rerun"
        first = ProjectorRunner(projector, settings, keys, group_suffix="-rerun")
        first.run(idle_exit_after=3.0)
        assert first.applied > 0
        # … and a restart under the same name resumes from its stored positions.
        again = TaskBuffersProjector(settings)
        again.name = projector.name
        second = ProjectorRunner(again, settings, keys, group_suffix="-rerun2")
        second.run(idle_exit_after=3.0)
        assert second.applied == 0, "resumed from its stored positions, nothing applied twice"

        # The same events once more, at other offsets (a re-emit), written directly.
        mine = [m for m in read_all(settings, settings.topic("tasks")) if m.key() == user.encode()]
        items = [Item(m.topic(), m.partition(), m.offset() + 10_000, decode(m.value(), keys)) for m in mine]
        direct.apply(items, {})
        direct.apply([replace(i, offset=i.offset + 1) for i in reversed(items)], {})
        after = direct.checksum()
    finally:
        direct.close()
    assert after == before
    assert contents(settings, user, "t") == expected == [f"s{n}" for n in range(3, 23)]
