"""End-to-end freshness: publish → preference visible in Postgres, at a steady rate.

Starts the whole pipeline (extractor, memory processor, projectors) in a fresh namespace,
publishes one turn every 1/rate s ("I live in C<i>" for a new user each time), and polls the
key-value read model every 5 ms to see when each value appears. Prints p50/p95/p99, and where
the time goes: each stage's CPU time per fact turn (the three workers, Kafka, Postgres, Neo4j,
and this benchmark's own publisher and watcher), read from /proc before and after the run, so
the sum can be set against what the machine's cores offer per turn at this rate. With
`--idle S`, first what the same pipeline costs with nothing flowing, S seconds after it answered
(each stage's share of a core): a pipeline that polls burns the cores its traffic will need. The
namespace (`bench…`) is dropped at the end unless --keep.
    .venv/bin/python -m bench.freshness [--rate 100] [--seconds 30] [--idle 20] [--keep]
"""
from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
import psycopg


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def cpu_by_stage(procs: dict) -> dict[str, float]:
    """CPU seconds so far of each pipeline worker, each stack service and this process."""
    from memstream.stack import services
    from memstream.stack.process import cpu_seconds
    out = {name: cpu_seconds(p.pid) for name, p in procs.items()}
    for name, info in services.status(quiet=True).items():
        if info.get("pid"):   # Postgres' share includes the backend that serves this watcher
            out[name + (" (and the watcher's backend)" if name == "postgres" else "")] = cpu_seconds(info["pid"])
    t = os.times()
    out["bench (publisher, watcher)"] = t.user + t.system
    return out


def print_cpu(before: dict, after: dict, turns: int, wall: float, rate: float) -> None:
    """Where the time goes: CPU ms per fact turn that reached the read model, by stage."""
    if turns <= 0:
        return
    spent = {k: after[k] - before.get(k, 0.0) for k in after}
    pipeline = sum(v for k, v in spent.items() if not k.startswith("bench"))
    cores = os.cpu_count() or 1
    print(f"CPU per fact turn ({turns} turns visible in {wall:.1f} s; {cores} cores offer "
          f"{cores * 1000 / rate:.1f} ms per turn at {rate:.0f}/s):")
    for name, sec in sorted(spent.items(), key=lambda kv: -kv[1]):
        share = f"{sec / pipeline:5.1%} of the pipeline" if not name.startswith("bench") else "(not the pipeline)"
        print(f"  {name:<40} {sec * 1000 / turns:6.2f} ms  {share}")
    print(f"  {'pipeline total':<40} {pipeline * 1000 / turns:6.2f} ms  = {pipeline * 1000 / turns * rate / 1000:.2f} "
          f"cores at {rate:.0f} turns/s; busy {pipeline / wall / cores:.0%} of the machine over the run")


def print_idle(before: dict, after: dict, seconds: float) -> None:
    """Each stage's CPU over `seconds` with no traffic, as a share of one core."""
    spent = {k: after[k] - before.get(k, 0.0) for k in after}
    pipeline = sum(v for k, v in spent.items() if not k.startswith("bench"))
    print(f"idle for {seconds:.0f} s (the pipeline running, nothing published), share of one core:")
    for name, sec in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40} {sec / seconds:6.1%}")
    print(f"  {'pipeline total':<40} {pipeline / seconds:6.1%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--idle", type=float, default=0.0,
                    help="first measure the pipeline's CPU for this many seconds with nothing published")
    ap.add_argument("--fact-share", type=float, default=1.0,
                    help="share of turns that state a new fact; the rest are assistant replies (timed: fact turns)")
    from bench import namespaces
    namespaces.add_arguments(ap, "bench")
    args = ap.parse_args()
    # The workers it starts read their namespace from the environment.
    os.environ["MEMSTREAM_NAMESPACE"] = args.namespace or namespaces.fresh("bench")
    from kernel.config import get_settings
    from adapters.sdk import MemoryClient
    from memstream.app.workers import start_pipeline, stop_pipeline
    from projections.pg import ensure_schema
    settings = get_settings()
    ensure_schema(settings)
    client = MemoryClient(settings)
    procs = start_pipeline(settings)
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        conn = psycopg.connect(settings.pg_dsn(), autocommit=True)
        q = f'SELECT user_id FROM "{settings.namespace}".preferences WHERE user_id = ANY(%s)'
        while not stop.is_set():
            pending = [u for u in list(sent) if u not in seen]
            if pending:
                now = time.perf_counter()
                for (u,) in conn.execute(q, (pending,)).fetchall():
                    seen[u] = now
            # 5 ms: fine enough beside a 250 ms target; at 2 ms this watcher and its Postgres
            # backend took ~30% of a core from the pipeline it measures
            time.sleep(0.005)

    try:
        # Warm-up: wait until the pipeline answers at all (faust start-up, group joins).
        probe = "probe-" + uuid.uuid4().hex[:6]
        client.record_turn(probe, "s", "user", "I live in Probe")
        sent[probe] = time.perf_counter()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t0 = time.monotonic()
        while probe not in seen:
            if time.monotonic() - t0 > 120:
                raise SystemExit("pipeline did not answer within 120 s")
            time.sleep(0.05)
        print(f"pipeline ready after {time.monotonic() - t0:.1f}s")
        if args.idle > 0:
            time.sleep(5.0)   # the probe's own work done
            idle_before = cpu_by_stage(procs)
            time.sleep(args.idle)
            print_idle(idle_before, cpu_by_stage(procs), args.idle)
        cpu_before, seen_before = cpu_by_stage(procs), len(seen)
        interval = 1.0 / args.rate
        total = int(args.rate * (args.seconds + args.warmup))
        start = time.perf_counter()
        measured: list[str] = []
        for i in range(total):
            target = start + i * interval
            delay = target - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if (i * args.fact_share) % 1 + args.fact_share < 1:  # evenly spread non-fact turns
                client.record_turn_nowait(f"chat-{i % 50}", "s", "assistant", f"Sure, here is answer {i}.")
                continue
            user = f"fresh-{uuid.uuid4().hex[:10]}"
            client.keys.key_for_write(user)  # key creation is a one-off per user, not per turn
            t = time.perf_counter()
            client.record_turn_nowait(user, "s", "user", f"I live in C{i}")
            sent[user] = t
            if i >= args.rate * args.warmup:
                measured.append(user)
        client.flush()
        deadline = time.monotonic() + 30
        while any(u not in seen for u in measured) and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        cpu_after, wall = cpu_by_stage(procs), time.perf_counter() - start
        lat = [(seen[u] - sent[u]) * 1000 for u in measured if u in seen]
        missing = len(measured) - len(lat)
        print(f"freshness publish→preference visible, {args.rate:.0f} turns/s ({args.fact_share:.0%} with a new fact) "
              f"for {args.seconds:.0f}s "
              f"({len(lat)} turns, {missing} missing): p50 {percentile(lat, 0.5):.0f} ms, "
              f"p95 {percentile(lat, 0.95):.0f} ms, p99 {percentile(lat, 0.99):.0f} ms, max {max(lat):.0f} ms")
        print_cpu(cpu_before, cpu_after, len(seen) - seen_before, wall, args.rate)
    finally:
        stop.set()
        stop_pipeline(procs)
        client.close()
        namespaces.finish(settings, args.keep)


if __name__ == "__main__":
    main()
