"""Postgres projectors: key-value preferences and pgvector memory items.

Both write their rows and their positions in one transaction per batch (law 3) and are
idempotent on ids, so re-applying a batch (or a re-emitted decision) changes nothing.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from kernel.config import Settings
from domain.text import tokens
from projections import pg, tombstones
from projections.memory_history import link_versions, versioned
from projections.batching import Grouping, grouped_runs, own_item_row
from projections.runner import Item, Projector, TopicPart, kind_by_type, runs_by_kind


class _PostgresProjector(Projector):
    topics = ("memory",)

    def __init__(self, settings: Settings):
        self.settings = settings
        self.s = pg.schema(settings)
        self.conn = None
        self.refused_erased = 0   # events of erased users refused by the tombstone check
        self.role = "projector"

    def setup(self) -> None:
        pg.ensure_schema(self.settings)
        if self.ERASURES:
            pg.ensure_ddl(self.settings, tombstones.DDL.replace("{table}", self.ERASURES))
        self.conn = pg.connect(self.settings, role=self.role)

    def attach(self, role: str) -> None:
        """Open the connection over tables made elsewhere, as `role`, without any DDL: an as-of
        shadow, made by the owner's function (adapters/privacy/shadow_functions.py) and written by
        the API role, which may write nothing else."""
        self.role = role
        self.conn = pg.connect(self.settings, role=role)

    def _connection(self):
        """The projector's connection, re-opened after an outage closed it (the runner retries
        the batch; a connection broken mid-transaction is discarded, never reused)."""
        if self.conn is None or self.conn.closed or self.conn.broken:
            if self.conn is not None:
                self.conn.close()
            self.conn = pg.connect(self.settings, role=self.role)
        return self.conn

    def positions(self) -> dict[TopicPart, int]:
        conn = self._connection()
        try:
            return pg.load_positions(conn, self.settings, self.name)
        except BaseException:
            self._discard()
            raise

    def _discard(self) -> None:
        if self.conn is not None and (self.conn.broken or self.conn.closed):
            self.conn.close()
            self.conn = None

    def q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=self.s)

    def v(self, text: str) -> sql.Composed:
        """q(text), a change of memory_items, that also records the rows it writes as versions valid
        from the event's time (projections/memory_history.py): its parameters end with (time, id)."""
        return versioned(self.s, self.q(text))

    def apply(self, items: list[Item], positions: dict[TopicPart, int],
              expected: dict[TopicPart, int | None] | None = None) -> None:
        conn = self._connection()
        try:
            with conn.transaction():
                with conn.cursor() as cur:
                    pg.hold_writer_lock(cur, self.settings, self.name)  # a replay swap waits for this batch
                    items, refused = self._refuse_erased(cur, items)
                    self.write(cur, items)
                    pg.save_positions(cur, self.settings, self.name, positions, expected)
        except BaseException:
            self._discard()
            raise
        if refused:   # counted once committed (a retried batch is not counted twice)
            self.refused_erased += refused
            tombstones.log.info("%s: refused %d events of erased users (%d so far)", self.name, refused,
                                self.refused_erased)

    def _refuse_erased(self, cur, items: list[Item]) -> tuple[list[Item], int]:
        """The batch without events of users this projector already saw erased (projections/tombstones.py);
        the batch's own erasures are tombstoned in this transaction."""
        if not items or not self.ERASURES:
            return items, 0
        table = sql.Identifier(self.ERASURES)
        cur.execute(sql.SQL("SELECT user_id FROM {s}.{t} WHERE user_id = ANY(%s)").format(s=self.s, t=table),
                    (tombstones.users_of(items),))
        kept, new, refused = tombstones.refuse_erased(items, {r[0] for r in cur.fetchall()})
        if new:
            cur.executemany(sql.SQL("INSERT INTO {s}.{t} (user_id, event_id) VALUES (%s, %s) ON CONFLICT DO NOTHING")
                            .format(s=self.s, t=table), [(i.event.user, i.event.id) for i in new])
        return kept, refused

    def write(self, cur, items: list[Item]) -> None:
        raise NotImplementedError

    # Its erasure tombstones' table (projections/tombstones.py); None: the projector keeps its own
    # erasure rule (task buffers and session windows compare erasure and event times).
    ERASURES: str | None = None

    # table -> (content columns, order) compared by checksum(); positions are not content
    CHECKSUM: dict[str, tuple[list[str], list[str]]] = {}

    def checksum(self) -> str:
        parts = []
        for table, (columns, order) in sorted(self.CHECKSUM.items()):
            count, digest = pg.table_checksum(self.conn, self.settings, table, columns, order)
            parts.append(f"{table}:{count}:{digest}")
        self.conn.commit()
        return " ".join(parts)

    def erase_users(self, cur, users: list[str], tables: tuple[str, ...]) -> None:
        for table in tables:
            cur.execute(sql.SQL("DELETE FROM {s}.{t} WHERE user_id = ANY(%s)").format(s=self.s, t=sql.Identifier(table)), (users,))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class PreferencesProjector(_PostgresProjector):
    """preference.set → preferences (current value, version, source event) + history."""

    name = "kv-preferences"
    ERASURES = "preference_erasures"
    CHECKSUM = {
        "preferences": (["user_id", "key", "value", "version", "memory_id", "event_id", "updated_at"], ["user_id", "key"]),
        "preference_history": (["user_id", "key", "version", "value", "event_id", "supersedes", "set_at", "memory_id"],
                               ["user_id", "key", "version"]),
    }

    def write(self, cur, items: list[Item]) -> None:
        # Runs of same-kind events keep their order: an erasure must fall between the rows before it and after it.
        kinds = {"user.erased": "erase", "user.forgotten": "erase", "preference.set": "set", "memory.forgotten": "forget"}
        for kind, run in runs_by_kind(items, kind_by_type(kinds)):
            if kind == "erase":
                self.erase_users(cur, [i.event.user for i in run], ("preferences", "preference_history"))
            elif kind == "forget":
                # A forgotten memory takes the preference versions it held with it (their values are its content).
                for table in ("preferences", "preference_history"):
                    cur.executemany(sql.SQL("DELETE FROM {s}.{t} WHERE user_id = %s AND memory_id = ANY(%s)").format(
                        s=self.s, t=sql.Identifier(table)), [(i.event.user, i.event.data.memory_ids) for i in run])
            elif kind == "set":
                rows = [(i.event.user, i.event.data.key, i.event.data.value, i.event.data.pref_version,
                         i.event.data.memory_id, i.event.id, i.event.time, i.event.data.supersedes) for i in run]
                cur.executemany(self.q(
                    "INSERT INTO {s}.preference_history (user_id, key, version, value, event_id, set_at, supersedes, memory_id) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"),
                    [(u, k, v, val, eid, t, sup, m) for u, k, val, v, m, eid, t, sup in rows])
                # Only a higher version replaces the current value: replays and re-emits are no-ops.
                cur.executemany(self.q(
                    "INSERT INTO {s}.preferences (user_id, key, value, version, memory_id, event_id, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET "
                    "value = EXCLUDED.value, version = EXCLUDED.version, memory_id = EXCLUDED.memory_id, "
                    "event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at "
                    "WHERE {s}.preferences.version < EXCLUDED.version"),
                    [(u, k, val, v, m, eid, t) for u, k, val, v, m, eid, t, _sup in rows])


