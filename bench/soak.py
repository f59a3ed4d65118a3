"""Soak: the whole supervised pipeline under a steady stream of turns; RSS and lag over time.

    .venv/bin/python -m bench.soak [--minutes 10] [--rate 20] [--users 200]

Starts the workers of `memstream run` (no ticker) in a fresh namespace, publishes turns at
`--rate` per second for `--minutes`, and at 1, 5 and 10 minutes (and at the end) prints each
worker's RSS (its process tree, MiB), its restarts, and the lag of every consumer: the extractor
and memory processor groups (end offset − committed offset) and every projector (end of the
memory topic − stored position). A growing RSS at a flat lag is a leak; a growing lag is a
stage that cannot keep up at this rate.
"""
from __future__ import annotations

import argparse
import io
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memstream.app.workers import Supervisor
from adapters.bus import EventProducer, ensure_topics
from kernel.config import get_settings
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy.keystore import KeyStore
from adapters.resilience import read_health
from memstream.stack.process import memory_mib
from projections import pg
from projections.registry import PROJECTORS, build_projector
from schemas.codec import encode, make_envelope
from schemas.events import TurnRecorded

TEXTS = ["I like {x}", "I live in {x}", "My favourite food is {x}", "我喜欢{x}", "I work at {x}",
         "we talked about {x} today", "remind me about {x} tomorrow"]
WORDS = ["hiking", "Lisbon", "ramen", "喝茶", "Acme", "chess", "jazz", "Porto", "咖啡", "sailing", "Kyoto", "tennis"]


def group_lag(settings, group: str, topics: list[str]) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": group, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(settings.topic(t), p) for t in topics for p in range(settings.partitions)]
        return sum(c.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)[1] - max(tp.offset, 0)
                   for tp in c.committed(parts, timeout=10))
    finally:
        c.close()


def end_offset(settings, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": "memstream-soak-probe"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(settings.topic(topic), p), timeout=10)[1]
                   for p in range(settings.partitions))
    finally:
        c.close()


def projector_lag(settings) -> dict[str, int]:
    """End of the memory topic − stored positions; positions read first, so never negative."""
    stored = {}
    mem = settings.topic("memory")
    for name in PROJECTORS:
        proj = build_projector(name, settings)
        proj.setup()
        try:
            stored[name] = sum(o for (t, _p), o in proj.positions().items() if t == mem)
        finally:
            proj.close()
    end = end_offset(settings, "memory")
    return {name: end - pos for name, pos in stored.items()}


def changelog_mib(settings) -> float:
    """Bytes of this namespace's state changelog segments on the broker's disk (the local stack's
    log dir; .log files only: Kafka preallocates its index files sparse, 10 MiB each)."""
    root = Path(settings.stack_dir) / "data" / "kafka"
    return sum(f.stat().st_size for d in root.glob(f"{settings.namespace}.*-changelog-*")
               for f in d.glob("*.log")) / 2**20


def report(settings, sup: Supervisor, started: float, sent: int) -> None:
    mins = (time.monotonic() - started) / 60
    print(f"--- {mins:.1f} min, {sent} turns sent")
    health = read_health(settings)
    for name, proc in sup.procs.items():
        rss = memory_mib(proc.pid).get("rss_mib") if proc.poll() is None else None
        tables = health.get(name, {}).get("components", {}).get(name, {}).get("tables") or {}
        state = "".join(f"  {t} {v['keys']} keys {v['bytes'] / 2**20:.1f} MiB" for t, v in sorted(tables.items()))
        print(f"  {name:<11} rss {rss if rss is None else round(rss)} MiB  restarts {sup.restarts[name]}{state}")
    print(f"  changelogs on disk: {changelog_mib(settings):.1f} MiB")
    print(f"  lag: extractor {group_lag(settings, f'{settings.namespace}.extractor', ['turns'])}, "
          f"memory {group_lag(settings, f'{settings.namespace}.memory', ['facts'])}, "
          + ", ".join(f"{k} {v}" for k, v in projector_lag(settings).items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=20.0, help="turns per second")
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--namespace", default=f"soak{uuid.uuid4().hex[:6]}")
    args = ap.parse_args()
    settings = get_settings().model_copy(update={"namespace": args.namespace})
    ensure_topics(settings)
    pg.ensure_schema(settings)
    keys = KeyStore(settings)
    out = io.StringIO()
    sup = Supervisor(settings, names=("extractor", "memory", "projectors"), out=out)
    for name in sup.names:
        sup.start(name)
    stop = threading.Event()
    sent = [0]

    def publish():
        producer = EventProducer(settings, ADMIN)
        t0 = datetime.now(UTC)
        i = 0
        next_at = time.monotonic()
        while not stop.is_set():
            user = f"soak-u{i % args.users}"
            text = TEXTS[i % len(TEXTS)].format(x=WORDS[(i * 5) % len(WORDS)] + f" {i // 50}")
            env = make_envelope(TurnRecorded(session=f"s{(i // 20) % 5}", role="user", content=text), user=user,
                                time=t0 + timedelta(seconds=i))
            producer.send(settings.topic("turns"), user, encode(env, keys))
            i += 1
            sent[0] = i
            next_at += 1.0 / args.rate
            time.sleep(max(0.0, next_at - time.monotonic()))
        producer.close()

    pub = threading.Thread(target=publish, daemon=True)
    started = time.monotonic()
    pub.start()
    marks = [m for m in (1, 5, 10) if m < args.minutes] + [args.minutes]
    try:
        for mark in marks:
            while time.monotonic() - started < mark * 60:
                sup.check()
                time.sleep(0.5)
            report(settings, sup, started, sent[0])
    finally:
        stop.set()
        pub.join()
        sup.stop()
        if out.getvalue():
            print(out.getvalue())
        from bench import namespaces
        print(namespaces.kept(settings.namespace))


if __name__ == "__main__":
    main()
