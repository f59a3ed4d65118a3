"""Read-model queries used by the CLI (and later the HTTP API): always scoped to one user."""
from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from memstream.config import Settings
from projections import pg


def _read(settings: Settings, query: str, params: tuple) -> list[dict]:
    with pg.connect(settings, autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(sql.SQL(query).format(s=pg.schema(settings)), params)
        except psycopg.errors.UndefinedTable:
            return []  # no projector has run in this namespace yet: nothing is known
        return cur.fetchall()


def preferences(settings: Settings, user: str) -> list[dict]:
    rows = _read(settings, "SELECT key, value, version, event_id, memory_id, updated_at FROM {s}.preferences "
                           "WHERE user_id = %s ORDER BY key", (user,))
    return [{**r, "updated_at": r["updated_at"].isoformat()} for r in rows]


def memories(settings: Settings, user: str, limit: int = 100) -> list[dict]:
    rows = _read(settings, "SELECT memory_id, content, category, key, value, tags, importance, status, superseded_by, access_count, created_at "
                           "FROM {s}.memory_items WHERE user_id = %s ORDER BY created_at, memory_id LIMIT %s", (user, limit))
    return [{**r, "created_at": r["created_at"].isoformat()} for r in rows]


def _iso(value):
    return None if value is None else value.isoformat()


def task_steps(settings: Settings, user: str, task: str, k: int = 20) -> list[dict]:
    """The task's newest k buffered steps, oldest first (the order an agent replays them in)."""
    rows = _read(settings, "SELECT * FROM (SELECT event_id, kind, status, content, session, observed_at, log_offset "
                           "FROM {s}.task_buffer_steps WHERE user_id = %s AND task_id = %s "
                           "ORDER BY observed_at DESC, log_offset DESC, event_id DESC LIMIT %s) newest "
                           "ORDER BY observed_at, log_offset, event_id", (user, task, k))
    return [{"event_id": r["event_id"], "kind": r["kind"], "status": r["status"], "content": r["content"],
             "session": r["session"], "time": _iso(r["observed_at"])} for r in rows]


def task_status(settings: Settings, user: str, task: str) -> dict | None:
    rows = _read(settings, "SELECT task_id, status, session, goal, started_event, started_at, finished_event, finished_at "
                           "FROM {s}.task_buffer_tasks WHERE user_id = %s AND task_id = %s", (user, task))
    return {**rows[0], "started_at": _iso(rows[0]["started_at"]), "finished_at": _iso(rows[0]["finished_at"])} if rows else None


def session_window(settings: Settings, user: str, session: str) -> list[dict]:
    """The session's short-term window (the projector keeps only MaxTurns × 2), oldest first."""
    rows = _read(settings, "SELECT event_id, role, content, task_id, sent_at FROM {s}.session_messages "
                           "WHERE user_id = %s AND session = %s ORDER BY sent_at, log_offset, event_id", (user, session))
    return [{"event_id": r["event_id"], "role": r["role"], "content": r["content"], "task": r["task_id"],
             "time": _iso(r["sent_at"])} for r in rows]


def audit_events(settings: Settings, user: str | None = None, memory_id: str | None = None,
                 limit: int = 1000) -> list[dict]:
    """Audit rows in event-time order, by user and/or by a memory id they concern (no content)."""
    where, params = [], []
    if user is not None:
        where.append("user_id = %s")
        params.append(user)
    if memory_id is not None:
        where.append("memory_ids @> ARRAY[%s]::text[]")  # @> uses the GIN index; = ANY() would not
        params.append(memory_id)
    rows = _read(settings, "SELECT event_id, user_id, type, version, event_time, topic, partition, log_offset, "
                           "causation_id, correlation_id, producer, memory_ids FROM {s}.audit_events"
                           + (" WHERE " + " AND ".join(where) if where else "")
                           + " ORDER BY event_time, topic, partition, log_offset LIMIT %s", (*params, limit))
    return [{**{k: v for k, v in r.items() if k != "log_offset"}, "offset": r["log_offset"],
             "event_time": _iso(r["event_time"])} for r in rows]