class MemoryItemsProjector(_PostgresProjector):
    """memory.* → memory_items (pgvector, HNSW cosine).

    Statuses: active, outdated (superseded), merged / deduped (retired into `merged_into`),
    archived (memory.expired: forgetting archives, the row, content and embedding stay; rows of an
    older projection may still say `expired`, a rebuild says `archived`), and active again on
    memory.revived. Only memory.forgotten and user.forgotten delete rows (hard delete on request).
    """

    name = "pgvector-items"
    ERASURES = "memory_item_erasures"
    CHECKSUM = {"memory_items": ([
        "memory_id", "user_id", "key", "value", "content", "category", "tags", "slot_hint", "importance", "embedding",
        "status", "superseded_by", "access_count", "last_accessed_at", "session", "fact_id", "event_id", "created_at",
        "updated_at", "importance_at", "terms", "merged_into", "parent_ids", "source_fact_ids", "summarized_at", "ann", "agent_id", "run_id",
        "metadata"], ["memory_id"]),
        "memory_links": (["memory_id", "other_id", "kind", "user_id", "weight"], ["memory_id", "other_id", "kind"]),
        # seq orders one memory's (one edge's) versions: its values, and its order across users, differ
        # between a live table and a rebuilt one, which interleave partitions differently; within
        # one memory (one user, one partition) the order is the log's
        "memory_item_versions": (["valid_from", "change_id", "memory_id", "user_id", "content", "status", "importance",
                                  "importance_at", "embedding", "superseded_by", "merged_into", "access_count",
                                  "updated_at", "key", "value", "category", "tags"], ["memory_id", "seq"]),
        "memory_link_versions": (["valid_from", "change_id", "memory_id", "other_id", "kind", "user_id", "weight"],
                                 ["memory_id", "other_id", "kind", "seq"])}
    kind_of = staticmethod(kind_by_type({"user.erased": "erase", "memory.created": "create", "memory.reinforced": "reinforce",
                          "memory.superseded": "supersede", "memory.decayed": "decay", "memory.merged": "merge",
                          "memory.deduped": "dedup", "memory.expired": "archive", "memory.summarized": "summarize",
                          "memory.recalled": "recall", "memory.forgotten": "forget", "user.forgotten": "erase",
                          "memory.revived": "revive", "memory.linked": "link"}))

    # memory.created rows as COPYed into the temp table the insert reads (pg.copy_rows)
    CREATE_COLUMNS = [("memory_id", "text"), ("user_id", "text"), ("key", "text"), ("value", "text"), ("content", "text"),
                      ("category", "text"), ("tags", "text[]"), ("slot_hint", "text"), ("importance", "float4"),
                      ("embedding", "vector"), ("session", "text"), ("fact_id", "text"), ("event_id", "text"),
                      ("created_at", "timestamptz"), ("updated_at", "timestamptz"), ("importance_at", "timestamptz"),
                      ("terms", "text[]"),
                      ("agent_id", "text"), ("run_id", "text"), ("metadata", "jsonb")]
    # Kinds written one statement per batch where log order allows (projections/batching.py). Each
    # writes the row of its own memory_id; reinforcement and supersession both set updated_at. A
    # link writes only memory_links, which no other grouped kind touches: it commutes with them all.
    GROUPED = Grouping(("create", "reinforce", "supersede", "link"), refs=own_item_row)

    def write(self, cur, items: list[Item]) -> None:
        for kind, run in grouped_runs(items, self.kind_of, self.GROUPED):
            if kind == "erase":
                self.erase_users(cur, [i.event.user for i in run], ("memory_items", "memory_links",
                                                                     "memory_item_versions", "memory_link_versions"))
            elif kind == "create":
                self._create(cur, run)
            elif kind == "reinforce":
                # Absolute values from the event: applying it twice leaves the same row.
                cur.executemany(self.v(
                    "UPDATE {s}.memory_items SET importance = %s, category = %s, slot_hint = %s, tags = %s, "
                    "access_count = %s, last_accessed_at = GREATEST(last_accessed_at, %s), updated_at = %s, "
                    "importance_at = %s WHERE memory_id = %s AND user_id = %s"),
                    [(d.importance, d.category, d.slot_hint, d.tags, d.access_count, i.event.time, i.event.time,
                      i.event.time, d.memory_id, i.event.user, i.event.time, i.event.id) for i in run for d in (i.event.data,)])
            elif kind == "supersede":
                cur.executemany(self.v(
                    "UPDATE {s}.memory_items SET status = 'outdated', superseded_by = %s, updated_at = %s "
                    "WHERE memory_id = %s AND user_id = %s"),
                    [(d.superseded_by, i.event.time, d.memory_id, i.event.user, i.event.time, i.event.id)
                     for i in run for d in (i.event.data,)])
            elif kind == "link":
                self._link(cur, run)
            else:
                self._consolidation(cur, kind, run)

    def _create(self, cur, run: list[Item]) -> None:
        """memory.created, and the HNSW index's share of it (`ann`, projections/pg.py).

        The rule, true at every commit: a user's rows have `ann` if and only if the user holds at
        least vector_index_min_rows rows. So all rows of a user agree (recall reads one row to know
        which index serves the user), and the flag is a function of the rows alone: a rebuild, a
        --from rebuild or a re-application after a swap gives the same values, however the log was
        cut into batches. Only creations raise a user's count and only forgets (and erasure, which
        deletes every row) lower it, and within a run of either kind it moves one way, so setting
        the flag at the end of each run is the same as after each event. Users below the
        threshold are served by exact scans and never pay an HNSW insert.
        """
        # 1. COPY into a temp table, then one insert in log order (pg.copy_rows): the first
        #    creation wins. A new row takes its user's flag (any row of theirs: all agree).
        pg.copy_rows(cur, "memory_items_in", self.CREATE_COLUMNS,
                     ((d.memory_id, i.event.user, d.key, d.value, d.content, d.category, d.tags, d.slot_hint,
                       d.importance, np.asarray(d.embedding, dtype=np.float32), d.session, d.fact_id, i.event.id,
                       i.event.time, i.event.time, i.event.time, sorted(set(tokens(d.content))), d.agent_id, d.run_id,
                       None if d.metadata is None else Jsonb(d.metadata))
                      for i in run for d in (i.event.data,)))
        cols = sql.SQL(", ").join(sql.Identifier(c) for c, _ in self.CREATE_COLUMNS)
        #    The rows inserted are the memories' first versions, valid from their creation.
        cur.execute(versioned(self.s, sql.SQL(
            "INSERT INTO {s}.memory_items ({c}, ann) SELECT {c}, coalesce((SELECT m.ann FROM {s}.memory_items m "
            "WHERE m.user_id = memory_items_in.user_id LIMIT 1), false) FROM memory_items_in ORDER BY seq "
            "ON CONFLICT (memory_id) DO NOTHING").format(s=self.s, c=cols),
            valid_from=sql.Identifier("created_at"), change_id=sql.Identifier("event_id")))
        # 2. Users of the run who reached the threshold: all their rows into the HNSW index.
        self._sync_ann(cur, {i.event.user for i in run}, flag=True)

    def _link(self, cur, run: list[Item]) -> None:
        """memory.linked → memory_links, from both ends (recall looks neighbours up by either end).
        As in the graph, a repeated edge keeps one row and the latest weight: the rows are first
        reduced in log order, so one INSERT never meets the same key twice."""
        edges: dict[tuple[str, str, str], tuple[str, float]] = {}
        for i in run:
            d = i.event.data
            edges[(d.from_id, d.to_id, d.kind)] = edges[(d.to_id, d.from_id, d.kind)] = (i.event.user, d.weight)
        cur.execute(self.q(
            "INSERT INTO {s}.memory_links (memory_id, other_id, kind, user_id, weight) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::real[]) "
            "ON CONFLICT (memory_id, other_id, kind) DO UPDATE SET weight = EXCLUDED.weight"),
            [list(c) for c in zip(*((a, b, k, u, w) for (a, b, k), (u, w) in edges.items()))])
        # every event's weight, from both ends, in log order: the links as of a time (not reduced)
        cur.execute(link_versions(self.s), [list(c) for c in zip(*(
            (a, b, d.kind, i.event.user, d.weight, i.event.time, i.event.id)
            for i in run for d in (i.event.data,) for a, b in ((d.from_id, d.to_id), (d.to_id, d.from_id))))])

    def _forget_links(self, cur, memory_ids: list[str]) -> None:
        """A forgotten memory's edges go with it (as DETACH DELETE does in the graph): the rows at
        its other ends first, found through its own rows, then its own."""
        cur.execute(self.q("DELETE FROM {s}.memory_links WHERE (memory_id, other_id) IN "
                           "(SELECT other_id, memory_id FROM {s}.memory_links WHERE memory_id = ANY(%s))"), (memory_ids,))
        cur.execute(self.q("DELETE FROM {s}.memory_links WHERE memory_id = ANY(%s)"), (memory_ids,))
        cur.execute(self.q("DELETE FROM {s}.memory_link_versions WHERE (memory_id, other_id) IN "
                           "(SELECT other_id, memory_id FROM {s}.memory_link_versions WHERE memory_id = ANY(%s))"),
                        (memory_ids,))
        cur.execute(self.q("DELETE FROM {s}.memory_link_versions WHERE memory_id = ANY(%s)"), (memory_ids,))

    def _sync_ann(self, cur, users: set[str], flag: bool) -> None:
        """Set `ann` to `flag` on every row of those `users` whose row count now says so: flag=True
        after creations (at least the threshold), flag=False after forgets (below it); within a run
        of either kind the count moves one way only (see _create). The CASE reads one row of a user
        already in that state and counts at most the threshold's rows of the others, so the check
        stays cheap for users of any size."""
        cur.execute(self.q(
            "UPDATE {s}.memory_items SET ann = %(flag)s WHERE ann <> %(flag)s AND user_id = ANY(ARRAY("
            "SELECT u FROM unnest(%(users)s::text[]) AS u WHERE CASE "
            "WHEN (SELECT ann FROM {s}.memory_items WHERE user_id = u LIMIT 1) IS DISTINCT FROM %(flag)s "
            "THEN ((SELECT count(*) FROM (SELECT FROM {s}.memory_items WHERE user_id = u LIMIT %(t)s) AS r) >= %(t)s) "
            "= %(flag)s ELSE false END))"),
            {"users": sorted(users), "flag": flag, "t": self.settings.vector_index_min_rows})

    def _consolidation(self, cur, kind: str, run: list[Item]) -> None:
        """Consolidation and forgetting: absolute values from the event, so re-applying changes nothing."""
        rows = [(i.event, i.event.data) for i in run]
        if kind == "decay":
            cur.executemany(self.v("UPDATE {s}.memory_items SET importance = %s, updated_at = %s, importance_at = %s "
                                   "WHERE memory_id = %s AND user_id = %s"),
                            [(d.importance, e.time, e.time, d.memory_id, e.user, e.time, e.id) for e, d in rows])
        elif kind == "merge":
            # The survivor takes the merged content/embedding; its provenance is the union of parents.
            cur.executemany(self.v(
                "UPDATE {s}.memory_items SET content = %s, embedding = %s, importance = %s, category = %s, slot_hint = %s, "
                "tags = %s, key = %s, value = %s, access_count = %s, last_accessed_at = GREATEST(last_accessed_at, %s), "
                "parent_ids = ARRAY(SELECT DISTINCT p FROM unnest(parent_ids || %s::text[]) AS p ORDER BY p), "
                "source_fact_ids = %s, terms = %s, updated_at = %s, importance_at = %s WHERE memory_id = %s AND user_id = %s"),
                [(d.content, np.asarray(d.embedding, dtype=np.float32), d.importance, d.category, d.slot_hint, d.tags,
                  d.key, d.value, d.access_count, e.time, d.parent_ids, d.fact_ids, sorted(set(tokens(d.content))),
                  e.time, e.time, d.memory_id, e.user, e.time, e.id) for e, d in rows])
            self._retire(cur, rows, "merged")
        elif kind == "dedup":
            cur.executemany(self.v(
                "UPDATE {s}.memory_items SET importance = %s, category = %s, tags = %s, access_count = %s, "
                "source_fact_ids = %s, updated_at = %s, importance_at = %s WHERE memory_id = %s AND user_id = %s"),
                [(d.importance, d.category, d.tags, d.access_count, d.fact_ids, e.time, e.time, d.memory_id, e.user,
                  e.time, e.id) for e, d in rows])
            self._retire(cur, rows, "deduped")
        elif kind == "archive":
            # Forgetting archives (memory.expired): out of the working set, never out of the table.
            cur.executemany(self.v("UPDATE {s}.memory_items SET status = 'archived', importance = %s, updated_at = %s, "
                                   "importance_at = %s WHERE memory_id = %s AND user_id = %s "
                                   "AND status IN ('active', 'archived', 'expired')"),
                            [(d.importance, e.time, e.time, d.memory_id, e.user, e.time, e.id) for e, d in rows])
        elif kind == "revive":
            # A recall brought an archived memory back (the recall itself refreshed its access).
            cur.executemany(self.v("UPDATE {s}.memory_items SET status = 'active', importance = %s, "
                                   "last_accessed_at = GREATEST(last_accessed_at, %s), updated_at = %s, importance_at = %s "
                                   "WHERE memory_id = %s AND user_id = %s AND status IN ('archived', 'expired')"),
                            [(d.importance, e.time, e.time, e.time, d.memory_id, e.user, e.time, e.id) for e, d in rows])
        elif kind == "summarize":
            cur.executemany(self.v("UPDATE {s}.memory_items SET content = %s, terms = %s, summarized_at = %s, "
                                   "updated_at = %s WHERE memory_id = %s AND user_id = %s"),
                            [(d.content, sorted(set(tokens(d.content))), e.time, e.time, d.memory_id, e.user,
                              e.time, e.id) for e, d in rows])
        elif kind == "recall":
            cur.executemany(self.q("UPDATE {s}.memory_items SET last_accessed_at = GREATEST(last_accessed_at, %s) "
                                   "WHERE memory_id = ANY(%s) AND user_id = %s"),
                            [(e.time, d.memory_ids, e.user) for e, d in rows])
        elif kind == "forget":
            for table in ("memory_items", "memory_item_versions"):   # a forgotten memory has no past either
                cur.executemany(sql.SQL("DELETE FROM {s}.{t} WHERE memory_id = ANY(%s) AND user_id = %s").format(
                    s=self.s, t=sql.Identifier(table)), [(d.memory_ids, e.user) for e, d in rows])
            self._forget_links(cur, [mid for e, d in rows for mid in d.memory_ids])
            # A flagged user who fell below the threshold leaves the HNSW index (see _create): the
            # flag stays a function of the rows, so re-applying a forgotten memory's creation (a
            # swap's catch-up, a --from rebuild) cannot leave it set.
            self._sync_ann(cur, {e.user for e, _ in rows}, flag=False)

    def _retire(self, cur, rows, status: str) -> None:
        cur.executemany(self.v(f"UPDATE {{s}}.memory_items SET status = '{status}', merged_into = %s, updated_at = %s "
                               "WHERE memory_id = %s AND user_id = %s"),
                        [(d.memory_id, e.time, d.retired_id, e.user, e.time, e.id) for e, d in rows])
