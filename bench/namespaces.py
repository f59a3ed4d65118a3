"""Benchmarks' namespaces: every run writes into a namespace of its own, never the configured one
(300,000 benchmark turns in `memstream` are the next `memstream run`'s backlog of hours).

Benchmarks whose namespace is only a by-product drop it when they end (`--keep` keeps it for a
look); the ones whose namespace is worth reusing (LoCoMo ingests, rebuild logs, recall data, a
soak's history) keep it and print the command that drops it. `memstream namespace list` shows
every namespace on the stack; `memstream namespace drop NS --yes` removes one whole
(replay/namespaces.py).
"""
from __future__ import annotations

import argparse
import time
import uuid


def fresh(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def add_arguments(ap: argparse.ArgumentParser, prefix: str) -> None:
    ap.add_argument("--namespace", default=None, help=f"namespace to write into (default: a fresh {prefix}…)")
    ap.add_argument("--keep", action="store_true", help="keep the namespace at the end (default: drop it)")


def kept(namespace: str) -> str:
    return f"namespace {namespace} kept; drop it with: .venv/bin/memstream namespace drop {namespace} --yes"


def finish(settings, keep: bool) -> None:
    """At the end of a run, its workers stopped: drop the run's namespace (settings.namespace), or
    say how to."""
    if keep:
        print(kept(settings.namespace))
        return
    from replay.namespaces import drop
    # force: the run's workers are stopped, but one killed by a fault it injected stays a group
    # member until its session times out (15 s).
    fp = drop(settings, settings.namespace, force=True)
    print(f"namespace {settings.namespace} dropped ({len(fp.topics)} topics, {len(fp.schemas)} schemas, "
          f"{fp.graph_nodes:,} graph nodes; --keep keeps it)")


def records_in(settings, topic: str, attempts: int = 50) -> int:
    """Records in `topic` (the sum of its partitions' high watermarks), waiting out the moment a
    topic just created has no leader."""
    from confluent_kafka import Consumer, TopicPartition

    from adapters.kafka_auth import ADMIN, kafka_config
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": "bench-probe"})

    def count() -> int:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in c.list_topics(topic, timeout=10).topics[topic].partitions)
    try:
        for _ in range(attempts - 1):
            try:
                return count()
            except Exception:
                time.sleep(0.2)
        return count()
    finally:
        c.close()
