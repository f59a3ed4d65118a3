"""Task ring buffers: the last `task_buffer_size` steps per (user, task), and the task's status.

What the buffer holds is defined by the events, not by the order they were applied in, so
re-applying any event (even a duplicate at another offset) changes nothing:
- a task's current run starts at its newest `task.started`, ordered by (event time, offset);
- the buffer is the newest N steps of that run, ordered the same way.
A step older than the run start or than the N newest is inserted and trimmed straight away, or
not inserted at all. Offsets compare only within one partition, which holds all of a user's
task events (key = user id).

Erasure arrives on the memory topic, so this projector reads it too (ignoring everything else
there). Topics interleave arbitrarily, above all on replay, so an erasure leaves a tombstone:
no event of the user is written afterwards, whichever topic the projector happens to read first.
"""
from __future__ import annotations


from kernel.config import Settings
from projections import pg
from projections.postgres_projectors import _PostgresProjector
from projections.runner import Item, kind_by_type, runs_by_kind

DDL = """
CREATE TABLE IF NOT EXISTS {s}.task_buffer_tasks (
    user_id        text NOT NULL,
    task_id        text NOT NULL,
    session        text,
    goal           text,
    status         text NOT NULL,          -- running | succeeded | failed | abandoned
    started_event  text,                   -- NULL: steps arrived without a task.started
    started_at     timestamptz,
    start_offset   bigint,
    finished_event text,
    finished_at    timestamptz,
    finish_offset  bigint,
    PRIMARY KEY (user_id, task_id)
);
CREATE TABLE IF NOT EXISTS {s}.task_buffer_steps (
    event_id    text PRIMARY KEY,
    user_id     text NOT NULL,
    task_id     text NOT NULL,
    session     text,
    kind        text NOT NULL,
    status      text NOT NULL,
    content     text NOT NULL,
    observed_at timestamptz NOT NULL,
    log_offset  bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS task_buffer_steps_order ON {s}.task_buffer_steps (user_id, task_id, observed_at, log_offset);
CREATE TABLE IF NOT EXISTS {s}.task_buffer_erasures (
    event_id  text PRIMARY KEY,
    user_id   text NOT NULL,
    erased_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS task_buffer_erasures_user ON {s}.task_buffer_erasures (user_id, erased_at);
"""

# Shared by every statement that writes a row of `user`: never for an erased user, whatever the
# event's time (an erased user never gets a key again, so an event newer than the erasure can only
# be one sealed with a key cached somewhere while it happened: projections/session_windows.py).
_NOT_ERASED = "NOT EXISTS (SELECT 1 FROM {s}.task_buffer_erasures e WHERE e.user_id = %(user)s)"
# (user, task) pairs a run touched, passed as two parallel arrays.
_PAIRS = "IN (SELECT * FROM unnest(%s::text[], %s::text[]))"


def ensure_tables(settings: Settings) -> None:
    pg.ensure_ddl(settings, DDL)


def _pairs(run: list[Item]) -> tuple[list[str], list[str]]:
    pairs = sorted({(i.event.user, i.event.data.task) for i in run})
    return [u for u, _ in pairs], [t for _, t in pairs]


