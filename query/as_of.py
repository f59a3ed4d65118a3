"""Reads as of a time, from the versions the read models keep (#26 item 6): indexed, no replay.

`ReadModelsAsOf(live, user, at)` is the live ReadModels whose memory_items, memory_links and
preferences are, for that user, what they held at `at` (event time):
- memory_items: per memory, the version with the highest seq valid from `at` or before;
- memory_links: per edge, its latest weight linked at `at` or before;
- preferences: per key, the highest version set at `at` or before (what the projector keeps:
  only a higher version replaces the current value).
(The three subqueries are projections/memory_history.py's, beside the code that writes the versions.)
The query functions (recall, profile, the memories list) read through `{items}`, `{links}` and
`{prefs}` (query/store.py), so the past is queried by the same code as the present, with `now` =
`at` for importance and age. The replay of the user's log (replay/timetravel.py) stays as the tool
that checks it: tests/test_as_of.py asks both on a generated history and requires equal answers.
"""
from __future__ import annotations

from datetime import datetime, timezone

import psycopg
from psycopg import sql

from kernel.errors import MemstreamError
from projections.memory_history import items_as_of, links_as_of, preferences_as_of


def _utc(at: datetime) -> datetime:
    """`at` in UTC: it is written into SQL as a literal, and Postgres refuses an offset Python
    accepts (-17:03, found by schemathesis); a time whose UTC form falls outside years 1-9999 holds
    nothing and everything that is kept, respectively."""
    try:
        return at.astimezone(timezone.utc)
    except OverflowError:
        return (datetime.min if at.year == 1 else datetime.max).replace(tzinfo=timezone.utc)


class ReadModelsAsOf:
    """A view of `live` for one user as of `at`; shares its pool, graph driver and embedder."""

    def __init__(self, live, user: str, at: datetime):
        if at.tzinfo is None:
            raise MemstreamError("an as-of time needs a timezone, e.g. 2026-01-02T10:00:00+00:00")
        self.live, self.user, self.as_of = live, user, _utc(at)
        self.settings, self.schema, self.pool = live.settings, live.schema, live.pool

    def __getattr__(self, name: str):   # graph, embedder, embed_query …: the live ones
        return getattr(self.live, name)

    def q(self, text: str) -> sql.Composed:
        u, t = sql.Literal(self.user), sql.Literal(self.as_of)
        return sql.SQL(text).format(s=self.schema, items=items_as_of(self.schema, u, t),
                                    links=links_as_of(self.schema, u, t), prefs=sql.Identifier("asof_prefs"))

    def slot_moved_on(self, row: str) -> sql.Composable:
        """The slot's value then: its highest version set by `at`, one backward probe of
        preference_history's primary key (user_id, key, version) a row, whatever the planner
        believes of the table (its estimates under the tenant policy are far off, and a join against
        the per-key winners came out as a nested loop over the whole history: seconds)."""
        return sql.SQL("COALESCE((SELECT h.value FROM {s}.preference_history h WHERE h.user_id = {r}.user_id "
                       "AND h.key = {r}.key AND h.set_at <= {t} ORDER BY h.version DESC LIMIT 1) <> {r}.value, false)").format(
            s=self.schema, r=sql.Identifier(row), t=sql.Literal(self.as_of))

    def statement(self, stmt: sql.Composable) -> sql.Composed:
        """`stmt` with the preferences then as a materialized CTE (one row per key, computed once, for
        the profile, which reads them all). Memories and links stay inline, where a query's own
        conditions (a memory id, the seeds) reach their index; a CTE not named is not computed."""
        return sql.SQL("WITH asof_prefs AS MATERIALIZED {p} ").format(
            p=preferences_as_of(self.schema, sql.Literal(self.user), sql.Literal(self.as_of))) + stmt


def history_complete(models) -> bool:
    """Whether the versions hold the whole past (projections/pg.py: memory_history_gaps): a
    namespace projected before them has a gap until pgvector-items is rebuilt; a namespace no
    projector has made yet has no versions either (the replay answers it: nothing)."""
    with models.pool.connection() as conn:
        try:
            row = conn.execute(sql.SQL("SELECT NOT EXISTS (SELECT FROM {s}.memory_history_gaps) "
                                       "AND to_regclass({v}) IS NOT NULL").format(
                s=models.schema, v=sql.Literal(f'"{models.settings.namespace}"."memory_item_versions"'))).fetchone()
        except psycopg.errors.UndefinedTable:
            return False
    return bool(row and row[0])


# -- the as-of reads ----------------------------------------------------------------------------

def recall(models, req, at: datetime) -> list:
    """recall() over the user's memory as of `at` (age and importance reckoned then)."""
    from query.recall import recall as ranked
    view = ReadModelsAsOf(models, req.user, at)
    return ranked(view, req, now=view.as_of)


def profile(models, user: str, at: datetime) -> dict:
    from query.profile import profile as current
    view = ReadModelsAsOf(models, user, at)
    return current(view, user, at=view.as_of)


def memories(models, user: str, at: datetime, limit: int = 100) -> list[dict]:
    from psycopg.rows import dict_row

    from projections.queries import memories_sql, memory_row
    view = ReadModelsAsOf(models, user, at)
    with view.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute(view.statement(view.q(memories_sql(models.settings.decay_rate, view.as_of))), (user, limit))
        return [memory_row(r) for r in cur.fetchall()]
