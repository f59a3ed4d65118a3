"""The memory processor's core alone: RSS against the bytes of its state, over many facts, and
what each fact costs it.

    .venv/bin/python -m bench.core_memory [--facts 30000] [--users 200] [--keep]

Runs streams/memory_core.py's MemoryCore on synthetic facts (one random cluster per user, so
some facts reinforce and most create), with its three state tables as dicts of sealed values (the
real key store seals them, as in the worker). Every 5,000 facts it prints the process's RSS, the
bytes the tables hold, and for those 5,000 facts the core's CPU time and the bytes it wrote to
each table (what the worker's RocksDB and changelogs take) a fact. RSS should track the state
(which grows with each user's ledger) plus a constant (the window vectors' cache, at most
MEMSTREAM_MEMORY_VECTOR_CACHE_MB): a gap that widens is memory held beyond the state. Its
namespace (`corememory…`: the data keys it sealed with) is dropped at the end unless --keep.
"""
from __future__ import annotations

import argparse
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np

from bench import namespaces
from kernel.config import get_settings
from domain.memory_state import Rules
from adapters.privacy.keystore import KeyStore
from schemas.codec import make_envelope
from schemas.events import FactExtracted
from streams.memory_core import MemoryCore, SealedStates


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


class CountedTable(dict):
    """A state table that counts the bytes written to it, by kind of value."""

    def __init__(self, written: Counter):
        super().__init__()
        self.written = written

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.written[b"vector" if b"\x00v\x00" in key else b"ledger" if b"\x00" in key else b"state"] += len(value)
        super().__setitem__(key, value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--facts", type=int, default=30_000)
    ap.add_argument("--users", type=int, default=200)
    namespaces.add_arguments(ap, "corememory")
    args = ap.parse_args()
    ns = args.namespace or namespaces.fresh("corememory")
    settings = get_settings().model_copy(update={"namespace": ns})
    keys = KeyStore(settings)
    written: Counter = Counter()
    states, ledgers, vectors = CountedTable(written), CountedTable(written), CountedTable(written)
    core = MemoryCore(settings, Rules.from_settings(settings), keys, states, ledgers, SealedStates(keys), vectors=vectors)
    rng = np.random.default_rng(1)
    centres = [rng.standard_normal(settings.embed_dim) for _ in range(args.users)]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    print(f"{'facts':>7} {'rss MiB':>8} {'state MiB':>10} {'CPU us/fact':>12}  bytes written a fact: state ledger vectors")
    cpu, before = 0.0, Counter()
    for i in range(args.facts + 1):
        user = i % args.users
        v = centres[user] + rng.standard_normal(settings.embed_dim) * 1.5
        fact_id = str(uuid.uuid4())
        data = FactExtracted(fact_id=fact_id, source_turn=fact_id, session="s1", channel="rule", rule="bench",
                             content=f"User likes thing {i}", category="fact", importance=0.5,
                             embedding=(v / np.linalg.norm(v)).astype("float32").tolist(), embed_model="bench")
        env = make_envelope(data, user=f"u{user}", time=t0 + timedelta(seconds=i), id=fact_id)
        c0 = time.process_time()
        for _ in core.on_fact(env):
            pass
        cpu += time.process_time() - c0
        if i % 5000 == 0:
            state = sum(len(v) for table in (states, ledgers, vectors) for v in table.values())
            n = max(1, min(i, 5000))
            per = {k: (written[k] - before[k]) / n for k in (b"state", b"ledger", b"vector")}
            us = cpu / n * 1e6
            print(f"{i:>7} {rss_mib():>8.0f} {state / 2**20:>10.1f} {us:>12.0f}  "
                  f"{per[b'state']:>8.0f} {per[b'ledger']:>6.0f} {per[b'vector']:>7.0f}", flush=True)
            cpu, before = 0.0, Counter(written)
    keys.close()
    namespaces.finish(settings, args.keep)


if __name__ == "__main__":
    main()