class TaskBuffersProjector(_PostgresProjector):
    """task.started / step.observed / task.finished (+ user.erased) → task_buffer_tasks, task_buffer_steps."""

    name = "task-buffers"
    topics = ("tasks", "memory")
    CHECKSUM = {
        "task_buffer_tasks": (["user_id", "task_id", "session", "goal", "status", "started_event", "started_at",
                               "finished_event", "finished_at"], ["user_id", "task_id"]),
        "task_buffer_steps": (["event_id", "user_id", "task_id", "session", "kind", "status", "content", "observed_at"],
                              ["event_id"]),
    }
    kind_of = staticmethod(kind_by_type({"user.erased": "erase", "task.started": "start",
                                         "step.observed": "step", "task.finished": "finish"}))

    def setup(self) -> None:
        super().setup()
        ensure_tables(self.settings)

    def write(self, cur, items: list[Item]) -> None:
        for kind, run in runs_by_kind(items, self.kind_of):
            getattr(self, f"_{kind}")(cur, run)

    def _start(self, cur, run: list[Item]) -> None:
        # 1. The newest start of each task wins; a duplicate of the current one (same id) is a no-op.
        cur.executemany(self.q(
            "INSERT INTO {s}.task_buffer_tasks AS t (user_id, task_id, session, goal, status, started_event, started_at, start_offset) "
            "SELECT %(user)s, %(task)s, %(session)s, %(goal)s, 'running', %(id)s, %(time)s, %(offset)s WHERE " + _NOT_ERASED + " "
            "ON CONFLICT (user_id, task_id) DO UPDATE SET session = EXCLUDED.session, goal = EXCLUDED.goal, status = 'running', "
            "started_event = EXCLUDED.started_event, started_at = EXCLUDED.started_at, start_offset = EXCLUDED.start_offset, "
            "finished_event = NULL, finished_at = NULL, finish_offset = NULL "
            "WHERE t.started_event IS DISTINCT FROM EXCLUDED.started_event AND (t.started_at IS NULL "
            "OR (t.started_at, t.start_offset) < (EXCLUDED.started_at, EXCLUDED.start_offset))"),
            [{"user": i.event.user, "task": d.task, "session": d.session, "goal": d.goal, "id": i.event.id,
              "time": i.event.time, "offset": i.offset} for i in run for d in (i.event.data,)])
        # 2. Reset: steps older than the run's start leave the buffer.
        cur.execute(self.q(
            "DELETE FROM {s}.task_buffer_steps s USING {s}.task_buffer_tasks t "
            "WHERE s.user_id = t.user_id AND s.task_id = t.task_id AND t.started_at IS NOT NULL "
            "AND (s.observed_at, s.log_offset) < (t.started_at, t.start_offset) AND (t.user_id, t.task_id) " + _PAIRS),
            _pairs(run))

    def _step(self, cur, run: list[Item]) -> None:
        rows = [{"user": i.event.user, "task": d.task, "session": d.session, "kind": d.kind, "status": d.status,
                 "content": d.content, "id": i.event.id, "time": i.event.time, "offset": i.offset}
                for i in run for d in (i.event.data,)]
        # 1. A task seen only through its steps still gets a status row.
        cur.executemany(self.q(
            "INSERT INTO {s}.task_buffer_tasks (user_id, task_id, session, status) "
            "SELECT %(user)s, %(task)s, %(session)s, 'running' WHERE " + _NOT_ERASED + " ON CONFLICT DO NOTHING"), rows)
        # 2. Steps of the current run only (newer than its start), once per event id.
        cur.executemany(self.q(
            "INSERT INTO {s}.task_buffer_steps (event_id, user_id, task_id, session, kind, status, content, observed_at, log_offset) "
            "SELECT %(id)s, %(user)s, %(task)s, %(session)s, %(kind)s, %(status)s, %(content)s, %(time)s, %(offset)s "
            "WHERE " + _NOT_ERASED + " AND NOT EXISTS (SELECT 1 FROM {s}.task_buffer_tasks t "
            "WHERE t.user_id = %(user)s AND t.task_id = %(task)s AND (t.started_at, t.start_offset) >= (%(time)s, %(offset)s)) "
            "ON CONFLICT (event_id) DO NOTHING"), rows)
        # 3. Trim each touched buffer to its newest N (after the whole run: the result is the same).
        users, tasks = _pairs(run)
        cur.execute(self.q(
            "DELETE FROM {s}.task_buffer_steps s USING (SELECT event_id, row_number() OVER (PARTITION BY user_id, task_id "
            "ORDER BY observed_at DESC, log_offset DESC, event_id DESC) AS rn FROM {s}.task_buffer_steps WHERE (user_id, task_id) " + _PAIRS + ") old "
            "WHERE s.event_id = old.event_id AND old.rn > %s"), (users, tasks, self.settings.task_buffer_size))

    def _finish(self, cur, run: list[Item]) -> None:
        # Updates only: a finish alone (its start erased or never seen) creates nothing. It must
        # belong to the current run and be its newest finish; the same finish again is a no-op.
        cur.executemany(self.q(
            "UPDATE {s}.task_buffer_tasks t SET status = %(status)s, finished_event = %(id)s, finished_at = %(time)s, "
            "finish_offset = %(offset)s WHERE t.user_id = %(user)s AND t.task_id = %(task)s "
            "AND t.finished_event IS DISTINCT FROM %(id)s "
            "AND (t.started_at IS NULL OR (t.started_at, t.start_offset) < (%(time)s, %(offset)s)) "
            "AND (t.finished_at IS NULL OR (t.finished_at, t.finish_offset) < (%(time)s, %(offset)s))"),
            [{"user": i.event.user, "task": i.event.data.task, "status": i.event.data.status, "id": i.event.id,
              "time": i.event.time, "offset": i.offset} for i in run])

    def _erase(self, cur, run: list[Item]) -> None:
        for i in run:
            # 1. The tombstone, once per erasure event: a duplicate must not delete rows written since.
            cur.execute(self.q("INSERT INTO {s}.task_buffer_erasures (event_id, user_id, erased_at) VALUES (%s, %s, %s) "
                               "ON CONFLICT DO NOTHING"), (i.event.id, i.event.user, i.event.time))
            # 2. Everything of the user goes.
            if cur.rowcount:
                self.erase_users(cur, [i.event.user], ("task_buffer_steps", "task_buffer_tasks"))
