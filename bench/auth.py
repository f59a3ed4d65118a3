"""What the API key check costs recall: the same route with a cached key and without the check, side by side.

1. load a bench namespace: U users x M memories (random unit vectors, FOLLOWS links), projected
   by the real pgvector-items and neo4j-graph projectors;
2. two instances of the real app in this process: one as served (API key required, verified and
   then cached for MEMSTREAM_API_KEY_CACHE_S), one with the key dependency overridden by a fixed
   principal (the same handler, query path and response, without the check);
3. POST /v1/recall alternately on each (interleaved, so drift hits both alike), medians over many calls;
   plus the check alone: a cached verification, and an uncached one (a database round trip).
The namespace (`benchauth…`) is dropped at the end unless --keep.
    .venv/bin/python -m bench.auth [--users 20] [--memories 50] [--calls 400] [--keep]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import numpy as np
from adapters.kafka_auth import ADMIN

WORDS = "coffee tea hiking chess jazz Paris Berlin cello bicycle beagle flight hotel sushi yoga piano garden".split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--memories", type=int, default=50, help="per user")
    ap.add_argument("--calls", type=int, default=400, help="recall calls per variant")
    from bench import namespaces
    namespaces.add_arguments(ap, "benchauth")
    args = ap.parse_args()
    os.environ["MEMSTREAM_NAMESPACE"] = ns = args.namespace or namespaces.fresh("benchauth")
    from fastapi.testclient import TestClient

    from memstream.app.api import create_app
    from adapters.bus import EventProducer, ensure_topics
    from kernel.config import get_settings
    from kernel.ids import derived_id, uuid7
    from adapters.privacy.apikeys import ApiKeys
    from adapters.privacy.keystore import KeyStore
    from adapters.privacy.tenants import SCOPES, Principal
    from projections.pg import ensure_schema
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from schemas.codec import encode, make_envelope
    from schemas.events import MemoryCreated, MemoryLinked

    s = get_settings()
    ensure_topics(s)
    ensure_schema(s)
    keys = KeyStore(s)
    rng = np.random.default_rng(1)
    users = [f"u{i:03d}" for i in range(args.users)]
    producer = EventProducer(s, ADMIN)
    for user in users:
        last = None
        for i in range(args.memories):
            vec = rng.normal(size=s.embed_dim).astype(np.float32)
            mid = uuid7()
            data = MemoryCreated(memory_id=mid, fact_id=mid, content=f"User note {i}: {' '.join(random.Random(i).sample(WORDS, 3))}",
                                 category="fact", importance=float(rng.uniform(0.1, 1.0)),
                                 embedding=(vec / np.linalg.norm(vec)).tolist())
            producer.send(s.topic("memory"), user, encode(make_envelope(data, user=user, id=mid), keys))
            if last:
                link = MemoryLinked(from_id=last, to_id=mid, kind="FOLLOWS")
                producer.send(s.topic("memory"), user, encode(make_envelope(link, user=user, id=derived_id(mid, "f")), keys))
            last = mid
    producer.flush(120)
    for name in ("pgvector-items", "neo4j-graph"):
        ProjectorRunner(build_projector(name, s), s, keys).run(idle_exit_after=2.0)
    store = ApiKeys(s, role="owner")
    _, token = store.create("default", SCOPES, name="bench")

    served, open_ = create_app(s), create_app(s)
    fixed = Principal("bench", "default", frozenset(SCOPES))

    async def no_check() -> Principal:   # async, like the real check: a sync override would run in a thread
        return fixed
    open_.dependency_overrides[open_.state.auth_dependencies["memory:read"]] = no_check
    queries = [" ".join(random.Random(q).sample(WORDS, 2)) for q in range(max(30, args.calls))]   # the warm-up takes 30
    with TestClient(served, headers={"Authorization": f"Bearer {token}"}) as a, TestClient(open_) as b:
        def call(client, i):
            body = {"user": users[i % len(users)], "query": queries[i], "k": 10}
            t = time.perf_counter()
            r = client.post("/v1/recall", json=body)
            took = (time.perf_counter() - t) * 1000
            assert r.status_code == 200 and r.json(), r.text
            return took
        for i in range(30):                      # warm: embedder, pools, the key cache
            call(a, i), call(b, i)
        with_auth, without = [], []
        for i in range(args.calls):
            first, second = (a, b) if i % 2 else (b, a)      # same query, both orders alike
            t1, t2 = call(first, i), call(second, i)
            (with_auth if first is a else without).append(t1)
            (with_auth if second is a else without).append(t2)
        paired = [x - y for x, y in zip(with_auth, without)]
        # the check alone
        cached, uncached = [], []
        twin = ApiKeys(s)
        twin.verify(token)
        for _ in range(2000):
            t = time.perf_counter()
            twin.cached(token)
            cached.append((time.perf_counter() - t) * 1e6)
        cold = ApiKeys(s, cache_s=0)
        for _ in range(200):
            t = time.perf_counter()
            cold.verify(token)
            uncached.append((time.perf_counter() - t) * 1000)
    p50a, p50b = statistics.median(with_auth), statistics.median(without)
    print(f"recall over HTTP (in-process app), {len(users)} users x {args.memories} memories, {args.calls} calls each, "
          f"interleaved (namespace {ns}):")
    print(f"  with the API key check (cached key): p50 {p50a:.2f} ms")
    print(f"  without the check (overridden):      p50 {p50b:.2f} ms")
    print(f"  difference of the medians:           {p50a - p50b:+.3f} ms "
          f"(median of the paired differences, same query: {statistics.median(paired):+.3f} ms)")
    print(f"  the check alone: cached {statistics.median(cached):.1f} us p50; uncached (database) "
          f"{statistics.median(uncached):.2f} ms p50, once per key per MEMSTREAM_API_KEY_CACHE_S ({s.api_key_cache_s:g} s)")
    for k in (store, twin, cold):
        k.close()
    keys.close()
    namespaces.finish(s, args.keep)


if __name__ == "__main__":
    main()
