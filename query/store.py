"""Connections the query side shares: a Postgres pool, a Neo4j driver, the query embedder."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import cached_property

from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool

from adapters import neo4j_auth
from kernel.config import Settings
from adapters.privacy import tenant_barrier


def _configure(conn) -> None:
    register_vector(conn)
    # Every read is scoped to one user, and users differ by orders of magnitude in size. psycopg
    # prepares a statement after its fifth run, and Postgres then may switch to a generic plan made
    # without knowing the user: for recall that was the HNSW scan with a user filter for everyone,
    # where a user with 100 memories needs the btree and an exact sort, and a user with 100,000 the
    # HNSW scan. bench.recall_latency, 100,000 memories over 1,000 users, two A/B pairs in one run:
    # recall p50 37.0-38.2 → 14.4-14.6 ms, p95 49.9-60.4 → 21.2-22.4 ms. Planning is per call now.
    conn.execute("SET plan_cache_mode = force_custom_plan")


class _TenantBoundPool(ConnectionPool):
    """A pool whose every connection, when taken, is set to the tenant the current request is bound
    to (adapters/privacy/tenant_barrier.py): one round trip per checkout."""

    @contextmanager
    def connection(self, timeout: float | None = None):
        with super().connection(timeout) as conn:
            tenant_barrier.apply(conn)
            yield conn


class ReadModels:
    as_of = None   # the present (query/as_of.py's view sets a time)

    def __init__(self, settings: Settings, pool_size: int = 8):
        self.settings = settings
        self.schema = sql.Identifier(settings.namespace)
        self.pool = _TenantBoundPool(settings.pg_dsn(role="api"), min_size=1, max_size=pool_size, open=True,
                                   configure=_configure, kwargs={"autocommit": True})
        self.graph = neo4j_auth.driver(settings)
        self._embed_lock = threading.Lock()

    def q(self, text: str) -> sql.Composed:
        """`text` with {s} the namespace and {items}, {links}, {prefs} the memory items, links and
        preferences read (here the live tables; as of a time, their past: query/as_of.py)."""
        return sql.SQL(text).format(s=self.schema, items=sql.SQL("{}.memory_items").format(self.schema),
                                    links=sql.SQL("{}.memory_links").format(self.schema),
                                    prefs=sql.SQL("{}.preferences").format(self.schema))

    def slot_moved_on(self, row: str) -> sql.Composable:
        """True where the keyed memory `row` (an alias in the query) states another value than its
        slot's current one (law 8, docs/concepts.md#laws): one primary-key probe of preferences a row."""
        return sql.SQL("EXISTS (SELECT 1 FROM {s}.preferences p WHERE p.user_id = {r}.user_id AND p.key = {r}.key "
                       "AND p.value <> {r}.value)").format(s=self.schema, r=sql.Identifier(row))

    def statement(self, stmt: sql.Composable) -> sql.Composable:
        """A statement built from q() pieces, as run (as of a time it carries the pasts it reads)."""
        return stmt

    @cached_property
    def embedder(self):
        from adapters.embedding import make_embedder
        return make_embedder(self.settings)

    def embed_query(self, text: str) -> list[float]:
        with self._embed_lock:  # one model instance; its C engine is not re-entrant
            return self.embedder.query(text)

    def close(self) -> None:
        self.pool.close()
        self.graph.close()
