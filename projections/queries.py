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
