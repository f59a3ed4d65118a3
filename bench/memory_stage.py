"""The memory stage alone on long histories: facts/s through one live memory worker whose users
already hold many memories (issue 31 item 2).

    .venv/bin/python -m bench.memory_stage [--shape 1000x1000] [--shape 1x10000] [--facts N] [--keep]

A shape UxM is U users each holding M memories. For each shape, in a fresh namespace:

1. **Preload the state, as the worker itself would have stored it.** Each user's state is built
   with the domain's own types (a recent window of `recent_window` memories with 384-d
   embeddings, a ledger entry for every memory, a location preference) and saved by the very
   MemoryCore the worker runs (streams/memory_core.py: sealed with the user's data key, the
   ledger in its 64 buckets), then written into the worker's three state changelogs (state, ledger buckets, window vectors) at the user's
   partition. Deciding M x U real facts first would take hours at these sizes (1,000,000
   decisions); the worker cannot tell the difference: on start it restores its tables from the
   changelogs, exactly as after a restart.
2. **A backlog of facts** (`fact.extracted`, sealed, for the same users, round-robin): each
   embedding is one of the user's windowed memories' vectors plus noise, or a new direction, so
   the worker reinforces, links and creates as on real data, and a third of them state the
   user's city (a preference version, superseding the last one).
3. **One memory worker** (`memstream run`'s supervisor, nothing else) starts; measured from its
   first decision to the facts group's lag reaching 0: facts/s. Start-up and table recovery are
   printed apart (paid once per start).
4. **Proof that the preloaded state was used**: the decisions are read back from the memory
   topic and counted by type; links and reinforcements that point at a preloaded memory are
   counted (0 would mean the worker started from empty users and the figure would be void).
"""
from __future__ import annotations

import argparse
import io
import signal
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np

from adapters.bus import EventProducer, ensure_topics, producer_config
from adapters.kafka_auth import ADMIN
from adapters.privacy.keystore import KeyStore
from bench import namespaces
from bench.scale import run_until
from bench.soak import end_offset, group_lag
from domain.ledger import Entry, Ledger
from domain.memory_state import PrefState, Recent, Rules, UserState
from kernel.config import get_settings
from kernel.ids import uuid7
from memstream.app.workers import Supervisor
from projections import pg
from schemas.codec import decode, encode, make_envelope
from schemas.events import FactExtracted
from streams.memory_core import MemoryCore, SealedStates
from streams.routing import partition_of

T0 = datetime(2026, 11, 1, tzinfo=UTC)
POOL = 64          # directions the synthetic memories cluster around (topics a user talks about)
CITIES = ["Lisbon", "Porto", "Kyoto", "Dublin", "Rome"]


class Preloader:
    """Builds each user's state in memory with the domain's types and writes it, sealed, into the
    worker's changelogs."""

    def __init__(self, settings, keys, rng):
        self.settings = settings
        self.rules = Rules.from_settings(settings)
        self.rng = rng
        self.pool = rng.standard_normal((POOL, settings.embed_dim)).astype(np.float32)
        self.states: dict[bytes, bytes] = {}
        self.ledgers: dict[bytes, bytes] = {}
        self.vectors: dict[bytes, bytes] = {}
        self.core = MemoryCore(settings, self.rules, keys, self.states, self.ledgers, SealedStates(keys),
                               vectors=self.vectors)
        self.windows: dict[str, list[np.ndarray]] = {}
        self.preloaded: set[str] = set()

    def vector(self, topic: int, noise: float = 0.15) -> np.ndarray:
        v = self.pool[topic] + self.rng.normal(scale=noise, size=self.pool.shape[1]).astype(np.float32)
        return v / np.linalg.norm(v)

    def user(self, user: str, memories: int) -> None:
        ledger = Ledger()
        state = UserState(ledger=ledger)
        # the user's history: one memory a minute, ending just before the facts' first time
        start = (T0 - timedelta(minutes=memories)).timestamp()
        ids = [str(uuid7(T0 - timedelta(minutes=memories - j))) for j in range(memories)]
        for j, mid in enumerate(ids):
            at = start + 60 * j
            entry = Entry(content=f"User mentioned thing {j} ({user})", base=0.6, anchor=at, created=at,
                          importance=0.6, last_access=at, facts=[str(uuid7())], kind="general")
            entry.published(0.6, at)
            if j:
                entry.inc.append(ids[j - 1])   # FOLLOWS from the memory before
            ledger.put(mid, entry)
        window = ids[-self.rules.recent_window:]
        vecs = [self.vector(int(self.rng.integers(POOL))) for _ in window]
        # as a worker that has been running holds them: consolidation has noted each one's kind in its entry
        state.recent = [Recent(mid, v, 0.6, "general", None, [], None, None, noted=["general", False])
                        for mid, v in zip(window, vecs, strict=True)]
        state.last_memory_id = ids[-1]
        state.prefs["location"] = PrefState(1, CITIES[0], str(uuid7()), ids[-1])
        state.clock = start + 60 * memories
        self.core.save_state(user, state)
        self.windows[user] = vecs
        self.preloaded.update(ids)

    def write(self) -> int:
        """The state tables' values into their changelogs, at each user's partition."""
        ns, parts = self.settings.namespace, self.settings.partitions
        from confluent_kafka import Producer
        producer = Producer(producer_config(self.settings, ADMIN, **{"linger.ms": 50, "batch.size": 1_000_000}))
        n = 0
        for table, values in (("user-state", self.states), ("user-ledger", self.ledgers), ("user-vectors", self.vectors)):
            topic = f"{ns}.memory-{table}-changelog"
            for key, value in values.items():
                user = key.split(b"\x00", 1)[0]
                while True:
                    try:
                        producer.produce(topic, value, key, partition=partition_of(user, parts))
                        break
                    except BufferError:   # the local queue is full: let it drain
                        producer.poll(0.5)
                n += 1
        if producer.flush(300):
            raise SystemExit("the state changelogs were not all written")
        return n


