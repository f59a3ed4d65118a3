"""Reading topics back in tests, with a real consumer."""
from __future__ import annotations

import time
import uuid

import orjson
from confluent_kafka import Consumer, TopicPartition

from memstream.config import Settings
from memstream.kafka_auth import ADMIN, kafka_config


def read_all(settings: Settings, topic: str, timeout: float = 5.0) -> list:
    """Every record currently in `topic` (all partitions), as confluent Message objects."""
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": "test-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        meta = c.list_topics(topic, timeout=timeout).topics[topic]
        parts = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {p.partition: c.get_watermark_offsets(p, timeout=timeout)[1] for p in parts}
        c.assign(parts)
        out, done = [], {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(ends) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                done.add(m.partition())
                continue
            out.append(m)
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        return out
    finally:
        c.close()


def dead_letters(settings: Settings) -> list[dict]:
    return [orjson.loads(m.value()) for m in read_all(settings, settings.topic("deadletter"))]
