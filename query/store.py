"""Connections the query side shares: a Postgres pool, a Neo4j driver, the query embedder."""
from __future__ import annotations

import threading
from functools import cached_property

from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool

from memstream import neo4j_auth
from memstream.config import Settings


class ReadModels:
    def __init__(self, settings: Settings, pool_size: int = 8):
        self.settings = settings
        self.schema = sql.Identifier(settings.namespace)
        self.pool = ConnectionPool(settings.pg_dsn(role="api"), min_size=1, max_size=pool_size, open=True,
                                   configure=lambda conn: register_vector(conn), kwargs={"autocommit": True})
        self.graph = neo4j_auth.driver(settings)
        self._embed_lock = threading.Lock()

    def q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=self.schema)

    @cached_property
    def embedder(self):
        from memstream.embedding import make_embedder
        return make_embedder(self.settings)

    def embed_query(self, text: str) -> list[float]:
        with self._embed_lock:  # one model instance; its C engine is not re-entrant
            return self.embedder.query(text)

    def close(self) -> None:
        self.pool.close()
        self.graph.close()
