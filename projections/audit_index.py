"""The audit index: one row per event of every topic — who, what, when, where in the log, and
which memories it concerns. Never any content: only what travels in the clear.

Erased events (sealed part unreadable) are indexed too; their `memory_ids` are empty because the
codec drops an erased event's data, clear fields included.

On `user.erased` the user's rows go and the erasure record itself is written, so only the fact
that the deletion happened remains (earlier erasure records stay: each is such a fact). Topics
interleave arbitrarily (above all on replay), so the erasure records double as tombstones: an
event of the user no newer than one of their erasures is never indexed afterwards.
"""
from __future__ import annotations

from collections.abc import Mapping


from memstream.config import Settings
from projections import pg
from projections.postgres_projectors import _PostgresProjector
from projections.runner import Item, runs_by_kind
from schemas.envelope import Envelope

DDL = """
CREATE TABLE IF NOT EXISTS {s}.audit_events (
    event_id       text PRIMARY KEY,
    user_id        text NOT NULL,
    type           text NOT NULL,
    version        int  NOT NULL,          -- as written in the log, before upcasting
    event_time     timestamptz NOT NULL,
    topic          text NOT NULL,
    partition      int  NOT NULL,
    log_offset     bigint NOT NULL,
    causation_id   text,
    correlation_id text,
    producer       text NOT NULL,
    memory_ids     text[] NOT NULL DEFAULT '{{}}'
);
CREATE INDEX IF NOT EXISTS audit_events_user_time ON {s}.audit_events (user_id, event_time);
CREATE INDEX IF NOT EXISTS audit_events_memory_ids ON {s}.audit_events USING gin (memory_ids);
"""

# Fields that name a memory, in any event type, present or future (memory.linked: from_id/to_id).
_MEMORY_REF = ("memory_id", "superseded_by", "from_id", "to_id", "merged_into", "into_id")
_MEMORY_REFS = ("memory_ids", "merged_ids", "source_ids")


def memory_ids_of(envelope: Envelope) -> list[str]:
    """The memory ids an event concerns, in field order, without duplicates. Pure; never raises.

    memory.* and preference.set: their memory ids; fact.extracted: its fact_id (the memory-to-be).
    Unknown types are read by field name, so a new event type is indexed without a code change.
    """
    data = envelope.data
    if data is None:
        return []
    fields = data if isinstance(data, Mapping) else getattr(data, "__dict__", {})
    found: list = []
    if envelope.type.startswith("fact."):
        found.append(fields.get("fact_id"))
    for name, value in fields.items():
        if name in _MEMORY_REF or name.endswith("_memory_id"):
            found.append(value)
        elif (name in _MEMORY_REFS or name.endswith("_memory_ids")) and isinstance(value, (list, tuple)):
            found.extend(value)
    return list(dict.fromkeys(str(v) for v in found if isinstance(v, (str, int)) and str(v)))


def ensure_tables(settings: Settings) -> None:
    pg.ensure_ddl(settings, DDL)


def _kind(e: Envelope) -> str:
    # Every event is indexed, erased ones included; only the erasure needs its own step.
    return "erase" if e.type == "user.erased" else "event"


class AuditIndexProjector(_PostgresProjector):
    """Every event of turns, tasks, facts, memory → audit_events (ids, types, times, positions)."""

    name = "audit-index"
    topics = ("turns", "tasks", "facts", "memory")
    CHECKSUM = {"audit_events": (["event_id", "user_id", "type", "version", "event_time", "topic", "partition",
                                  "log_offset", "causation_id", "correlation_id", "producer", "memory_ids"],
                                 ["event_id"])}

    def setup(self) -> None:
        super().setup()
        ensure_tables(self.settings)

    def write(self, cur, items: list[Item]) -> None:
        for kind, run in runs_by_kind(items, _kind):
            if kind == "erase":
                for item in run:
                    # 1. The user's rows go, unless this erasure was already applied (a duplicate
                    #    must not delete what was indexed since) …
                    cur.execute(self.q(
                        "DELETE FROM {s}.audit_events WHERE user_id = %s AND type <> 'user.erased' "
                        "AND NOT EXISTS (SELECT 1 FROM {s}.audit_events WHERE event_id = %s)"),
                        (item.event.user, item.event.id))
                    # 2. … then the erasure record itself, which is also the tombstone.
                    self._insert(cur, [item])
            else:
                self._insert(cur, run)

    def _insert(self, cur, run: list[Item]) -> None:
        # ON CONFLICT: the first position an event id was seen at wins; the tombstone check keeps
        # an erased past out whatever order the topics are read in.
        cur.executemany(self.q(
            "INSERT INTO {s}.audit_events (event_id, user_id, type, version, event_time, topic, partition, log_offset, "
            "causation_id, correlation_id, producer, memory_ids) "
            "SELECT %(id)s, %(user)s, %(type)s, %(version)s, %(time)s, %(topic)s, %(partition)s, %(offset)s, "
            "%(causation)s, %(correlation)s, %(producer)s, %(memory_ids)s::text[] "
            "WHERE %(type)s = 'user.erased' OR NOT EXISTS (SELECT 1 FROM {s}.audit_events x "
            "WHERE x.user_id = %(user)s AND x.type = 'user.erased' AND x.event_time >= %(time)s) "
            "ON CONFLICT (event_id) DO NOTHING"),
            [{"id": e.id, "user": e.user, "type": e.type, "version": e.stored_version or e.version, "time": e.time,
              "topic": i.topic, "partition": i.partition, "offset": i.offset, "causation": e.causation,
              "correlation": e.correlation, "producer": e.producer, "memory_ids": memory_ids_of(e)}
             for i in run for e in (i.event,)])
