"""What an operator looks at beside the read models: the dead-letter topic, and every projector's
stored position against the log's end (Kafka; positions from Postgres and Neo4j). Read-only.
The laws cited here are defined in docs/concepts.md#laws."""
from __future__ import annotations

import uuid

import orjson
import psycopg

from projections.graph_generation import RESOLVE
from projections.registry import PROJECTOR_TYPES


def _consumer(settings):
    from confluent_kafka import Consumer
    from memstream.kafka_auth import PUBLISHER, kafka_config   # the API's principal: reads, no writes here
    return Consumer({**kafka_config(settings, PUBLISHER), "group.id": "console-" + uuid.uuid4().hex,
                     "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})


def dead_letters(settings, per_partition: int = 100, timeout: float = 5.0) -> list[dict]:
    """The newest `per_partition` dead letters of each partition, newest first. The body is the
    one memstream/bus.py dead_letter_record writes (reason, source, consumer, key, size; the
    original bytes only sealed, never shown)."""
    import time

    from confluent_kafka import TopicPartition
    topic = settings.topic("deadletter")
    c = _consumer(settings)
    try:
        meta = c.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        parts, ends = [], {}
        for p in meta.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                parts.append(TopicPartition(topic, p, max(low, high - per_partition)))
                ends[p] = high
        out: list[dict] = []
        if not parts:
            return out
        c.assign(parts)
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(ends) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                done.add(m.partition())
                continue
            try:
                body = orjson.loads(m.value() or b"{}")
                body = body if isinstance(body, dict) else {"reason": "(not a dead-letter body)"}
            except orjson.JSONDecodeError:
                body = {"reason": "(not a dead-letter body)"}
            ts = m.timestamp()[1]
            out.append({"partition": m.partition(), "offset": m.offset(), "time_ms": ts if ts and ts > 0 else None,
                        "reason": str(body.get("reason", "")), "source": body.get("source") or {},
                        "consumer": body.get("consumer"), "key": body.get("key"), "size": body.get("size"),
                        "raw_omitted": body.get("raw_omitted")})
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        return sorted(out, key=lambda d: (d["time_ms"] or 0, d["partition"], d["offset"]), reverse=True)
    finally:
        c.close()


def positions(models, timeout: float = 5.0) -> list[dict]:
    """Every projector's stored position (law 3: its truth, in its own store) per topic partition,
    against the partition's log end: `behind` records are not applied yet."""
    from confluent_kafka import TopicPartition
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
    c = _consumer(settings)
    try:
        rows, topics = [], c.list_topics(timeout=timeout).topics     # one metadata request for all
        for name, cls in PROJECTOR_TYPES.items():
            for logical in cls.topics:
                topic = settings.topic(logical)
                meta = topics.get(topic)
                for p in sorted(meta.partitions if meta is not None and meta.error is None else ()):
                    high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                    at = stored.get((name, topic, p), 0)
                    rows.append({"projector": name, "topic": topic, "partition": p, "position": at,
                                 "log_end": high, "behind": max(0, high - at)})
        return rows
    finally:
        c.close()
