"""Shadow stores and atomic swaps.

A shadow projection is the same projector code pointed at other stores:
- Postgres: the schema `<namespace>__<purpose>` (rebuild: `__shadow`, verify: `__verify`, …),
  with its own `projector_positions` table;
- Neo4j: a graph generation (the `ns` value of its nodes and position nodes), pinned on the
  shadow's GraphProjector (projections/graph_generation.py).
It reads the live namespace's log with the live namespace's data keys (`log_namespace_override`).

Swapping a rebuilt shadow in:
- Postgres: one transaction moves the live tables of the rebuilt projections out to
  `<namespace>__old`, moves the shadow's tables into the live schema and replaces those
  projectors' rows in `projector_positions`. Readers see the old tables or the new ones, never a
  mix of one projection. The transaction first takes each projector's writer lock exclusively
  (projections/pg.hold_writer_lock), so it waits for a live batch in flight; the live projector's
  next batch then writes into the tables just moved in (names resolve to them).
- Neo4j: one transaction flips the namespace's pointer node to the shadow generation; readers
  resolve the pointer in the same query as the graph. The old generation is deleted afterwards, in
  batches, after a short grace period for queries in flight.
The two stores are separate systems: the Postgres swap commits first, then the Neo4j one.

Postgres and Neo4j writes of a swap never go backwards: the shadow is first caught up to at
least the live positions (under the writer locks), and a live projector that resumes below the
shadow's positions re-applies, in log order, events the shadow already applied, which leaves
every projection as it was (each projector writes absolute values, or only higher versions, or
inserts once).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from adapters import neo4j_auth
from kernel.config import Settings
from kernel.errors import MemstreamError
from projections import graph_generation, pg
from projections.runner import Projector, TopicPart

# The Postgres tables each projector owns (all in the namespace schema), besides its rows in
# projector_positions. tests/test_replay.py checks that every table a full set-up creates has
# exactly one owner, so a projector that adds a table cannot be forgotten here.
OWNED_TABLES: dict[str, tuple[str, ...]] = {
    "kv-preferences": ("preferences", "preference_history", "preference_erasures"),
    "pgvector-items": ("memory_items", "memory_links", "memory_item_erasures", "memory_item_versions",
                       "memory_link_versions", "memory_history_gaps"),
    "task-buffers": ("task_buffer_tasks", "task_buffer_steps", "task_buffer_erasures"),
    "session-windows": ("session_messages", "session_window_erasures", "session_summaries", "session_forgets"),
    "audit-index": ("audit_events",),
    "pg-relations": ("entities", "relations", "relation_erasures"),
}
GRAPH = "neo4j-graph"
# Index methods no projector's writes use (they serve queries): built after a bulk load, not per row.
DEFERRED_METHODS = ("hnsw", "ivfflat", "gin")
DEFERRED_TABLE = "_replay_deferred_indexes"
SHADOW_RE = re.compile(r"^[a-z0-9_]+$")


def owned_tables(projector: Projector | str) -> tuple[str, ...]:
    name = projector if isinstance(projector, str) else projector.name
    if name in OWNED_TABLES:
        return OWNED_TABLES[name]
    if isinstance(projector, str):
        raise MemstreamError(f"unknown projection {name!r}")
    return tuple(getattr(projector, "TABLES", None) or getattr(projector, "CHECKSUM", {}))


def shadow_settings(settings: Settings, purpose: str) -> Settings:
    """Settings of a shadow: its own schema / graph generation, the live log and data keys."""
    if not SHADOW_RE.match(purpose):
        raise MemstreamError(f"shadow name {purpose!r}: use lower-case letters, digits and _")
    return settings.model_copy(update={"namespace": f"{settings.namespace}__{purpose}",
                                       "log_namespace_override": settings.log_namespace})


def is_graph(name: str) -> bool:
    return name == GRAPH


# -- Postgres ---------------------------------------------------------------------------------

def schema_exists(conn: psycopg.Connection, schema: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def table_exists(conn: psycopg.Connection, schema: str, table: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}"."{table}"',)).fetchone()[0]


def drop_schema(settings: Settings, schema: str, database: str | None = None) -> None:
    with psycopg.connect(settings.pg_dsn(database), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def defer_indexes(settings: Settings, tables: tuple[str, ...]) -> list[str]:
    """Swap the tables' vector and inverted indexes for never-maintained placeholders of the same
    name (so a projector's `CREATE INDEX IF NOT EXISTS` on resume leaves them alone); their
    definitions are kept in the shadow schema until `build_deferred_indexes`."""
    s = settings.namespace
    moved = []
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {}.{} (index_name text PRIMARY KEY, table_name text NOT NULL, "
                             "indexdef text NOT NULL)").format(sql.Identifier(s), sql.Identifier(DEFERRED_TABLE)))
        rows = conn.execute(
            "SELECT i.relname, t.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
            "JOIN pg_am a ON a.oid = i.relam WHERE n.nspname = %s AND t.relname = ANY(%s) AND a.amname = ANY(%s)",
            (s, list(tables), list(DEFERRED_METHODS))).fetchall()
        for index, table, indexdef in rows:
            with conn.transaction():
                conn.execute(sql.SQL("INSERT INTO {}.{} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING").format(
                    sql.Identifier(s), sql.Identifier(DEFERRED_TABLE)), (index, table, indexdef))
                conn.execute(sql.SQL("DROP INDEX {}.{}").format(sql.Identifier(s), sql.Identifier(index)))
                first = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum = 1",
                                     (f'"{s}"."{table}"',)).fetchone()[0]
                conn.execute(sql.SQL("CREATE INDEX {} ON {}.{} ({}) WHERE false").format(
                    sql.Identifier(index), sql.Identifier(s), sql.Identifier(table), sql.Identifier(first)))
            moved.append(index)
    return moved


def build_deferred_indexes(settings: Settings, tables: tuple[str, ...] | None = None,
                           maintenance_work_mem: str = "1GB") -> list[str]:
    """Replace the placeholders with the real indexes (one CREATE INDEX over the loaded table)."""
    s = settings.namespace
    built = []
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        if not table_exists(conn, s, DEFERRED_TABLE):
            return built
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
        rows = conn.execute(sql.SQL("SELECT index_name, table_name, indexdef FROM {}.{} ORDER BY index_name").format(
            sql.Identifier(s), sql.Identifier(DEFERRED_TABLE))).fetchall()
        for index, table, indexdef in rows:
            if tables is not None and table not in tables:
                continue
            with conn.transaction():
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}.{}").format(sql.Identifier(s), sql.Identifier(index)))
                conn.execute(indexdef)
                conn.execute(sql.SQL("DELETE FROM {}.{} WHERE index_name = %s").format(
                    sql.Identifier(s), sql.Identifier(DEFERRED_TABLE)), (index,))
            built.append(index)
    return built


def vacuum_analyze(settings: Settings, tables: tuple[str, ...]) -> None:
    """VACUUM (ANALYZE) each of the namespace's `tables` that exists: planner statistics, and the
    visibility map that lets an index-only scan skip the heap (a bulk-loaded table has neither
    until autovacuum comes round)."""
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        for table in tables:
            if table_exists(conn, settings.namespace, table):
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}.{}").format(sql.Identifier(settings.namespace), sql.Identifier(table)))


def load_pg_positions(conn: psycopg.Connection, schema: str, projector: str) -> dict[TopicPart, int]:
    if not table_exists(conn, schema, "projector_positions"):
        return {}
    rows = conn.execute(sql.SQL("SELECT topic, partition, next_offset FROM {}.projector_positions WHERE projector = %s")
                        .format(sql.Identifier(schema)), (projector,)).fetchall()
    return {(t, p): o for t, p, o in rows}


# -- Neo4j --------------------------------------------------------------------------------------

def graph_driver(settings: Settings):
    return neo4j_auth.driver(settings)


def graph_positions(runner, generation: str) -> dict[TopicPart, int]:
    rows = runner.run("MATCH (p:ProjectorPosition {ns: $ns, projector: $name}) RETURN p.topic AS t, p.partition AS p, "
                      "p.next_offset AS o", ns=generation, name=GRAPH).data()
    return {(r["t"], r["p"]): r["o"] for r in rows}


def rebuild_generation(driver, namespace: str, fresh: bool) -> str:
    """The generation a rebuild writes its shadow graph into: the one an interrupted rebuild
    recorded on the pointer (resume), or a new one."""
    with driver.session() as s:
        s.run(graph_generation.SETUP).consume()
        rec = s.run("MERGE (gp:GraphPointer {ns: $ns}) ON CREATE SET gp.current = $ns "
                    "RETURN gp.current AS current, gp.shadow AS shadow, coalesce(gp.generations, 0) AS n", ns=namespace).single()
        if rec["shadow"] and not fresh:
            return rec["shadow"]
        if rec["shadow"]:
            delete_generation(driver, rec["shadow"])
        gen = f"{namespace}__g{rec['n'] + 1}"
        s.run("MATCH (gp:GraphPointer {ns: $ns}) SET gp.shadow = $gen, gp.generations = $n", ns=namespace, gen=gen,
              n=rec["n"] + 1).consume()
        delete_generation(driver, gen)  # leftovers of an abandoned run under the same name
        return gen


def delete_generation(driver, generation: str, batch: int = 10_000) -> int:
    """Delete a graph generation's nodes (with their edges) and positions, in batches."""
    deleted = 0
    with driver.session() as s:
        while True:
            n = s.run("MATCH (m:Memory {ns: $ns}) WITH m LIMIT $b DETACH DELETE m RETURN count(*) AS n",
                      ns=generation, b=batch).single()["n"]
            deleted += n
            if n < batch:
                break
        while True:   # relational memory's entities (#26), with their RELATES edges
            n = s.run("MATCH (x:Entity {ns: $ns}) WITH x LIMIT $b DETACH DELETE x RETURN count(*) AS n",
                      ns=generation, b=batch).single()["n"]
            deleted += n
            if n < batch:
                break
        s.run("MATCH (p:ProjectorPosition {ns: $ns}) DELETE p", ns=generation).consume()
    return deleted


# -- holding the live writers ------------------------------------------------------------------

@dataclass
class WriterLocks:
    """Blocks the live writers of some projections while held (a catch-up, a compare, a swap).

    Postgres: each projector's writer lock, exclusively, in one open transaction. Neo4j: the
    namespace's graph pointer, write-locked in one open transaction. Readers are not blocked.
    """
    settings: Settings
    names: list[str]
    lock_timeout_s: float = 60.0
    pg_conn: psycopg.Connection | None = None
    graph_tx: object = None
    _graph_session: object = None
    _driver: object = None
    live_generation: str | None = None
    positions: dict[str, dict[TopicPart, int]] = field(default_factory=dict)

    def __enter__(self) -> WriterLocks:
        pg_names = [n for n in self.names if not is_graph(n)]
        if pg_names:
            pg.ensure_schema(self.settings)   # a dropped live schema still gets its positions table
            self.pg_conn = psycopg.connect(self.settings.pg_dsn())
            self.pg_conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{int(self.lock_timeout_s * 1000)}ms")))
            for name in sorted(pg_names):
                self.pg_conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (pg.writer_lock_key(self.settings, name),))
            for name in pg_names:
                self.positions[name] = load_pg_positions(self.pg_conn, self.settings.namespace, name)
        if any(is_graph(n) for n in self.names):
            self._driver = graph_driver(self.settings)
            with self._driver.session() as s:
                s.run(graph_generation.SETUP).consume()
            self._graph_session = self._driver.session()
            self.graph_tx = self._graph_session.begin_transaction()
            self.live_generation = graph_generation.follow(self.graph_tx, self.settings.namespace)
            self.positions[GRAPH] = graph_positions(self.graph_tx, self.live_generation)
        return self

    def swap(self, shadow: Settings, shadow_generation: str | None) -> str | None:
        """Move the shadow in (both stores); returns the graph generation to delete, if any."""
        pg_names = [n for n in self.names if not is_graph(n)]
        if pg_names:
            self._swap_postgres(shadow, pg_names)
        old = None
        if self.graph_tx is not None and shadow_generation is not None:
            old = self.live_generation
            self.graph_tx.run("MATCH (gp:GraphPointer {ns: $ns}) SET gp.current = $gen, gp.previous = $old, "
                              "gp.shadow = null, gp.swapped_at = datetime()",
                              ns=self.settings.namespace, gen=shadow_generation, old=old).consume()
            self.graph_tx.commit()
            self.graph_tx = None
        return old

    def _swap_postgres(self, shadow: Settings, names: list[str]) -> None:
        live_s, shadow_s = self.settings.namespace, shadow.namespace
        old_s = f"{live_s}__old"
        conn = self.pg_conn
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(old_s)))
        for name in names:
            for table in owned_tables(name):
                if not table_exists(conn, shadow_s, table):
                    raise MemstreamError(f"shadow {shadow_s}.{table} is missing; rebuild {name} again")
                if table_exists(conn, live_s, table):
                    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.{}").format(sql.Identifier(old_s), sql.Identifier(table)))
                    conn.execute(sql.SQL("ALTER TABLE {}.{} SET SCHEMA {}").format(
                        sql.Identifier(live_s), sql.Identifier(table), sql.Identifier(old_s)))
                conn.execute(sql.SQL("ALTER TABLE {}.{} SET SCHEMA {}").format(
                    sql.Identifier(shadow_s), sql.Identifier(table), sql.Identifier(live_s)))
        conn.execute(sql.SQL("DELETE FROM {}.projector_positions WHERE projector = ANY(%s)").format(sql.Identifier(live_s)), (names,))
        conn.execute(sql.SQL("INSERT INTO {}.projector_positions (projector, topic, partition, next_offset) "
                             "SELECT projector, topic, partition, next_offset FROM {}.projector_positions "
                             "WHERE projector = ANY(%s)").format(sql.Identifier(live_s), sql.Identifier(shadow_s)), (names,))
        conn.execute(sql.SQL("DELETE FROM {}.projector_positions WHERE projector = ANY(%s)").format(sql.Identifier(shadow_s)), (names,))
        conn.commit()
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(old_s)))
        conn.commit()

    def __exit__(self, *exc) -> None:
        if self.pg_conn is not None:
            if not self.pg_conn.closed:
                self.pg_conn.rollback()
                self.pg_conn.close()
        if self.graph_tx is not None:
            try:
                self.graph_tx.rollback()
            finally:
                self.graph_tx = None
        if self._graph_session is not None:
            self._graph_session.close()
        if self._driver is not None:
            self._driver.close()


def wait_graph_grace(seconds: float = 2.0) -> None:
    """Queries that resolved the old generation just before a swap finish within this."""
    time.sleep(seconds)
