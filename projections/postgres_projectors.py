"""Postgres projectors: key-value preferences and pgvector memory items.

Both write their rows and their positions in one transaction per batch (law 3) and are
idempotent on ids, so re-applying a batch (or a re-emitted decision) changes nothing.
"""
from __future__ import annotations

import numpy as np
from psycopg import sql

from memstream.config import Settings
from memstream.domain.text import tokens
from projections import pg
from projections.runner import Item, Projector, TopicPart, kind_by_type, runs_by_kind


class _PostgresProjector(Projector):
    topics = ("memory",)

    def __init__(self, settings: Settings):
        self.settings = settings
        self.s = pg.schema(settings)
        self.conn = None

    def setup(self) -> None:
        pg.ensure_schema(self.settings)
        self.conn = pg.connect(self.settings)

    def positions(self) -> dict[TopicPart, int]:
        return pg.load_positions(self.conn, self.settings, self.name)

    def q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=self.s)

    def apply(self, items: list[Item], positions: dict[TopicPart, int]) -> None:
        with self.conn.transaction():
            with self.conn.cursor() as cur:
                self.write(cur, items)
                pg.save_positions(cur, self.settings, self.name, positions)

    def write(self, cur, items: list[Item]) -> None:
        raise NotImplementedError

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
    CHECKSUM = {
        "preferences": (["user_id", "key", "value", "version", "memory_id", "event_id", "updated_at"], ["user_id", "key"]),
        "preference_history": (["user_id", "key", "version", "value", "event_id", "supersedes", "set_at"],
                               ["user_id", "key", "version"]),
    }

    def write(self, cur, items: list[Item]) -> None:
        # Runs of same-kind events keep their order: an erasure must fall between the rows before it and after it.
        for kind, run in runs_by_kind(items, kind_by_type({"user.erased": "erase", "preference.set": "set"})):
            if kind == "erase":
                self.erase_users(cur, [i.event.user for i in run], ("preferences", "preference_history"))
            elif kind == "set":
                rows = [(i.event.user, i.event.data.key, i.event.data.value, i.event.data.pref_version,
                         i.event.data.memory_id, i.event.id, i.event.time, i.event.data.supersedes) for i in run]
                cur.executemany(self.q(
                    "INSERT INTO {s}.preference_history (user_id, key, version, value, event_id, set_at, supersedes) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"),
                    [(u, k, v, val, eid, t, sup) for u, k, val, v, _m, eid, t, sup in rows])
                # Only a higher version replaces the current value: replays and re-emits are no-ops.
                cur.executemany(self.q(
                    "INSERT INTO {s}.preferences (user_id, key, value, version, memory_id, event_id, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET "
                    "value = EXCLUDED.value, version = EXCLUDED.version, memory_id = EXCLUDED.memory_id, "
                    "event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at "
                    "WHERE {s}.preferences.version < EXCLUDED.version"),
                    [(u, k, val, v, m, eid, t) for u, k, val, v, m, eid, t, _sup in rows])


class MemoryItemsProjector(_PostgresProjector):
    """memory.created / .reinforced / .superseded → memory_items (pgvector, HNSW cosine)."""

    name = "pgvector-items"
    CHECKSUM = {"memory_items": ([
        "memory_id", "user_id", "key", "value", "content", "category", "tags", "slot_hint", "importance", "embedding",
        "status", "superseded_by", "access_count", "last_accessed_at", "session", "fact_id", "event_id", "created_at",
        "updated_at", "terms"], ["memory_id"])}
    kind_of = staticmethod(kind_by_type({"user.erased": "erase", "memory.created": "create", "memory.reinforced": "reinforce",
                          "memory.superseded": "supersede"}))

    def write(self, cur, items: list[Item]) -> None:
        for kind, run in runs_by_kind(items, self.kind_of):
            if kind == "erase":
                self.erase_users(cur, [i.event.user for i in run], ("memory_items",))
            elif kind == "create":
                cur.executemany(self.q(
                    "INSERT INTO {s}.memory_items (memory_id, user_id, key, value, content, category, tags, slot_hint, "
                    "importance, embedding, session, fact_id, event_id, created_at, updated_at, terms) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (memory_id) DO NOTHING"),
                    [(d.memory_id, i.event.user, d.key, d.value, d.content, d.category, d.tags, d.slot_hint,
                      d.importance, np.asarray(d.embedding, dtype=np.float32), d.session, d.fact_id, i.event.id,
                      i.event.time, i.event.time, sorted(set(tokens(d.content))))
                     for i in run for d in (i.event.data,)])
            elif kind == "reinforce":
                # Absolute values from the event: applying it twice leaves the same row.
                cur.executemany(self.q(
                    "UPDATE {s}.memory_items SET importance = %s, category = %s, slot_hint = %s, tags = %s, "
                    "access_count = %s, last_accessed_at = %s, updated_at = %s WHERE memory_id = %s AND user_id = %s"),
                    [(d.importance, d.category, d.slot_hint, d.tags, d.access_count, i.event.time, i.event.time,
                      d.memory_id, i.event.user) for i in run for d in (i.event.data,)])
            elif kind == "supersede":
                cur.executemany(self.q(
                    "UPDATE {s}.memory_items SET status = 'outdated', superseded_by = %s, updated_at = %s "
                    "WHERE memory_id = %s AND user_id = %s"),
                    [(d.superseded_by, i.event.time, d.memory_id, i.event.user) for i in run for d in (i.event.data,)])
