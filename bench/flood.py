"""Another tenant's recall under a flood (issue 28 item 4): the rate limits, the unknown-key path
and the wait quota together, through a real `memstream api` process.

One tenant (globex) recalls, one request at a time, over users holding 100 memories each; first
alone, then while another tenant (acme) floods the same API process with
- `--random-keys` requests carrying random API keys (unknown keys: one key-store lookup each,
  unless the client's lookup rate refuses them first),
- `--waits` recalls that wait for a position no worker will ever apply (no pipeline runs in the
  bench's namespace), each up to 30 s,
- recalls with its own valid key, as fast as `--own-key-threads` threads can send them (default
  half of `--flood-threads`; the rest send the random keys). Issue 28's figure is for random keys
  and hanging waits: `--own-key-threads 0`; with them, a tenant using its own quota to the full
  competes for the same 2 cores as the victim, which no limit below its quota changes.
It prints globex's recall p50/p95 alone and under the flood, their ratio (one run, interleaved in
time as far as a flood allows), and the flood's answers by status: the flooder should see 429s.

    .venv/bin/python -m bench.flood [--random-keys 10000] [--waits 100] [--flood-threads 8] [--own-key-threads N]
                                    [--queries 200]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import secrets
import statistics
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.resource import Api
from bench.tenant_barrier import WORDS, load, pct
from adapters.bus import ensure_topics
from kernel.config import get_settings
from adapters.privacy.apikeys import ApiKeys
from projections import pg


def recall_ms(http: httpx.Client, user: str, rng: random.Random) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = http.post("/v1/recall", json={"user": user, "query": " ".join(rng.sample(WORDS, 2)), "k": 10})
    return (time.perf_counter() - t0) * 1000, r.status_code


def victim_round(http: httpx.Client, users: list[str], n: int, rng: random.Random) -> tuple[list[float], Counter]:
    times, statuses = [], Counter()
    for _ in range(n):
        ms, status = recall_ms(http, rng.choice(users), rng)
        statuses[status] += 1
        if status == 200:
            times.append(ms)
    return times, statuses


def flood(url: str, acme_key: str, pending: str, random_keys: int, waits: int, flood_threads: int, n_own: int,
          nice: int, started, stop, results) -> None:
    """acme's flood, in its own process: random keys, hanging waits, its own key's recalls. Puts
    (answers by kind and status, random-key requests not yet sent when told to stop) on `results`.
    `nice`: its scheduling priority (19: it gets only the CPU the server and the victim leave, as a
    flooder on another machine would; 0: it competes for the same cores as the server)."""
    os.nice(nice)
    flooder = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {acme_key}"}, timeout=60,
                           limits=httpx.Limits(max_connections=waits + flood_threads + 8))
    answers: dict[str, Counter] = {"random keys": Counter(), "hanging waits": Counter(), "own key": Counter()}
    local = threading.local()          # a connection per flooding thread, kept alive: as a flooder would
    halt = threading.Event()

    def random_key(_i) -> None:
        if halt.is_set():
            return
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=url, timeout=60)
        r = local.client.get("/v1/users/x/profile", headers={"Authorization": f"Bearer msk_{secrets.token_urlsafe(24)}"})
        answers["random keys"][r.status_code] += 1

    def hanging(_i) -> None:
        r = flooder.post("/v1/recall", json={"user": "f0", "query": "flood", "after": pending, "wait_s": 30})
        answers["hanging waits"][r.status_code] += 1

    def own_key() -> None:
        rng = random.Random()
        while not halt.is_set():
            _ms, status = recall_ms(flooder, "f0", rng)
            answers["own key"][status] += 1

    pool = ThreadPoolExecutor(waits)
    for i in range(waits):
        pool.submit(hanging, i)
    own = [threading.Thread(target=own_key, daemon=True) for _ in range(n_own)]
    for t in own:
        t.start()
    keys_pool = ThreadPoolExecutor(max(1, flood_threads - n_own))
    keys_done = [keys_pool.submit(random_key, i) for i in range(random_keys)]
    started.set()
    stop.wait()
    left = sum(not f.done() for f in keys_done)
    halt.set()
    for t in own:
        t.join()
    keys_pool.shutdown(wait=True)
    pool.shutdown(wait=True)
    results.put(({k: dict(v) for k, v in answers.items()}, left))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--random-keys", type=int, default=10_000)
    ap.add_argument("--waits", type=int, default=100)
    ap.add_argument("--flood-threads", type=int, default=8)
    ap.add_argument("--own-key-threads", type=int, default=None,
                    help="threads recalling with the flooder's own valid key (default: half of --flood-threads)")
    ap.add_argument("--flood-nice", type=int, default=0,
                    help="niceness of the flooding process (19: it stands in for a client on another machine, whose "
                         "CPU is not the server's; 0, the default: it competes for the server's cores)")
    ap.add_argument("--queries", type=int, default=200, help="globex's recalls, alone and under the flood")
    ap.add_argument("--tenant-rate", type=float, default=None,
                    help="MEMSTREAM_RATE_LIMIT_PER_TENANT for the API (default: the settings' default)")
    ap.add_argument("--key-lookups", type=float, default=None,
                    help="MEMSTREAM_KEY_LOOKUPS_PER_CLIENT for the API (default: the settings' default)")
    ap.add_argument("--keep", action="store_true", help="keep the bench's namespace at the end (default: drop it)")
    args = ap.parse_args()
    base = get_settings()
    ns = base.model_copy(update={"namespace": f"bench_flood_{uuid.uuid4().hex[:6]}"})
    ensure_topics(ns)
    pg.ensure_schema(ns)
    rng = random.Random(28)
    victims = [f"v{i}" for i in range(20)]
    load(ns, [f"globex/{u}" for u in victims], {f"globex/{u}": 100 for u in victims}, ns.embed_dim, rng)
    store = ApiKeys(ns, role="owner")
    try:
        globex_key = store.create("globex", ("memory:read",), name="bench-flood-victim")[1]
        acme_key = store.create("acme", ("memory:read", "memory:write"), name="bench-flood-flooder")[1]
    finally:
        store.close()
    limits = {k: str(v) for k, v in (("MEMSTREAM_RATE_LIMIT_PER_TENANT", args.tenant_rate),
                                      ("MEMSTREAM_KEY_LOOKUPS_PER_CLIENT", args.key_lookups)) if v is not None}
    api = Api(ns, env=limits)
    try:
        victim = httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {globex_key}"}, timeout=60)
        flooder = httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {acme_key}"}, timeout=60,
                               limits=httpx.Limits(max_connections=args.waits + args.flood_threads + 8))
        victim_round(victim, victims, 30, rng)                               # warm-up: embedder, pools
        alone, _ = victim_round(victim, victims, args.queries, rng)

        # the flooder's pending position: published, never applied (no pipeline in this namespace)
        pending = flooder.post("/v1/turns", json={"user": "f0", "session": "s", "role": "user",
                                                  "content": "I like flooding"}).json()["token"]
        n_own = args.flood_threads // 2 if args.own_key_threads is None else args.own_key_threads
        # The flood runs in a process of its own, as another tenant's client would: in this one, its
        # threads would hold the GIL the victim's client needs to send and read, and the figure
        # would measure the bench, not the server.
        ctx = multiprocessing.get_context("spawn")
        started, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=flood, args=(api.url, acme_key, pending, args.random_keys, args.waits,
                                               args.flood_threads, n_own, args.flood_nice, started, stop, results))
        proc.start()
        started.wait(60)
        time.sleep(1.0)                                                     # the flood is under way
        t0 = time.monotonic()
        flooded, flooded_statuses = victim_round(victim, victims, args.queries, rng)
        victim_s = time.monotonic() - t0
        stop.set()
        answers, random_keys_left = results.get(timeout=120)
        proc.join(30)

        p50a, p50f = statistics.median(alone), statistics.median(flooded)
        print(f"namespace {ns.namespace}; globex's recall, {args.queries} queries each, k=10, users of 100 memories; "
              f"API limits: {limits or 'defaults'}; flood: {args.random_keys} random keys from "
              f"{max(1, args.flood_threads - n_own)} threads, {args.waits} waits, {n_own} own-key threads, "
              f"flooder nice {args.flood_nice}")
        print(f"  alone         p50 {p50a:7.2f} ms  p95 {pct(alone, 0.95):7.2f} ms")
        print(f"  under flood   p50 {p50f:7.2f} ms  p95 {pct(flooded, 0.95):7.2f} ms  p50 ratio {p50f / p50a:.2f} "
              f"(globex answers {dict(flooded_statuses)}; its {args.queries} took {victim_s:.1f} s, "
              f"{random_keys_left} random-key requests still queued when it finished)")
        for what, got in answers.items():
            print(f"  flood, {what:14s} {sum(got.values()):6d} answers  {dict(sorted(got.items()))}")
    finally:
        api.close()
        # the whole namespace (topics, keys, schema): dropping only its schema left 8 topics and a
        # key set per run on the broker and in the key store
        from bench import namespaces
        namespaces.finish(ns, keep=args.keep)


if __name__ == "__main__":
    main()
