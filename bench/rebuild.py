"""Rebuild throughput: every projection from a log of N memory events, together and one at a time.

    .venv/bin/python -m bench.rebuild [--events 1000000] [--namespace benchrebuild] [--only NAME ...]

The log is synthetic but realistic: bench/synthetic.py runs the real decide() over synthetic facts
(creates with 384-d embeddings, reinforcements, FOLLOWS/SIMILAR_TO links, supersessions,
preference versions), sealed per user like real events, in the bench namespace's memory topic.
It is generated once and reused by later runs (the topic is kept).

Measured, each from a fresh shadow (`replay rebuild --fresh`):
- all projections together: the log read and decoded once, applied to all six in parallel;
- the five Postgres projections together (the same, without Neo4j);
- each projection alone.
Reported per run: events/s over the load (records read / load seconds), the deferred index build,
the swap, and the wall time. After every swap the rebuilt projections' checksums must equal the
ones they replaced (built by the previous run): the optimisations change nothing stored.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import orjson
from adapters.kafka_auth import ADMIN


def generate(settings, keys, n: int) -> int:
    """Append synthetic events until the memory topic holds n records; returns how many it holds."""
    from bench.namespaces import records_in
    from bench.synthetic import iter_decided_events
    from adapters.bus import EventProducer, ensure_topics
    from schemas.codec import encode
    ensure_topics(settings)
    topic = settings.topic("memory")
    have = records_in(settings, topic)
    if have >= n:
        return have
    if have:
        raise SystemExit(f"{topic} holds {have} records, fewer than {n}: use another --namespace")
    producer = EventProducer(settings, ADMIN, **{"linger.ms": 50, "batch.size": 1_000_000})
    started = time.monotonic()
    for i, env in enumerate(iter_decided_events(settings.embed_dim, seed=11, users=1000, prefix="bench-")):
        if i >= n:
            break
        producer.send(topic, env.user, encode(env, keys))
        if i % 50_000 == 49_999:
            print(f"  generated {i + 1:,} events ({(i + 1) / (time.monotonic() - started):,.0f}/s)", file=sys.stderr)
    producer.flush(300)
    producer.close()
    return n


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--namespace", default=None, help="default: benchrebuild<events>")
    ap.add_argument("--only", nargs="*", help="measure these runs only: all and/or projection names")
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=1, help="processes of the bulk load, sharded by partition")
    args = ap.parse_args(argv)
    os.environ["MEMSTREAM_NAMESPACE"] = args.namespace or f"benchrebuild{args.events}"
    os.environ.setdefault("MEMSTREAM_PARTITIONS", "6")

    from kernel.config import get_settings
    from adapters.privacy.keystore import KeyStore
    from projections import registry
    from projections.registry import PROJECTORS
    from replay.rebuild import rebuild
    get_settings.cache_clear()
    settings = get_settings()
    keys = KeyStore(settings)
    t = time.monotonic()
    total = generate(settings, keys, args.events)
    print(f"log: {total:,} events in {settings.topic('memory')} (ready in {time.monotonic() - t:.0f}s)", file=sys.stderr)

    def checksums(names):
        return registry.checksums(settings, names)

    postgres = [n for n in PROJECTORS if n != "neo4j-graph"]
    runs = args.only or ["all", "postgres", *PROJECTORS]
    results: dict = {"events": total, "namespace": settings.namespace, "cores": os.cpu_count(), "workers": args.workers,
                     "runs": {}}
    for run in runs:
        names = list(PROJECTORS) if run == "all" else postgres if run == "postgres" else [run]
        before = checksums(names)    # what the previous rebuild swapped in (empty the first time)
        began = time.monotonic()
        rep = rebuild(settings, names, keys=keys, fresh=True, progress=True, batch_size=args.batch, workers=args.workers)
        wall = time.monotonic() - began
        sums = checksums(names)
        # compared where there was something to compare: a projection never built before is empty
        built = [n for n in names if not (":0:" in before[n] or "nodes:0 " in before[n])]
        same = all(sums[n] == before[n] for n in built) if built else None
        results["runs"][run] = {"events_per_s": round(rep.load.rate), "load_s": round(rep.load.seconds, 1),
                                "index_s": round(rep.index_seconds, 1), "swap_s": round(rep.swap_seconds, 2),
                                "wall_s": round(wall, 1), "checksums_equal_previous": same}
        print(f"{run:16s} {rep.load.rate:10,.0f} events/s  load {rep.load.seconds:7.1f}s  indexes {rep.index_seconds:6.1f}s  "
              f"swap {rep.swap_seconds:5.2f}s  wall {wall:7.1f}s  checksums {'=' if same else ('≠' if same is False else '(first)')}",
              file=sys.stderr)
        if same is False:
            raise SystemExit(f"{run}: a rebuilt projection differs from the one it replaced")
    keys.close()
    from bench import namespaces
    print(namespaces.kept(settings.namespace) + " (the next run with these --events reuses its log)", file=sys.stderr)
    print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())
    return results


if __name__ == "__main__":
    main()
