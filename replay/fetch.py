"""Fetch individual records from Kafka by position (topic, partition, offset).

The audit index knows where every event is but holds no content; time travel and audits read the
records themselves. Every partition involved is assigned at once (one consumer); within a
partition the wanted offsets are read in order, seeking once per stretch of nearby offsets and
reading through small gaps rather than seeking again.
"""
from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition

from memstream.config import Settings
from memstream.errors import MemstreamError
from memstream.kafka_auth import PUBLISHER, kafka_config

Pos = tuple[str, int, int]


def _stretches(offsets: list[int], gap: int) -> list[list[int]]:
    offsets = sorted(set(offsets))
    out, start = [], 0
    for i in range(1, len(offsets) + 1):
        if i == len(offsets) or offsets[i] - offsets[i - 1] > gap:
            out.append(offsets[start:i])
            start = i
    return out


def fetch(settings: Settings, positions, gap: int = 500, timeout: float = 30.0) -> dict[Pos, object]:
    """{position: confluent Message} for every position that exists (missing ones are left out)."""
    wanted: dict[tuple[str, int], list[int]] = {}
    for t, p, o in set(positions):
        wanted.setdefault((t, p), []).append(o)
    out: dict[Pos, object] = {}
    if not wanted:
        return out
    todo = {tp: _stretches(offs, gap) for tp, offs in wanted.items()}
    # PUBLISHER: the API's audit and time-travel reads; it reads every topic of the namespace, writes none here
    c = Consumer({**kafka_config(settings, PUBLISHER), "group.id": f"memstream-fetch-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 10})
    try:
        c.assign([TopicPartition(t, p, todo[(t, p)][0][0]) for t, p in todo])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise MemstreamError(f"timed out reading records at {sorted(todo)[:3]}…")
            for m in c.consume(num_messages=1000, timeout=0.05):
                tp = (m.topic(), m.partition())
                if tp not in todo:
                    continue
                current = todo[tp][0]
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        _next(c, todo, tp, eof=True)       # offsets past the end do not exist
                    continue
                if m.offset() < current[0]:
                    continue                                # left over from before a seek
                if m.offset() in current:
                    out[(tp[0], tp[1], m.offset())] = m
                if m.offset() >= current[-1]:
                    _next(c, todo, tp)
        return out
    finally:
        c.close()


def _next(c: Consumer, todo: dict, tp: tuple[str, int], eof: bool = False) -> None:
    """The partition's current stretch is done: seek to its next one, or stop reading it."""
    stretches = todo[tp]
    stretches.pop(0)
    if eof:
        stretches.clear()
    if stretches:
        c.seek(TopicPartition(tp[0], tp[1], stretches[0][0]))
    else:
        del todo[tp]
        c.pause([TopicPartition(tp[0], tp[1])])
