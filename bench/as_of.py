"""As-of reads for a user with a long history: indexed (query/as_of.py) against the replay.

    .venv/bin/python -m bench.as_of [--events 10000] [--reads 200] [--replays 3] [--namespace benchasof]

One user's memory topic of N decision events (bench/synthetic.py: the real decide() over synthetic
facts: creates, reinforcements, links, supersessions, preference versions), their event times
spread over the past week, sealed and signed like the pipeline's, projected by a rebuild of
pgvector-items, kv-preferences and the audit index. Then, at random times within the history:
- profile and recall (k=10) as of that time through the versions, p50/p95; recall both with the
  query embedded (what the API does) and with the embedding given (the SQL alone);
- recall of the present for the same user (SQL alone), for scale;
- the same profile through the replay (replay/timetravel.py, what every as-of read did before),
  a few times (it costs seconds each), and a check that both answered the same.
Issue 26's figure: as-of recall and profile p95 <= 50 ms at 10,000 memory events.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone

import orjson

USER = "asof-0"


def generate(settings, keys, n: int, end: datetime) -> int:
    """The user's n decision events, a minute apart up to `end`, in the bench namespace's memory topic
    (kept and reused when it already holds them)."""
    from bench.namespaces import records_in
    from bench.synthetic import iter_decided_events
    from adapters.bus import EventProducer, ensure_topics
    from adapters.kafka_auth import ADMIN
    from schemas.codec import encode
    ensure_topics(settings)
    have = records_in(settings, settings.topic("memory"))
    if have >= n:
        return have
    if have:
        raise SystemExit(f"{settings.topic('memory')} holds {have} events, fewer than {n}: use another --namespace")
    producer = EventProducer(settings, ADMIN, **{"linger.ms": 50})
    start = end - timedelta(minutes=n)
    for i, env in enumerate(iter_decided_events(settings.embed_dim, seed=26, users=1, prefix="asof-")):
        if i >= n:
            break
        producer.send(settings.topic("memory"), env.user, encode(dataclasses.replace(env, time=start + timedelta(minutes=i)), keys))
    producer.flush()
    return n


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))], 1)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--reads", type=int, default=200, help="as-of reads of each kind through the versions")
    ap.add_argument("--replays", type=int, default=3, help="as-of profiles through the replay")
    ap.add_argument("--namespace", default=None, help="default: benchasof<events>")
    args = ap.parse_args(argv)
    os.environ["MEMSTREAM_NAMESPACE"] = args.namespace or f"benchasof{args.events}"

    from kernel.config import get_settings
    from adapters.privacy.keystore import KeyStore
    from query import as_of as past
    from query.recall import RecallRequest, recall as recall_now
    from query.store import ReadModels
    from replay.rebuild import rebuild
    from replay.timetravel import profile_as_of
    get_settings.cache_clear()
    settings = get_settings()
    keys = KeyStore(settings)
    end = datetime(2026, 12, 1, tzinfo=timezone.utc)     # fixed: a rerun reuses the same log
    total = generate(settings, keys, args.events, end)
    began = end - timedelta(minutes=total)
    t = time.monotonic()
    rebuild(settings, ["pgvector-items", "kv-preferences", "audit-index"], keys=keys, fresh=True, progress=False)
    print(f"log: {total:,} events of one user; projected in {time.monotonic() - t:.0f}s", file=sys.stderr)

    models = ReadModels(settings, pool_size=2)
    rng = random.Random(26)
    queries = ["where does the user live?", "what happened last week?", "fact 500", "favourite food", "work"]
    with models.pool.connection() as conn:
        memories, versions = conn.execute(models.q(
            "SELECT (SELECT count(*) FROM {s}.memory_items WHERE user_id = %s), "
            "(SELECT count(*) FROM {s}.memory_item_versions WHERE user_id = %s)"), (USER, USER)).fetchone()
    assert past.history_complete(models)
    times = [began + (end - began) * rng.random() for _ in range(args.reads)]
    profile_ms, recall_ms, recall_sql_ms = [], [], []
    vectors = {q: models.embed_query(q) for q in queries}
    past.profile(models, USER, times[0])        # warm the pool and the plan cache's catalog lookups
    for at in times:
        q = rng.choice(queries)
        t = time.perf_counter()
        past.profile(models, USER, at)
        profile_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        past.recall(models, RecallRequest(USER, q, k=10), at)
        recall_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        past.recall(models, RecallRequest(USER, q, k=10, query_embedding=vectors[q]), at)
        recall_sql_ms.append((time.perf_counter() - t) * 1000)
    live_ms = []                                # the same recall of the present, for scale
    for _ in times:
        q = rng.choice(queries)
        t = time.perf_counter()
        recall_now(models, RecallRequest(USER, q, k=10, query_embedding=vectors[q]))
        live_ms.append((time.perf_counter() - t) * 1000)
    replay_ms, same = [], []
    for at in times[: args.replays]:
        t = time.perf_counter()
        replayed = profile_as_of(settings, USER, at, keys=keys)
        replay_ms.append((time.perf_counter() - t) * 1000)
        same.append(replayed == past.profile(models, USER, at))
    models.close()
    keys.close()
    out = {"namespace": settings.namespace, "events": total, "memories": memories, "versions": versions,
           "indexed": {"profile_ms": {"p50": pct(profile_ms, 50), "p95": pct(profile_ms, 95)},
                       "recall_ms": {"p50": pct(recall_ms, 50), "p95": pct(recall_ms, 95)},
                       "recall_sql_ms": {"p50": pct(recall_sql_ms, 50), "p95": pct(recall_sql_ms, 95)}},
           "present": {"recall_sql_ms": {"p50": pct(live_ms, 50), "p95": pct(live_ms, 95)}},
           "replay": {"profile_ms_median": round(statistics.median(replay_ms), 1), "runs": len(replay_ms),
                      "same_answer": all(same)}}
    print(f"as of, {total:,} events ({memories:,} memories, {versions:,} versions): "
          f"profile p50/p95 {out['indexed']['profile_ms']['p50']}/{out['indexed']['profile_ms']['p95']} ms, "
          f"recall {out['indexed']['recall_ms']['p50']}/{out['indexed']['recall_ms']['p95']} ms "
          f"(SQL alone {out['indexed']['recall_sql_ms']['p50']}/{out['indexed']['recall_sql_ms']['p95']}; the present's "
          f"{out['present']['recall_sql_ms']['p50']}/{out['present']['recall_sql_ms']['p95']}); "
          f"replay profile median {out['replay']['profile_ms_median']} ms over {len(replay_ms)}, "
          f"same answer: {out['replay']['same_answer']}", file=sys.stderr)
    from bench import namespaces
    print(namespaces.kept(settings.namespace), file=sys.stderr)
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    return out


if __name__ == "__main__":
    main()
