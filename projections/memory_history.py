"""Validity of memories and links (#26 item 6): every state a row held, from when it held it.

The memory_items table keeps only the present. Its history is kept beside it: each statement of
pgvector-items that changes a row is wrapped so that the same statement copies the row as it now is
into memory_item_versions, valid from the event time of the decision that made it:

    WITH changed AS (<the change> RETURNING *)
    INSERT INTO memory_item_versions (valid_from, change_id, …) SELECT <event time>, <event id>, … FROM changed

Why in the statement and not after the batch: one batch may change a row several times (a
reinforcement, then a supersession), and each state is part of the past; why not a trigger: a
`replay rebuild` moves tables between schemas, and a trigger's function would stay behind.

A version is keyed by (memory_id, change_id), so a decision re-emitted with the same id adds none.
What is not versioned: `ann` (an index flag, not memory) and the accesses of memory.recalled (a
recall's last_accessed_at: no read serves it as of a time, and copying k rows per recall would make
the history grow with reads). Links are versioned per memory.linked event (weight and time).

The state as of T is, per memory, the version with the highest seq among those valid from T or
before: what a replay of the events with event time <= T gives (replay/timetravel.py, the oracle)
while a memory's decisions arrive in event-time order, which one writer per user gives.
"""
from __future__ import annotations

from psycopg import sql

# memory_items' columns, less `ann` (projections/pg.py; tests/test_as_of.py checks the two agree)
VERSIONED_COLUMNS = (
    "memory_id", "user_id", "key", "value", "content", "category", "tags", "slot_hint", "importance", "embedding",
    "status", "superseded_by", "access_count", "last_accessed_at", "terms", "session", "fact_id", "event_id",
    "created_at", "updated_at", "merged_into", "parent_ids", "source_fact_ids", "summarized_at", "importance_at",
    "agent_id", "run_id", "metadata")

_COLS = sql.SQL(", ").join(sql.Identifier(c) for c in VERSIONED_COLUMNS)
_PARAM = sql.SQL("%s")


def versioned(schema: sql.Identifier, change: sql.Composable, *, valid_from: sql.Composable = _PARAM,
              change_id: sql.Composable = _PARAM) -> sql.Composed:
    """`change` (an INSERT or UPDATE of memory_items, without RETURNING) that also records each row
    it wrote as a version. By default the version's time and id are two more parameters after the
    change's own; pass column names of the row to take them from it instead."""
    return sql.SQL("WITH changed AS ({change} RETURNING *) INSERT INTO {s}.memory_item_versions "
                   "(valid_from, change_id, {cols}) SELECT {vf}, {cid}, {cols} FROM changed "
                   "ON CONFLICT (memory_id, change_id) DO NOTHING").format(
        change=change, s=schema, cols=_COLS, vf=valid_from, cid=change_id)


def link_versions(schema: sql.Identifier) -> sql.Composed:
    """One version per memory.linked event and end (arrays: memory_id, other_id, kind, user_id,
    weight, valid_from, change_id), in log order."""
    return sql.SQL(
        "INSERT INTO {s}.memory_link_versions (memory_id, other_id, kind, user_id, weight, valid_from, change_id) "
        "SELECT a, b, c, d, e, f, g FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::real[], %s::timestamptz[], %s::text[]) "
        "WITH ORDINALITY AS x(a, b, c, d, e, f, g, n) ORDER BY n "
        "ON CONFLICT (memory_id, other_id, kind, change_id) DO NOTHING").format(s=schema)
