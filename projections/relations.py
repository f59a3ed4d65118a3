"""Relational memory's Postgres read model (#26): the entities of a user's world and the relations
between them, with their validity in event time (projector "pg-relations").

entity.observed → entities (absolute state: the row is replaced); relation.asserted → relations
(valid_from, valid_to NULL while current; the first assertion of an id wins, so a re-emitted or
re-applied one changes nothing); relation.ended → the row's valid_to, end reason and the turn
that ended it. Relations are ended, never deleted: an as-of read (valid_from <= t AND (valid_to
IS NULL OR valid_to > t)) sees what held at t. Only user.erased and user.forgotten delete rows.

Names, aliases and evidence are sealed in the log and personal: they live here (rewritten by the
storage scrub after an erasure), never in Neo4j (projections/graph_projector.py holds ids only).
Rows and positions are written in one transaction per batch (law 3, docs/concepts.md#laws).
"""
from __future__ import annotations

from projections import pg
from projections.postgres_projectors import _PostgresProjector
from projections.relations_schema import DDL
from projections.runner import Item, kind_by_type, runs_by_kind


class RelationsProjector(_PostgresProjector):
    """entity.observed / relation.asserted / relation.ended (+ user.erased, user.forgotten) →
    entities, relations."""

    name = "pg-relations"
    ERASURES = "relation_erasures"
    CHECKSUM = {
        "entities": (["user_id", "entity_id", "entity_type", "name", "aliases", "source_turn", "event_id",
                      "updated_at"], ["user_id", "entity_id"]),
        "relations": (["user_id", "relation_id", "subject_id", "predicate", "object_id", "valid_from", "valid_to",
                       "recorded_at", "ended_at_recorded", "end_reason", "ended_by", "source_turn", "ended_turn",
                       "evidence", "event_id"], ["user_id", "relation_id"]),
    }
    kind_of = staticmethod(kind_by_type({"user.erased": "erase", "user.forgotten": "erase",
                                         "entity.observed": "entity", "relation.asserted": "assert",
                                         "relation.ended": "end"}))

    def setup(self) -> None:
        super().setup()
        pg.ensure_ddl(self.settings, DDL)

    def write(self, cur, items: list[Item]) -> None:
        # Runs keep log order: an erasure falls between the rows before it and after it.
        for kind, run in runs_by_kind(items, self.kind_of):
            if kind == "erase":
                self.erase_users(cur, sorted({i.event.user for i in run}), ("entities", "relations"))
            elif kind == "entity":
                # Absolute state: the newest observation replaces the row (re-applying it is a no-op).
                cur.executemany(self.q(
                    "INSERT INTO {s}.entities (user_id, entity_id, entity_type, name, aliases, source_turn, event_id, "
                    "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, entity_id) DO UPDATE SET "
                    "entity_type = EXCLUDED.entity_type, name = EXCLUDED.name, aliases = EXCLUDED.aliases, "
                    "source_turn = EXCLUDED.source_turn, event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at"),
                    [(i.event.user, d.entity_id, d.entity_type, d.name, list(d.aliases), d.source_turn, i.event.id,
                      i.event.time) for i in run for d in (i.event.data,)])
            elif kind == "assert":
                cur.executemany(self.q(
                    "INSERT INTO {s}.relations (user_id, relation_id, subject_id, predicate, object_id, valid_from, "
                    "recorded_at, source_turn, evidence, event_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (user_id, relation_id) DO NOTHING"),
                    [(i.event.user, d.relation_id, d.subject_id, d.predicate, d.object_id, d.valid_from, i.event.time,
                      d.source_turn, d.evidence, i.event.id) for i in run for d in (i.event.data,)])
            elif kind == "end":
                # Absolute values from the event: applying it twice leaves the same row.
                cur.executemany(self.q(
                    "UPDATE {s}.relations SET valid_to = %s, ended_at_recorded = %s, end_reason = %s, ended_by = %s, "
                    "ended_turn = %s WHERE user_id = %s AND relation_id = %s"),
                    [(d.valid_to, i.event.time, d.reason, d.ended_by, d.source_turn, i.event.user, d.relation_id)
                     for i in run for d in (i.event.data,)])
