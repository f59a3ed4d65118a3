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
_V_COLS = sql.SQL(", ").join(sql.SQL("v.{}").format(sql.Identifier(c)) for c in VERSIONED_COLUMNS if c != "status")


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


# -- reading them: the read models as they stood at a time (query/as_of.py) ----------------------

def items_as_of(schema: sql.Identifier, user: sql.Composable, at: sql.Composable) -> sql.Composed:
    """memory_items as they stood at `at` for `user` (a literal or a placeholder each)."""
    # 1. the winning version of each memory, from the index alone ((user_id, memory_id, seq DESC)
    #    INCLUDE (valid_from, status)); 2. only those rows read from the heap, by seq. The status is
    #    the winner's (w.status), so a read's `status = ANY(…)` filters the winners before the heap:
    #    most winners are superseded or merged, and fetching them was half a recall statement's time.
    #    Joined on memory_id too, so a query's `memory_id = x` reaches step 1 (recall's expansion
    #    reads one memory at a time: without it each read recomputed every memory's winner)
    return sql.SQL("(SELECT v.seq, v.valid_from, v.change_id, w.status, {cols} FROM {s}.memory_item_versions v "
                   "JOIN (SELECT DISTINCT ON (memory_id) memory_id, seq, status "
                   "FROM {s}.memory_item_versions WHERE user_id = {u} AND valid_from <= {t} ORDER BY memory_id, seq DESC) w "
                   "ON v.memory_id = w.memory_id AND v.seq = w.seq)").format(s=schema, u=user, t=at, cols=_V_COLS)


def links_as_of(schema: sql.Identifier, user: sql.Composable, at: sql.Composable) -> sql.Composed:
    """memory_links as they stood at `at`: per edge its latest weight."""
    return sql.SQL("(SELECT DISTINCT ON (memory_id, other_id, kind) memory_id, other_id, kind, user_id, weight "
                   "FROM {s}.memory_link_versions WHERE user_id = {u} AND valid_from <= {t} "
                   "ORDER BY memory_id, other_id, kind, seq DESC)").format(s=schema, u=user, t=at)


def preferences_as_of(schema: sql.Identifier, user: sql.Composable, at: sql.Composable) -> sql.Composed:
    """preferences as they stood at `at`: per key the highest version set by then (what the
    projector keeps: only a higher version replaces the current value)."""
    # key DESC, version DESC: the primary key (user_id, key, version) read backwards, without a sort
    return sql.SQL("(SELECT DISTINCT ON (key) user_id, key, value, version, memory_id, event_id, set_at AS updated_at "
                   "FROM {s}.preference_history WHERE user_id = {u} AND set_at <= {t} "
                   "ORDER BY key DESC, version DESC)").format(s=schema, u=user, t=at)
