"""The audit index: one row per event of every topic — who, what, when, where in the log, and
which memories it concerns. Never any content: only what travels in the clear.

Erased events (sealed part unreadable) are indexed too; their `memory_ids` are empty because the
codec drops an erased event's data, clear fields included. So are those of any event of a user
once erased, read with a key still cached or not: replay reads them all without the key.

On `user.erased` the user's rows up to its time go and the erasure record itself is written, so
only the fact that the deletion happened remains (earlier erasure records stay: each is such a fact). Topics
interleave arbitrarily (above all on replay), so the erasure records double as tombstones: an
event of the user no newer than one of their erasures is never indexed afterwards.

Forgetting works the same way, narrower: on `memory.forgotten` the rows of every event that
concerns one of the forgotten memories go and the record stays (a tombstone for those ids, at
any time); on `user.forgotten` the user's fact and memory-topic rows up to its time go (their
turns and task steps stay: forgetting is not erasure) and the record stays.
"""
from __future__ import annotations



from kernel.config import Settings
from projections import pg
from projections.postgres_projectors import _PostgresProjector
from projections.memory_refs import memory_ids_of  # noqa: F401  (also the audit index's public reading)
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
-- the tombstone checks of every insert look up the user's deletion records only: a small index
CREATE INDEX IF NOT EXISTS audit_events_records ON {s}.audit_events (user_id, type, event_time)
    WHERE type IN ('user.erased', 'memory.forgotten', 'user.forgotten');
"""

# Records of a deletion: never deleted themselves, never kept out by a tombstone.
_RECORDS = ("user.erased", "user.forgotten", "memory.forgotten")


def ensure_tables(settings: Settings) -> None:
    pg.ensure_ddl(settings, DDL)


def _kind(e: Envelope) -> str:
    # Every event is indexed, erased ones included; only deletions need their own step.
    return {"user.erased": "erase", "memory.forgotten": "forget", "user.forgotten": "forget_user"}.get(e.type, "event")


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
                    # 1. The user's rows up to the erasure's time go, unless this erasure was
                    #    already applied (a duplicate must not delete what was indexed since).
                    #    Bounded by time like the tombstone check in _insert: an event dated after
                    #    the erasure (sealed with a key still cached somewhere) is indexed whether
                    #    its topic is read before or after the erasure's, so live and replay agree.
                    cur.execute(self.q(
                        "DELETE FROM {s}.audit_events WHERE user_id = %s AND type <> 'user.erased' "
                        "AND event_time <= %s AND NOT EXISTS (SELECT 1 FROM {s}.audit_events WHERE event_id = %s)"),
                        (item.event.user, item.event.time, item.event.id))
                    # 2. The user's later rows (events dated after the erasure) lose their memory
                    #    ids: a replay reads those events without their key, so without ids; rows
                    #    indexed from here on get none either (_insert). Live and replay then agree
                    #    whichever topic was read first.
                    cur.execute(self.q("UPDATE {s}.audit_events SET memory_ids = '{{}}' WHERE user_id = %s "
                                       "AND memory_ids <> '{{}}'"), (item.event.user,))
                    # 3. … then the erasure record itself, which is also the tombstone.
                    self._insert(cur, [item])
            elif kind == "forget":
                for item in run:
                    # Every row concerning a forgotten memory (ids never come back, so no time bound) …
                    cur.execute(self.q(
                        "DELETE FROM {s}.audit_events WHERE user_id = %s AND memory_ids && %s::text[] "
                        "AND type <> ALL(%s)"), (item.event.user, item.event.data.memory_ids, list(_RECORDS)))
                    self._insert(cur, [item])  # … then the record, the tombstone for those ids
            elif kind == "forget_user":
                for item in run:
                    # The user's memory side (facts and memory topics) up to the record's time.
                    cur.execute(self.q(
                        "DELETE FROM {s}.audit_events WHERE user_id = %s AND topic = ANY(%s) AND event_time <= %s "
                        "AND type <> ALL(%s)"),
                        (item.event.user, self._memory_side(), item.event.time, list(_RECORDS)))
                    self._insert(cur, [item])
            else:
                self._insert(cur, run)

    def _memory_side(self) -> list[str]:
        return [self.settings.topic("facts"), self.settings.topic("memory")]

    _COLUMNS = [("event_id", "text"), ("user_id", "text"), ("type", "text"), ("version", "int4"),
                ("event_time", "timestamptz"), ("topic", "text"), ("partition", "int4"), ("log_offset", "int8"),
                ("causation_id", "text"), ("correlation_id", "text"), ("producer", "text"), ("memory_ids", "text[]"),
                ("record", "bool"), ("memory_side", "bool")]

    def _insert(self, cur, run: list[Item]) -> None:
        # ON CONFLICT: the first position an event id was seen at wins; the tombstone check keeps
        # an erased past out whatever order the topics are read in. The rows are COPYed into a temp
        # table and inserted by one statement in log order (pg.copy_rows); a run never holds a
        # record and the rows it inserts, so the checks see what row-by-row inserts would.
        side = self._memory_side()
        pg.copy_rows(cur, "audit_events_in", self._COLUMNS,
                     ((e.id, e.user, e.type, e.stored_version or e.version, e.time, i.topic, i.partition, i.offset,
                       e.causation, e.correlation, e.producer, memory_ids_of(e), e.type in _RECORDS, i.topic in side)
                      for i in run for e in (i.event,)))
        cur.execute(self.q(
            "INSERT INTO {s}.audit_events (event_id, user_id, type, version, event_time, topic, partition, log_offset, "
            "causation_id, correlation_id, producer, memory_ids) "
            "SELECT r.event_id, r.user_id, r.type, r.version, r.event_time, r.topic, r.partition, r.log_offset, "
            "r.causation_id, r.correlation_id, r.producer, "
            # an erased user's event keeps no memory ids, even one read while its key was still cached
            "CASE WHEN EXISTS (SELECT 1 FROM {s}.audit_events x WHERE x.user_id = r.user_id AND x.type = 'user.erased') "
            "THEN '{{}}'::text[] ELSE r.memory_ids END FROM audit_events_in r "
            "WHERE (r.type = 'user.erased' OR NOT EXISTS (SELECT 1 FROM {s}.audit_events x "
            "WHERE x.user_id = r.user_id AND x.type = 'user.erased' AND x.event_time >= r.event_time)) "
            # forgetting's tombstones: a forgotten memory's events, the forgotten past of a user's memory side
            "AND (r.record OR NOT EXISTS (SELECT 1 FROM {s}.audit_events x WHERE x.user_id = r.user_id "
            "AND x.type = 'memory.forgotten' AND x.memory_ids && r.memory_ids)) "
            "AND (r.record OR NOT r.memory_side OR NOT EXISTS (SELECT 1 FROM {s}.audit_events x "
            "WHERE x.user_id = r.user_id AND x.type = 'user.forgotten' AND x.event_time >= r.event_time)) "
            "ORDER BY r.seq ON CONFLICT (event_id) DO NOTHING"))
