"""Read-model queries used by the CLI (and later the HTTP API): always scoped to one user."""
from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from kernel.config import Settings
from adapters.privacy import tenant_barrier
from projections import pg
from projections.importance import importance_now
from projections import memory_history


def _read(settings: Settings, query: str | sql.Composable, params: tuple) -> list[dict]:
    """`query`'s rows; a str has {s} (the namespace) and {items} (memory_items) filled in."""
    s = pg.schema(settings)
    stmt = sql.SQL(query).format(s=s, items=sql.SQL("{}.memory_items").format(s)) if isinstance(query, str) else query
    with pg.connect(settings, autocommit=True, role="api") as conn, conn.cursor(row_factory=dict_row) as cur:
        tenant_barrier.apply(conn)
        try:
            cur.execute(stmt, params)
        except psycopg.errors.UndefinedTable:
            return []  # no projector has run in this namespace yet: nothing is known
        return cur.fetchall()


def preferences(settings: Settings, user: str) -> list[dict]:
    rows = _read(settings, "SELECT key, value, version, event_id, memory_id, updated_at FROM {s}.preferences "
                           "WHERE user_id = %s ORDER BY key", (user,))
    return [{**r, "updated_at": r["updated_at"].isoformat()} for r in rows]


def preferences_as_of(settings: Settings, user: str, at) -> list[dict]:
    """The preference table as it stood at `at` (event time), from its history: per key the highest
    version set at or before then. What a replay of the user's events up to `at` through the
    preferences projector holds (replay/timetravel.py; tests/test_time_travel.py compares the two),
    in one indexed read: versions only rise, forgetting and erasure delete history rows as they
    delete the audit rows that replay reads."""
    then = memory_history.preferences_as_of(pg.schema(settings), sql.SQL("%s"), sql.SQL("%s"))
    rows = _read(settings, sql.SQL("SELECT key, value, version, event_id, memory_id, updated_at FROM {} AS p "
                                   "ORDER BY key").format(then), (user, at))
    return [{**r, "updated_at": r["updated_at"].isoformat()} for r in rows]


def memories_sql(decay_rate: float, at: datetime | None = None) -> str:
    """The memories list over {items} (the live table, or its past: query/as_of.py); (user, limit)."""
    return ("SELECT memory_id, content, category, key, value, tags, " + importance_now(decay_rate, at)
            + " AS importance, status, superseded_by, access_count, created_at "
            "FROM {items} AS memory_items WHERE user_id = %s ORDER BY created_at, memory_id LIMIT %s")


def memory_row(r: dict) -> dict:
    return {**r, "created_at": r["created_at"].isoformat()}


def memories(settings: Settings, user: str, limit: int = 100, at: datetime | None = None) -> list[dict]:
    """The user's memory items in creation order, importance as of `at` (default now)."""
    return [memory_row(r) for r in _read(settings, memories_sql(settings.decay_rate, at), (user, limit))]


def memory_family(settings: Settings, user: str, memory_id: str) -> list[str]:
    """The memory and every memory merged or deduped into it, transitively (what forgetting it deletes)."""
    rows = _read(settings, "WITH RECURSIVE fam(memory_id) AS (SELECT memory_id FROM {s}.memory_items "
                           "WHERE user_id = %s AND memory_id = %s UNION SELECT m.memory_id FROM {s}.memory_items m "
                           "JOIN fam ON m.merged_into = fam.memory_id WHERE m.user_id = %s) "
                           "SELECT memory_id FROM fam ORDER BY memory_id", (user, memory_id, user))
    ids = [r["memory_id"] for r in rows]
    return [memory_id] + [i for i in ids if i != memory_id] if ids else []


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


def session_window(settings: Settings, user: str, session: str, with_summary: bool = False):
    """The session's short-term window (the projector keeps only MaxTurns × 2), oldest first.

    with_summary: {"messages": [...], "summary": session_summary(...)} — the window plus the
    rolling summary of what fell out of it.
    """
    rows = _read(settings, "SELECT event_id, role, content, task_id, sent_at FROM {s}.session_messages "
                           "WHERE user_id = %s AND session = %s ORDER BY sent_at, log_offset, event_id", (user, session))
    messages = [{"event_id": r["event_id"], "role": r["role"], "content": r["content"], "task": r["task_id"],
                 "time": _iso(r["sent_at"])} for r in rows]
    if with_summary:
        return {"messages": messages, "summary": session_summary(settings, user, session)}
    return messages


def session_summary(settings: Settings, user: str, session: str) -> dict | None:
    """The rolling summary of the session's older messages (session.summarized), or None."""
    rows = _read(settings, "SELECT summary, version, message_count, through_time, through_event_id, channel, model, "
                           "event_id FROM {s}.session_summaries WHERE user_id = %s AND session = %s", (user, session))
    return {**rows[0], "through_time": _iso(rows[0]["through_time"])} if rows else None


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


# -- memories as a resource (the HTTP API's /v1/users/{user}/memories; issue 25) -------------------

MEMORY_COLUMNS = ("memory_id", "content", "category", "key", "value", "tags", "slot_hint", "importance", "status",
                  "superseded_by", "merged_into", "access_count", "last_accessed_at", "session", "agent_id", "run_id",
                  "metadata", "fact_id", "created_at", "updated_at")


def _memory_columns(settings) -> sql.Composable:
    """MEMORY_COLUMNS as selected: importance as of now (decay is a function, projections/importance.py)."""
    return sql.SQL(", ").join(sql.SQL(importance_now(settings.decay_rate) + " AS importance") if c == "importance"
                              else sql.Identifier(c) for c in MEMORY_COLUMNS)


def list_memories(models, user: str, where: sql.Composable, params: list, after: tuple | None,
                  limit: int) -> list[dict]:
    """One page of the user's memory items, in (created_at, memory_id) order: `where` and `params`
    from projections/memory_filters.py (compiled, parameterised), `after` the previous page's last
    (created_at, memory_id). Reads limit + 1 rows, so the caller knows whether another page exists."""
    cols = _memory_columns(models.settings)
    query = sql.SQL("SELECT {c} FROM {s}.memory_items WHERE user_id = %s AND {w}{a} "
                    "ORDER BY created_at, memory_id LIMIT %s").format(
        c=cols, s=models.schema, w=where,
        a=sql.SQL(" AND (created_at, memory_id) > (%s, %s)") if after else sql.SQL(""))
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(query, (user, *params, *(after or ()), limit + 1))
        except psycopg.errors.UndefinedTable:
            return []
        return cur.fetchall()


def get_memory(models, user: str, memory_id: str) -> dict | None:
    """One memory item of the user, or None (none, or another user's: memory ids are global)."""
    cols = _memory_columns(models.settings)
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(sql.SQL("SELECT {c} FROM {s}.memory_items WHERE user_id = %s AND memory_id = %s").format(
                c=cols, s=models.schema), (user, memory_id))
        except psycopg.errors.UndefinedTable:
            return None
        return cur.fetchone()
