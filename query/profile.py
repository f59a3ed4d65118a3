"""Profile: who the user is, by category enumeration — never by similarity.

A user's name must never be crowded out by an unrelated query, so the profile lists every
active identity / preference / policy memory and the key-value table, whatever is asked.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

from datetime import datetime

from psycopg.rows import dict_row

from query.store import ReadModels
from projections.importance import importance_now

PROFILE_CATEGORIES = ("identity", "preference", "policy")


def profile(models: ReadModels, user: str, at: datetime | None = None) -> dict:
    """The user's current identity, preferences and policies; importance as of `at` (default now)."""
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        # importance as of now (decay is a function), ranked by it
        cur.execute(models.statement(models.q(
            "SELECT memory_id, content, category, " + importance_now(models.settings.decay_rate, at)
            + " AS importance, created_at, key, value FROM {items} AS memory_items "
            "WHERE user_id = %s AND status = 'active' AND category = ANY(%s) "
            "ORDER BY importance DESC, created_at, memory_id")), (user, list(PROFILE_CATEGORIES)))
        mems = cur.fetchall()
        cur.execute(models.statement(models.q("SELECT key, value, version FROM {prefs} AS preferences WHERE user_id = %s "
                                              "ORDER BY key")), (user,))
        prefs = cur.fetchall()
    out: dict = {c: [] for c in PROFILE_CATEGORIES}
    current = {p["key"]: p["value"] for p in prefs}
    for m in mems:
        if m["key"] is not None and m["key"] in current and m["value"] != current[m["key"]]:
            # law 8: a memory that states another value of a slot than its current one is history,
            # never served as current, even where no memory.superseded was recorded for it (#30)
            continue
        out[m["category"]].append({"memory_id": m["memory_id"], "content": m["content"],
                                   "importance": m["importance"], "created_at": m["created_at"].isoformat()})
    out["preferences"] = {p["key"]: {"value": p["value"], "version": p["version"]} for p in prefs}
    return out
