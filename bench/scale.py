"""Scale: throughput with 1 vs 2 workers per stage, and the memory worker's RSS and recovery time
by number of users.

    .venv/bin/python -m bench.scale [--turns 2000] [--users 1000,10000] [--skip-throughput] [--keep]

1. **Throughput.** For N = 1 and 2: a fresh namespace gets a backlog of `--turns` turns (each
   states a fact, 200 users) before any worker runs; then `memstream run --instances N`'s
   workers (no ticker) start, and the run ends when every projector has projected everything the
   memory processor decided. Printed: turns/s from the first decision to the end (start-up is
   excluded: it is paid once), and the wall time including start-up.
2. **State per user count.** For each U in `--users`: one fact per user, published straight
   into the facts topic as `fact.extracted` (a random unit embedding, sealed with the user's key
   as the extractor would), so only the memory worker and the projectors run: the extractor's
   embedder (~40 facts/s on this machine) would make 100,000 users an hour of ingest, and the
   memory worker's state does not depend on who extracted the facts. Settled; then its RSS (its process tree) and its state tables' size, a kill -9 of it,
   and the time until a fact of a new user published right after the kill is decided and
   projected (the
   supervisor's restart, faust's table recovery from the changelog, the first decision).
   `MEMSTREAM_STATE_STORE=rocksdb` measures the state kept on disk (its "state" is then RocksDB's
   estimate of its live data and write buffers, streams/app.py).

Each run uses its own namespace (`scale…`), dropped when the run ends unless --keep
(`memstream namespace drop NS --yes` drops a kept one).
"""
from __future__ import annotations

import argparse
import io
import os
import signal
import time
import uuid
from datetime import UTC, datetime, timedelta

from bench import namespaces
from bench.soak import end_offset, group_lag, projector_lag
from memstream.app.workers import Supervisor
from adapters.bus import EventProducer, ensure_topics
from kernel.config import get_settings
from adapters.kafka_auth import ADMIN
from adapters.privacy.keystore import KeyStore
from adapters.resilience import read_health
from memstream.stack.process import memory_mib
from projections import pg
from projections.queries import memories
from schemas.codec import encode, make_envelope
from schemas.events import FactExtracted, TurnRecorded

STAGES = ("extractor", "memory", "projectors")
TEXTS = ["I like {x}", "I live in {x}", "My favourite food is {x}", "我喜欢{x}", "I work at {x}"]
WORDS = ["hiking", "Lisbon", "ramen", "喝茶", "Acme", "chess", "jazz", "Porto", "咖啡", "sailing", "Kyoto", "tennis"]


