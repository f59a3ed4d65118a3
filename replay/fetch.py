"""Fetch individual records from Kafka by position (topic, partition, offset).

The audit index knows where every event is but holds no content; time travel and audits read the
records themselves. Every partition involved is read at once (one LogReader, adapters/bus.py);
within a partition the wanted offsets are read in order, one read per stretch of nearby offsets,
reading through small gaps rather than seeking again.
"""
from __future__ import annotations

import time

from adapters.bus import LogReader
from kernel.config import Settings
from adapters.kafka_auth import PUBLISHER, kafka_config

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
    """{position: confluent Message} for every position that exists (missing ones are left out).
    LogReadTimeout (a MemstreamError) when it takes more than `timeout` seconds."""
    wanted: dict[tuple[str, int], list[int]] = {}
    for t, p, o in set(positions):
        wanted.setdefault((t, p), []).append(o)
    out: dict[Pos, object] = {}
    todo = {tp: _stretches(offs, gap) for tp, offs in wanted.items()}
    if not todo:
        return out
    wanted_set = {(t, p, o) for (t, p), offs in wanted.items() for o in offs}
    deadline = time.monotonic() + timeout
    # PUBLISHER: the API's audit and time-travel reads; it reads every topic of the namespace, writes none here.
    # "latest": an offset past the end reads as the end (nothing there), not as the partition's start.
    with LogReader(kafka_config(settings, PUBLISHER), "fetch", poll_s=0.05, idle_timeout_s=timeout,
                   **{"fetch.wait.max.ms": 10, "auto.offset.reset": "latest"}) as reader:
        while todo:   # each partition's next stretch, all partitions at once
            now = {tp: stretches.pop(0) for tp, stretches in todo.items()}
            for m in reader.records({tp: (offs[0], offs[-1] + 1) for tp, offs in now.items()},
                                    timeout_s=max(0.0, deadline - time.monotonic())):
                pos = (m.topic(), m.partition(), m.offset())
                if pos in wanted_set:       # not one read through in a small gap
                    out[pos] = m
            todo = {tp: stretches for tp, stretches in todo.items() if stretches}
    return out
