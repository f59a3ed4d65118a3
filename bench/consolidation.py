"""What one consolidation costs, and what it does to ingest freshness.

1. Pure function timing (no I/O): one consolidation of a user with 1,000 and with 10,000 memories
   — the store-triggered kind (merge/dedup of the 5 memories touched since the last one against
   the 50-memory window, then aging at most `consolidation_sweep_max` ledger entries) and a tick
   (aging every entry). Also with the ledger codec the processor adds: opening the sealed buckets
   (AES-GCM + orjson) and sealing the ones that changed. Medians of --runs runs.
   Then the archive (forgetting archives, the ledger keeps a compact record per archived memory,
   at most ARCHIVE_CAP a bucket): the stored ledger of a 10,000-memory user with an empty and with a
   full archive, after archiving 30,000 memories, and the cost of a revival.
2. Ingest freshness publish → preference visible, with consolidation every 5 stores vs off
   (MEMSTREAM_CONSOLIDATION_EVERY=0), as in bench/freshness.py: the whole pipeline in a fresh
   namespace, --users users each prefilled with --prefill memories, then "I like X<i>" turns at
   --rate turns/s (default 8: well below what 2 shared cores sustain, so the figure is latency, not backlog) round-robin over those users (so every user consolidates every 5 turns).

Each freshness run has a namespace of its own (`benchc…`), dropped after it unless --keep.

    .venv/bin/python -m bench.consolidation [--runs 30] [--rate 50] [--seconds 20] [--skip-freshness] [--keep]
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import orjson
from adapters.kafka_auth import ADMIN, kafka_config

DIM = 384
DAY = 86400.0


def synthetic_state(n: int, rng: np.random.Generator, now: float, aged: bool = True):
    """A user with n live memories: a full 50-item window (5 touched since the last consolidation,
    two pairs in the merge band) and a ledger entry per memory, created over the last 90 days.

    aged: the ledger was last aged a day ago (a tick), the steady state; otherwise never (the worst
    case: every memory's decay, summary or expiry is due at once)."""
    from domain.ledger import Entry, Ledger
    from domain.memory_rules import Recent, UserState
    ledger = Ledger()
    ids = [str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i)) for i in range(n)]
    for i, mid in enumerate(ids):
        created = now - float(rng.uniform(0, 90 if i < n - 50 else 5)) * DAY  # the window: recent memories
        imp = float(rng.uniform(0.2, 0.9))
        inc = [ids[j] for j in rng.integers(0, n, size=int(rng.integers(0, 4)))]
        ledger.put(mid, Entry(f"用户的第{i}条记忆，内容大约这么长", imp, created, created, imp,
                              created + float(rng.uniform(0, 10)) * DAY, inc=inc, facts=[mid]))
    vecs = rng.normal(size=(50, DIM)).astype(np.float32)
    vecs[1] = vecs[0] + 0.2 * rng.normal(size=DIM)      # two pairs close enough to merge
    vecs[3] = vecs[2] + 0.1 * rng.normal(size=DIM)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    window = ids[-50:]
    recent = [Recent(mid, vecs[k], ledger.get(mid).importance, "fact", None, [], None, None) for k, mid in enumerate(window)]
    state = UserState(recent=recent, last_memory_id=window[-1], clock=now, ledger=ledger)
    if aged:
        from kernel.config import Settings
        from domain.consolidation import age
        from domain.memory_rules import Rules
        age(state, Rules.from_settings(Settings()), now - DAY, full=True)
    state.dirty = [window[k] for k in (1, 3, 47, 48, 49)]
    return state


def copy_state(state):
    from domain.ledger import Ledger
    from domain.memory_rules import UserState
    ledger = Ledger.from_dict(state.ledger.to_dict())
    for b in range(64):
        ledger.bucket(b)  # parse every bucket before timing: the pure function's input
    return UserState.from_dict(state.to_dict(), ledger)


def time_pure(n: int, runs: int, rules, full: bool, aged: bool = True) -> tuple[float, int]:
    from domain.consolidation import consolidate
    rng = np.random.default_rng(n)
    now = datetime(2026, 6, 1, tzinfo=timezone.utc).timestamp()
    state = synthetic_state(n, rng, now, aged)
    times, events = [], 0
    for _ in range(runs):
        s = copy_state(state)
        t = time.perf_counter()
        events = len(consolidate(s, rules, now, full=full))
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), events