def fresh(tag: str):
    s = get_settings().model_copy(update={"namespace": f"scale{tag}{uuid.uuid4().hex[:6]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    return s


def publish(settings, keys, n: int, users: int, start: int = 0, user: str | None = None) -> list:
    """n turns, each stating a fact, round-robin over `users` users (or all `user`'s)."""
    producer = EventProducer(settings, ADMIN)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    sent = []
    for i in range(start, start + n):
        who = user or f"u{i % users}"
        text = TEXTS[i % len(TEXTS)].format(x=WORDS[(i * 7) % len(WORDS)] + f" {i}")
        env = make_envelope(TurnRecorded(session=f"s{i % 7}", role="user", content=text), user=who,
                            time=t0 + timedelta(seconds=i))
        producer.send(settings.topic("turns"), who, encode(env, keys))
        sent.append(env)
    producer.flush(timeout=300)
    producer.close()
    return sent


def publish_facts(settings, keys, n: int, users: int, start: int = 0, user: str | None = None) -> None:
    """n facts, one per user round-robin over `users` users (or all `user`'s), into the facts topic."""
    import numpy as np
    from kernel.ids import uuid7
    rng = np.random.default_rng(start)
    producer = EventProducer(settings, ADMIN)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    for i in range(start, start + n):
        who = user or f"u{i % users}"
        at = t0 + timedelta(seconds=i)
        vec = rng.standard_normal(settings.embed_dim).astype(np.float32)
        word = WORDS[(i * 7) % len(WORDS)] + f" {i}"
        data = FactExtracted(fact_id=uuid7(at), source_turn=uuid7(at), session=f"s{i % 7}", channel="rule",
                             rule="bench", key="likes", value=word, content=f"User likes {word}", category="preference",
                             importance=0.6, embedding=(vec / np.linalg.norm(vec)).tolist(), embed_model=settings.embed_model)
        producer.send(settings.topic("facts"), who, encode(make_envelope(data, user=who, time=at), keys))
    producer.flush(timeout=300)
    producer.close()


def settled(settings, extractor: bool = True) -> bool:
    ns = settings.namespace
    return ((not extractor or group_lag(settings, f"{ns}.extractor", ["turns"]) == 0)
            and group_lag(settings, f"{ns}.memory", ["facts"]) == 0
            and end_offset(settings, "memory") > 0
            and not any(projector_lag(settings).values()))


def run_until(sup: Supervisor, done, timeout: float, every: float = 1.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sup.check()
        if done():
            return time.monotonic()
        time.sleep(every)
    raise TimeoutError("the pipeline did not settle in time")


def throughput(turns: int, instances: int, keep: bool = False) -> dict:
    s = fresh(f"t{instances}")
    keys = KeyStore(s)
    publish(s, keys, turns, users=200)
    sup = Supervisor(s, names=STAGES, instances=instances, out=io.StringIO())
    t0 = time.monotonic()
    for name in sup.names:
        sup.start(name)
    try:
        first = run_until(sup, lambda: end_offset(s, "memory") > 0, timeout=300, every=0.2)
        end = run_until(sup, lambda: settled(s), timeout=3600)
    finally:
        sup.stop()
        keys.close()
        namespaces.finish(s, keep)
    return {"instances": instances, "turns": turns, "rate": turns / (end - first), "wall_s": end - t0,
            "startup_s": first - t0}




def state_and_recovery(users: int, keep: bool = False) -> dict:
    s = fresh(f"u{users}")
    keys = KeyStore(s)
    t0 = time.monotonic()
    publish_facts(s, keys, users, users=users)
    publish_s = time.monotonic() - t0
    sup = Supervisor(s, names=("memory", "projectors"), out=io.StringIO())
    for name in sup.names:
        sup.start(name)
    try:
        t0 = time.monotonic()
        run_until(sup, lambda: settled(s, extractor=False), timeout=7200, every=2.0)
        ingest_s = time.monotonic() - t0
        time.sleep(16)   # the state tables' size is reported every 15 s
        rss = memory_mib(sup.procs["memory"].pid).get("rss_mib")
        tables = read_health(s).get("memory", {}).get("components", {}).get("memory", {}).get("tables") or {}
        # kill -9, and a new user's fact right behind it
        killed = time.monotonic()
        os.kill(sup.procs["memory"].pid, signal.SIGKILL)
        publish_facts(s, keys, 1, users=1, start=users, user="after-kill")
        # decided and projected (the projection adds a few ms): the read model has the memory
        recovered = run_until(sup, lambda: bool(memories(s, "after-kill")), timeout=1800, every=0.25)
    finally:
        sup.stop()
        keys.close()
        namespaces.finish(s, keep)
    return {"users": users, "publish_s": publish_s, "ingest_s": ingest_s, "rss_mib": rss,
            "state_mib": sum(t["bytes"] for t in tables.values()) / 2**20 if tables else None,
            "recovery_s": recovered - killed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=2000, help="throughput: backlog size")
    ap.add_argument("--users", default="1000,10000", help="state: comma-separated user counts")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-state", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep each run's namespace (default: drop it)")
    args = ap.parse_args()
    # SIGTERM (pkill, a CI timeout) unwinds like Ctrl-C, so each run's `finally` stops its workers
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"machine: {os.cpu_count()} cores")
    if not args.skip_throughput:
        rows = [throughput(args.turns, n, args.keep) for n in (1, 2)]
        print("\nthroughput, a backlog of turns that each state a fact (200 users):")
        print(f"  {'workers/stage':>13}  {'turns':>6}  {'turns/s':>8}  {'start-up s':>10}  {'wall s':>7}")
        for r in rows:
            print(f"  {r['instances']:>13}  {r['turns']:>6}  {r['rate']:>8.1f}  {r['startup_s']:>10.1f}  {r['wall_s']:>7.1f}")
        print(f"  2 vs 1: {rows[1]['rate'] / rows[0]['rate']:.2f}x")
    if not args.skip_state:
        print(f"\nmemory worker by number of users (one fact each, published as fact.extracted; state store: {get_settings().state_store}):")
        print(f"  {'users':>7}  {'publish s':>9}  {'ingest s':>8}  {'RSS MiB':>8}  {'state MiB':>9}  {'kill -9 → first decision s':>26}")
        for u in (int(x) for x in args.users.split(",")):
            r = state_and_recovery(u, args.keep)
            state = f"{r['state_mib']:.1f}" if r["state_mib"] is not None else "-"
            print(f"  {u:>7}  {r['publish_s']:>9.1f}  {r['ingest_s']:>8.1f}  {r['rss_mib']:>8.0f}  {state:>9}  {r['recovery_s']:>26.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