def publish_facts(pre: Preloader, keys, users: list[str], n: int) -> None:
    producer = EventProducer(pre.settings, ADMIN, **{"linger.ms": 20})
    for i in range(n):
        user = users[i % len(users)]
        at = T0 + timedelta(seconds=i)
        roll = pre.rng.random()
        if roll < 0.6:    # a topic the user talked about recently: a link or a reinforcement
            base = pre.windows[user][int(pre.rng.integers(len(pre.windows[user])))]
            v = base + pre.rng.normal(scale=0.02, size=base.shape[0]).astype(np.float32)
            vec = v / np.linalg.norm(v)
        else:             # something new
            vec = pre.vector(int(pre.rng.integers(POOL)), noise=0.6)
        city = CITIES[int(pre.rng.integers(len(CITIES)))] if i % 3 == 0 else None
        data = FactExtracted(fact_id=str(uuid7(at)), source_turn=str(uuid7(at)), session=f"s{i % 7}", channel="rule",
                             rule="bench", key="location" if city else None, value=city,
                             content=f"User lives in {city}" if city else f"User said thing {i}",
                             category="identity" if city else "general", importance=0.6,
                             embedding=vec.tolist(), embed_model=pre.settings.embed_model)
        producer.send(pre.settings.topic("facts"), user, encode(make_envelope(data, user=user, time=at), keys))
    producer.flush(300)
    producer.close()


def decisions(settings, keys, preloaded: set[str]) -> tuple[Counter, int]:
    """The memory topic's events by type, and how many links/reinforcements touch a preloaded memory."""
    from confluent_kafka import Consumer
    from adapters.kafka_auth import kafka_config
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": f"bench-stage-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([settings.topic("memory")])
    want, seen, types, touched = end_offset(settings, "memory"), 0, Counter(), 0
    deadline = time.monotonic() + 300
    while seen < want and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is None or msg.error():
            continue
        seen += 1
        if not msg.value():   # a watermark
            continue
        env = decode(msg.value(), keys)
        types[env.type] += 1
        d = env.data
        ids = {getattr(d, "to_id", None), getattr(d, "from_id", None)} if env.type == "memory.linked" else \
              {getattr(d, "memory_id", None)} if env.type == "memory.reinforced" else set()
        touched += bool(ids & preloaded)
    c.close()
    return types, touched


def run_shape(users: int, memories: int, facts: int, keep: bool) -> dict:
    s = get_settings().model_copy(update={"namespace": f"memstage{users}x{memories}{uuid.uuid4().hex[:6]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    keys = KeyStore(s)
    pre = Preloader(s, keys, np.random.default_rng(31))
    names = [f"u{i}" for i in range(users)]
    t = time.monotonic()
    for u in names:
        pre.user(u, memories)
    values = pre.write()
    state_mib = (sum(map(len, pre.states.values())) + sum(map(len, pre.ledgers.values()))) / 2**20
    preload_s = time.monotonic() - t
    print(f"  {users}x{memories}: preloaded {values:,} state values ({state_mib:.0f} MiB sealed) in {preload_s:.0f} s",
          file=sys.stderr, flush=True)
    publish_facts(pre, keys, names, facts)
    sup = Supervisor(s, names=("memory",), out=io.StringIO())
    t0 = time.monotonic()
    sup.start("memory")
    try:
        first = run_until(sup, lambda: end_offset(s, "memory") > 0, timeout=1800, every=0.2)
        end = run_until(sup, lambda: group_lag(s, f"{s.namespace}.memory", ["facts"]) == 0, timeout=3600, every=0.5)
    finally:
        sup.stop()
    types, touched = decisions(s, keys, pre.preloaded)
    keys.close()
    namespaces.finish(s, keep)
    return {"users": users, "memories": memories, "facts": facts, "facts_per_s": facts / (end - first),
            "startup_s": first - t0, "state_mib": state_mib, "types": dict(types), "touch_preloaded": touched}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="UxM: U users holding M memories each (default 1000x1000 and 1x10000)")
    ap.add_argument("--facts", type=int, default=0, help="facts in the backlog (default: 20,000 for many users, 5,000 for one)")
    ap.add_argument("--keep", action="store_true", help="keep each run's namespace (default: drop it)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    rows = []
    for shape in args.shape or ["1000x1000", "1x10000"]:
        users, memories = (int(x) for x in shape.lower().split("x"))
        rows.append(run_shape(users, memories, args.facts or (20_000 if users > 1 else 5_000), args.keep))
    print(f"\nmemory stage, one worker ({get_settings().state_store} state store):")
    print(f"  {'users x memories':>17}  {'facts':>6}  {'facts/s':>8}  {'start-up s':>10}  {'state MiB':>9}  "
          f"{'touching preloaded':>18}  decisions")
    for r in rows:
        print(f"  {r['users']:>7} x {r['memories']:<7}  {r['facts']:>6}  {r['facts_per_s']:>8.1f}  {r['startup_s']:>10.1f}  "
              f"{r['state_mib']:>9.0f}  {r['touch_preloaded']:>18}  "
              + ", ".join(f"{k} {v}" for k, v in sorted(r["types"].items())))


if __name__ == "__main__":
    main()
