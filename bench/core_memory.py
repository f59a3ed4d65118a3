"""The memory processor's core alone: RSS against the bytes of its state, over many facts.

    .venv/bin/python -m bench.core_memory [--facts 30000] [--users 200] [--keep]

Runs streams/memory_core.py's MemoryCore on synthetic facts (one random cluster per user, so
some facts reinforce and most create), with its two state tables as dicts of sealed values (the
real key store seals them, as in the worker). Every 5,000 facts it prints the process's RSS and
the bytes the tables hold. RSS should track the state (which grows with each user's ledger) plus
a constant: a gap that widens is memory held beyond the state. Its namespace (`corememory…`: the
data keys it sealed with) is dropped at the end unless --keep.
"""
from __future__ import annotations

import argparse
import uuid
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--facts", type=int, default=30_000)
    ap.add_argument("--users", type=int, default=200)
    namespaces.add_arguments(ap, "corememory")
    args = ap.parse_args()
    ns = args.namespace or namespaces.fresh("corememory")
    settings = get_settings().model_copy(update={"namespace": ns})
    keys = KeyStore(settings)
    states: dict[bytes, bytes] = {}
    ledgers: dict[bytes, bytes] = {}
    core = MemoryCore(settings, Rules.from_settings(settings), keys, states, ledgers, SealedStates(keys))
    rng = np.random.default_rng(1)
    centres = [rng.standard_normal(settings.embed_dim) for _ in range(args.users)]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    print(f"{'facts':>7} {'rss MiB':>8} {'state MiB':>10}")
    for i in range(args.facts + 1):
        user = i % args.users
        v = centres[user] + rng.standard_normal(settings.embed_dim) * 1.5
        fact_id = str(uuid.uuid4())
        data = FactExtracted(fact_id=fact_id, source_turn=fact_id, session="s1", channel="rule", rule="bench",
                             content=f"User likes thing {i}", category="fact", importance=0.5,
                             embedding=(v / np.linalg.norm(v)).astype("float32").tolist(), embed_model="bench")
        for _ in core.on_fact(make_envelope(data, user=f"u{user}", time=t0 + timedelta(seconds=i), id=fact_id)):
            pass
        if i % 5000 == 0:
            state = sum(map(len, states.values())) + sum(map(len, ledgers.values()))
            print(f"{i:>7} {rss_mib():>8.0f} {state / 2**20:>10.1f}", flush=True)
    keys.close()
    namespaces.finish(settings, args.keep)


if __name__ == "__main__":
    main()
