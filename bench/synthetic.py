"""Synthetic but realistic memory events: the real decision function over synthetic facts.

Shared by the kill -9 test (tests/test_crash_recovery.py), the replay tests and the rebuild
benchmark (bench/rebuild.py). Deterministic for a seed, apart from the fresh UUIDv7 ids.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from domain.memory_rules import Rules, UserState, decide
from kernel.ids import derived_id, uuid7
from schemas.codec import make_envelope
from schemas.events import FactExtracted


def iter_decided_events(dim: int, seed: int = 7, users: int = 97, prefix: str = "crash-") -> Iterator:
    """An endless stream of memory-topic envelopes: creates, reinforcements, links, supersessions,
    preference versions, as decide() makes them for facts of `users` synthetic users."""
    rng = np.random.default_rng(seed)
    rules = Rules(dedup_threshold=0.95, link_threshold=0.80, recent_window=50)
    pool = rng.normal(size=(40, dim)).astype(np.float32)
    states: dict[str, UserState] = {}
    i = 0
    while True:
        user = f"{prefix}{i % users}"
        base = pool[rng.integers(len(pool))] + rng.normal(scale=0.15, size=dim).astype(np.float32)
        vec = (base / np.linalg.norm(base)).tolist()
        key, value = (("location", f"city-{rng.integers(5)}") if i % 3 == 0 else (None, None))
        fid = uuid7()
        fact = FactExtracted(fact_id=fid, source_turn=uuid7(), channel="rule", key=key, value=value,
                             content=f"fact {i} of {user}", category="identity", importance=float(rng.uniform(0.1, 1)),
                             tags=[f"t{i % 4}"], embedding=vec, embed_model="synthetic")
        state, decisions = decide(states.get(user, UserState()), fact, rules, lambda tag, fid=fid: derived_id(fid, tag))
        states[user] = state
        for d in decisions:
            yield make_envelope(d.data, user=user, id=derived_id(fid, d.tag), causation=fid, producer="test")
        i += 1


def decided_events(n: int, dim: int, seed: int = 7, users: int = 97, prefix: str = "crash-") -> list:
    """The first n events of iter_decided_events."""
    out = []
    for env in iter_decided_events(dim, seed, users, prefix):
        out.append(env)
        if len(out) >= n:
            break
    return out