def time_with_codec(n: int, runs: int, rules) -> float:
    """A store-triggered consolidation plus the ledger I/O around it: open the sealed buckets,
    consolidate, seal the dirty ones (what the processor does per consolidation besides Kafka)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from domain.consolidation import consolidate
    from domain.ledger import BUCKETS, Ledger
    from domain.memory_rules import UserState
    rng = np.random.default_rng(n)
    now = datetime(2026, 6, 1, tzinfo=timezone.utc).timestamp()
    state = synthetic_state(n, rng, now)
    aead = AESGCM(AESGCM.generate_key(bit_length=256))
    nonce = os.urandom(12)
    sealed = {b: aead.encrypt(nonce, orjson.dumps(state.ledger.dump(b)), b"aad") for b in range(BUCKETS)}
    base = state.to_dict()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        ledger = Ledger(lambda b: orjson.loads(aead.decrypt(nonce, sealed[b], b"aad")))
        s = UserState.from_dict(base, ledger)
        consolidate(s, rules, now)
        for b in s.ledger.dirty:
            aead.encrypt(nonce, orjson.dumps(s.ledger.dump(b)), b"aad")
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def pure_report(runs: int) -> None:
    from kernel.config import Settings
    from domain.memory_rules import Rules
    rules = Rules.from_settings(Settings())
    print(f"one consolidation, pure function (median of {runs}; window {rules.recent_window}, "
          f"5 touched memories, sweep_max {rules.sweep_max}):")
    print("| memories | store-triggered | + ledger codec | tick (all memories) | first tick ever (worst case) |")
    print("|---|---|---|---|---|")
    for n in (1_000, 10_000):
        store, events = time_pure(n, runs, rules, full=False)
        codec = time_with_codec(n, runs, rules)
        tick, tick_events = time_pure(n, max(5, runs // 3), rules, full=True)
        worst, worst_events = time_pure(n, max(3, runs // 10), rules, full=True, aged=False)
        print(f"| {n:,} | {store:.2f} ms ({events} events) | {codec:.2f} ms | {tick:.1f} ms ({tick_events:,} events) "
              f"| {worst:.0f} ms ({worst_events:,} events) |")
    print("bounded: merge/dedup compares the touched memories (<= window) with the window: a 5 x 50 "
          "matrix product, at most one step per retired memory — the same at 1,000 and 10,000 "
          "memories; aging is O(1) per ledger entry and a store-triggered run ages at most "
          f"{rules.sweep_max} entries (round-robin), so the store-triggered figure stops growing once "
          "a user has more memories than that; a tick ages every entry (O(memories), once per period).")


def archive_report(runs: int) -> None:
    """The archive stays bounded however many memories are archived; consolidation and revival
    cost the same with a full archive."""
    from kernel.config import Settings
    from domain.consolidation import consolidate, recalled
    from domain.ledger import ARCHIVE_CAP, BUCKETS, Entry
    from domain.memory_rules import Rules
    rules = Rules.from_settings(Settings())
    now = datetime(2026, 6, 1, tzinfo=timezone.utc).timestamp()
    state = synthetic_state(10_000, np.random.default_rng(7), now)

    def sizes(st) -> tuple[int, int]:
        dumped = [len(orjson.dumps(st.ledger.dump(b))) for b in range(BUCKETS)]
        return sum(dumped), max(dumped)

    before = sizes(state)
    store_before, _ = time_pure(10_000, runs, rules, full=False)
    archived = [str(uuid.UUID(int=(1 << 127) | i)) for i in range(30_000)]
    for i, mid in enumerate(archived):
        state.ledger.put(mid, Entry("c" * 40, 0.2, now - 400 * DAY, now - 400 * DAY, 0.2, now - 400 * DAY,
                                    inc=archived[max(0, i - 2):i], kind="fact"))
        state.ledger.archive(mid, now - (30_000 - i))
    after = sizes(state)
    kept = state.ledger.archived_count()
    base = state.to_dict(), state.ledger.to_dict()
    times, store = [], []
    for _ in range(runs):
        from domain.ledger import Ledger
        from domain.memory_rules import UserState
        s = UserState.from_dict(base[0], Ledger.from_dict(base[1]))
        for b in range(BUCKETS):
            s.ledger.bucket(b)  # parsed before timing, as in time_pure
        t = time.perf_counter()
        revived = recalled(s, [archived[-1]], now)
        times.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        consolidate(s, rules, now)
        store.append((time.perf_counter() - t) * 1000)
    assert len(revived) == 1
    print(f"\nthe archive, 10,000 live memories (median of {runs}):")
    print("| archive | ledger stored (all buckets) | largest bucket | store-triggered consolidation |")
    print("|---|---|---|---|")
    print(f"| empty | {before[0] / 1024:,.0f} KiB | {before[1] / 1024:,.1f} KiB | {store_before:.2f} ms |")
    print(f"| full: 30,000 archived, {kept:,} kept ({ARCHIVE_CAP} a bucket) | {after[0] / 1024:,.0f} KiB "
          f"| {after[1] / 1024:,.1f} KiB | {statistics.median(store):.2f} ms |")
    print(f"a revival (recalled() on an archived id): {statistics.median(times) * 1000:.0f} µs; past the cap the oldest "
          "archived records go (still archived and recallable in the read models, no longer revivable).")


# -- freshness with and without consolidation ---------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def wait_quiet(settings, timeout: float = 900.0) -> float:
    """Wait until the pipeline has worked off everything published so far: every projector's stored
    position at the end of the topics it reads, and no topic of the namespace growing (faust's
    state changelogs included: a backlog of those slows the processor's commits), three checks in
    a row, 1 s apart. Returns seconds waited."""
    from confluent_kafka import Consumer, TopicPartition

    from projections.registry import PROJECTORS, build_projector
    consumer = Consumer({**kafka_config(settings, ADMIN), "group.id": "bench-probe"})
    projectors = [build_projector(name, settings) for name in PROJECTORS]
    for p in projectors:
        p.setup()
    t0 = time.monotonic()
    try:
        quiet = 0
        last = None
        while quiet < 3:
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"pipeline not quiet after {timeout:.0f}s")
            time.sleep(1.0)
            meta = consumer.list_topics(timeout=10).topics
            ends = {(t, part): consumer.get_watermark_offsets(TopicPartition(t, part), timeout=10)[1]
                    for t, md in meta.items() if t.startswith(settings.namespace + ".") for part in md.partitions}
            behind = any(p.positions().get(tp, 0) < end for p in projectors for tp, end in ends.items()
                         if end > 0 and tp[0] in {settings.topic(t) for t in p.topics})
            quiet = quiet + 1 if not behind and ends == last else 0
            last = ends
        return time.monotonic() - t0
    finally:
        consumer.close()
        for p in projectors:
            p.close()


def freshness(consolidation_every: int, args) -> dict:
    import psycopg

    from adapters.bus import EventProducer, ensure_topics
    from kernel.config import Settings
    from kernel.ids import uuid7
    from adapters.sdk import MemoryClient
    from memstream.app.workers import start_pipeline, stop_pipeline
    from projections.pg import ensure_schema
    from schemas.codec import encode, make_envelope
    from schemas.events import FactExtracted
    from bench import namespaces
    settings = Settings(namespace=namespaces.fresh("benchc"), consolidation_every=consolidation_every)
    ensure_topics(settings)
    ensure_schema(settings)
    client = MemoryClient(settings)
    procs = start_pipeline(settings, env={"MEMSTREAM_CONSOLIDATION_EVERY": str(consolidation_every)})
    users = [f"cu-{uuid.uuid4().hex[:8]}" for _ in range(args.users)]
    rng = np.random.default_rng(1)
    conn = psycopg.connect(settings.pg_dsn(), autocommit=True)
    sent: dict[tuple[str, str], float] = {}
    seen: dict[tuple[str, str], float] = {}
    stop = threading.Event()

    def watch() -> None:
        wconn = psycopg.connect(settings.pg_dsn(), autocommit=True)
        q = f'SELECT user_id, key FROM "{settings.namespace}".preferences WHERE user_id = ANY(%s) AND key = ANY(%s)'
        while not stop.is_set():
            pending = [k for k in list(sent) if k not in seen]
            if pending:
                now = time.perf_counter()
                for row in wconn.execute(q, ([u for u, _ in pending], [k for _, k in pending])).fetchall():
                    if row in sent:
                        seen.setdefault(row, now)
            time.sleep(0.002)

    try:
        # 1. prefill: each user gets --prefill memories (synthetic embeddings, spread over 60 days)
        producer = EventProducer(settings, ADMIN)
        start = datetime.now(timezone.utc) - timedelta(days=60)
        for u in users:
            client.keys.key_for_write(u)
            for i in range(args.prefill):
                at = start + timedelta(minutes=i * 60 * 24 * 59 / args.prefill)
                v = rng.normal(size=settings.embed_dim)
                fid = uuid7(at)
                data = FactExtracted(fact_id=fid, source_turn=uuid7(at), channel="llm", content=f"prefill {i} of {u}",
                                     importance=float(rng.uniform(0.3, 0.9)), embedding=(v / np.linalg.norm(v)).tolist(),
                                     embed_model="synthetic")
                producer.send(settings.topic("facts"), u, encode(make_envelope(data, user=u, time=at, id=fid), client.keys))
        producer.close()
        t0 = time.monotonic()
        total = args.users * args.prefill
        while conn.execute(f'SELECT count(*) FROM "{settings.namespace}".memory_items').fetchone()[0] < total:
            if time.monotonic() - t0 > 600:
                raise SystemExit("prefill not projected within 600 s")
            time.sleep(0.5)
        prefill_s = time.monotonic() - t0
        prefill_s += wait_quiet(settings)  # every decision and projection of the prefill done
        # 2. steady turns, round-robin over the users
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        interval = 1.0 / args.rate
        n = int(args.rate * (args.seconds + args.warmup))
        measured = []
        begin = time.perf_counter()
        for i in range(n):
            delay = begin + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            u = users[i % len(users)]
            key = f"likes:x{i}"
            t = time.perf_counter()
            client.record_turn_nowait(u, "s", "user", f"I like X{i}")
            sent[(u, key)] = t
            if i >= args.rate * args.warmup:
                measured.append((u, key))
        client.flush()
        deadline = time.monotonic() + 60
        while any(k not in seen for k in measured) and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        lat = [(seen[k] - sent[k]) * 1000 for k in measured if k in seen]
        consolidations = conn.execute(
            f"SELECT count(*) FROM \"{settings.namespace}\".audit_events WHERE type IN "
            "('memory.decayed', 'memory.merged', 'memory.deduped', 'memory.expired', 'memory.summarized')").fetchone()[0]
        return {"p50": percentile(lat, 0.5), "p95": percentile(lat, 0.95), "p99": percentile(lat, 0.99),
                "n": len(lat), "missing": len(measured) - len(lat), "prefill_s": prefill_s,
                "consolidation_events": consolidations}
    finally:
        stop.set()
        stop_pipeline(procs)
        client.close()
        conn.close()
        namespaces.finish(settings, args.keep)


def freshness_report(args) -> None:
    print(f"\ningest freshness publish→preference visible, {args.rate:.0f} turns/s for {args.seconds:.0f}s over "
          f"{args.users} users with {args.prefill} memories each, {args.repeats} run(s) per mode, alternating:")
    results: dict[str, list[dict]] = {"consolidation off": [], "consolidation every 5 stores": []}
    for _ in range(args.repeats):
        for label, every in (("consolidation off", 0), ("consolidation every 5 stores", 5)):
            r = freshness(every, args)
            results[label].append(r)
            print(f"  {label:<30} p50 {r['p50']:.0f} ms, p95 {r['p95']:.0f} ms, p99 {r['p99']:.0f} ms "
                  f"({r['n']} turns, {r['missing']} missing; consolidation events {r['consolidation_events']}; "
                  f"prefill worked off in {r['prefill_s']:.0f}s)", flush=True)
    med = {label: {q: statistics.median(r[q] for r in rs) for q in ("p50", "p95")} for label, rs in results.items()}
    off, on = med["consolidation off"], med["consolidation every 5 stores"]
    print(f"  median p50 off {off['p50']:.0f} ms / on {on['p50']:.0f} ms = {on['p50'] / off['p50']:.2f}x; "
          f"p95 off {off['p95']:.0f} ms / on {on['p95']:.0f} ms = {on['p95'] / off['p95']:.2f}x (target: within 1.20x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rate", type=float, default=8.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--prefill", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2, help="freshness runs per mode (alternating)")
    ap.add_argument("--skip-freshness", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep each freshness run's namespace (default: drop it)")
    args = ap.parse_args()
    pure_report(args.runs)
    archive_report(max(5, args.runs // 3))
    if not args.skip_freshness:
        freshness_report(args)


if __name__ == "__main__":
    main()
