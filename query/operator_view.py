"""What an operator looks at beside the read models: the dead-letter topic, and every projector's
stored position against the log's end (Kafka; positions from Postgres and Neo4j). Read-only.
The laws cited here are defined in docs/concepts.md#laws."""
from __future__ import annotations

import logging
import uuid

import psycopg

from projections.graph_generation import RESOLVE
from projections.registry import PROJECTOR_TYPES

log = logging.getLogger("memstream.operator")


def _reader(settings, **kw):
    from adapters.bus import LogReader
    from adapters.kafka_auth import PUBLISHER, kafka_config   # the API's principal: reads, no writes here
    return LogReader(kafka_config(settings, PUBLISHER), group_id="console-" + uuid.uuid4().hex, log_level=0, **kw)


def dead_letters(settings, per_partition: int = 100, timeout: float = 5.0) -> list[dict]:
    """The newest `per_partition` dead letters of each partition, newest first. The body is the
    one adapters/bus.py dead_letter_record writes (reason, source, consumer, key, size; the
    original bytes only sealed, never shown). Read by bus.read_dead_letters; what was read in
    `timeout` seconds if the broker is slower than that."""
    from adapters.bus import LogReadTimeout, read_dead_letters
    from adapters.kafka_auth import PUBLISHER   # the API's principal: reads, no writes here
    out: list[dict] = []
    try:
        for m, body in read_dead_letters(settings, PUBLISHER, last=per_partition, group_id="console-" + uuid.uuid4().hex,
                                         idle_timeout_s=timeout, timeout_s=timeout, log_level=0):
            ts = m.timestamp()[1]
            out.append({"partition": m.partition(), "offset": m.offset(), "time_ms": ts if ts and ts > 0 else None,
                        "reason": str(body.get("reason", "")), "source": body.get("source") or {},
                        "consumer": body.get("consumer"), "key": body.get("key"), "size": body.get("size"),
                        "raw_omitted": body.get("raw_omitted")})
    except LogReadTimeout as exc:
        log.warning("dead letters: showing the %d read so far: %s", len(out), exc)
    return sorted(out, key=lambda d: (d["time_ms"] or 0, d["partition"], d["offset"]), reverse=True)


def positions(models, timeout: float = 5.0) -> list[dict]:
    """Every projector's stored position (law 3: its truth, in its own store) per topic partition,
    against the partition's log end: `behind` records are not applied yet."""
    settings = models.settings
    stored: dict[tuple[str, str, int], int] = {}
    with models.pool.connection() as conn:
        try:
            for name, topic, part, offset in conn.execute(models.q(
                    "SELECT projector, topic, partition, next_offset FROM {s}.projector_positions")).fetchall():
                stored[(name, topic, part)] = offset
        except psycopg.errors.UndefinedTable:
            pass
    with models.graph.session() as s:
        for r in s.run(RESOLVE + "MATCH (p:ProjectorPosition {ns: gen, projector: 'neo4j-graph'}) "
                       "RETURN p.topic AS t, p.partition AS p, p.next_offset AS o", ns=settings.namespace).data():
            stored[("neo4j-graph", r["t"], r["p"])] = r["o"]
    with _reader(settings) as reader:
        ends = reader.ends({settings.topic(logical) for cls in PROJECTOR_TYPES.values() for logical in cls.topics}, timeout)
    rows = []
    for name, cls in PROJECTOR_TYPES.items():
        for logical in cls.topics:
            topic = settings.topic(logical)
            for (t, p), high in sorted(ends.items()):
                if t == topic:
                    at = stored.get((name, topic, p), 0)
                    rows.append({"projector": name, "topic": topic, "partition": p, "position": at,
                                 "log_end": high, "behind": max(0, high - at)})
    return rows
