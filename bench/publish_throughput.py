"""Publish throughput: turn events/s from the SDK, acks=all, idempotent, sealed.

Publishes N turns over U users with `record_turn_nowait` and times until every delivery is
acknowledged (flush). Prints each run and the median. Publishes into a fresh namespace
(`benchpub…`), dropped at the end unless --keep. Usage:
    .venv/bin/python -m bench.publish_throughput [--n 100000] [--users 1000] [--runs 3] [--keep]
"""
from __future__ import annotations

import argparse
import statistics
import time
import uuid

from bench import namespaces
from kernel.config import get_settings
from adapters.sdk import MemoryClient


def one_run(client: MemoryClient, n: int, users: list[str]) -> float:
    texts = [f"turn {i}: I like item number {i}" for i in range(n)]
    for u in users:  # data keys exist already: measure publishing, not first-key creation
        client.keys.key_for_write(u)
    t0 = time.perf_counter()
    for i, text in enumerate(texts):
        client.record_turn_nowait(users[i % len(users)], "bench", "user", text)
    client.flush(120)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    namespaces.add_arguments(ap, "benchpub")
    args = ap.parse_args()
    ns = args.namespace or namespaces.fresh("benchpub")
    settings = get_settings().model_copy(update={"namespace": ns})
    users = [f"bench-{uuid.uuid4().hex[:8]}" for _ in range(args.users)]
    with MemoryClient(settings) as client:
        one_run(client, min(args.n, 5000), users)  # warm-up
        rates = []
        for r in range(args.runs):
            rate = one_run(client, args.n, users)
            rates.append(rate)
            print(f"run {r + 1}: {rate:,.0f} turns/s")
    print(f"publish throughput (acks=all, idempotent, sealed): median {statistics.median(rates):,.0f} turns/s "
          f"over {args.runs} runs of {args.n:,} turns, {args.users} users, namespace {settings.namespace}")
    namespaces.finish(settings, args.keep)


if __name__ == "__main__":
    main()
