"""What the Prometheus metrics cost per event, against what the event costs anyway.

For each stage, the metric calls it makes per record (adapters/metrics.py, as wired in
streams/ and projections/runner.py), timed in a tight loop, next to decoding the same record
(AES-GCM unsealing, envelope and schema validation: the least work any consumer does per event).
No services needed.

    .venv/bin/python -m bench.metrics_overhead [--n 200000]
"""
from __future__ import annotations

import argparse
import statistics
import time

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters import metrics
from schemas.codec import decode, encode, make_envelope
from schemas.events import FactExtracted, MemoryCreated


class StaticKeys:
    """One AES-GCM key per user, in memory (the key store minus Postgres)."""

    def __init__(self):
        self.keys: dict[str, bytes] = {}

    def key_for_write(self, user):
        self.keys.setdefault(user, AESGCM.generate_key(bit_length=256))
        return "k1", AESGCM(self.keys[user])

    def key_for_read(self, user, kid):
        return AESGCM(self.keys[user])


def per_call_us(fn, n: int, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    keys = StaticKeys()
    vec = [0.05] * 384
    fact = encode(make_envelope(FactExtracted(fact_id="f", source_turn="t", channel="rule", key="location",
                                              value="Lisbon", content="User lives in Lisbon", importance=0.8,
                                              embedding=vec, embed_model="m"), user="u1"), keys)
    created = encode(make_envelope(MemoryCreated(memory_id="m1", fact_id="f", content="User lives in Lisbon",
                                                 category="fact", importance=0.8, embedding=vec), user="u1"), keys)
    n = args.n
    # the metric calls each stage makes per record
    stages = {
        "extractor, per turn (consumed + produced)":
            lambda: (metrics.consumed("extractor", "ns.turns", fact), metrics.produced("extractor", "ns.facts", "fact.extracted")),
        "memory processor, per fact (consumed + 2 x (produced + decision))":
            lambda: (metrics.consumed("memory", "ns.facts", fact), metrics.produced("memory", "ns.memory", "memory.created"),
                     metrics.decision("memory.created"), metrics.produced("memory", "ns.memory", "preference.set"),
                     metrics.decision("preference.set")),
        "projector, per record (consumed; batch histogram amortised over 100)":
            lambda: metrics.consumed("projector.pgvector-items", "ns.memory", created),
    }
    batch_us = per_call_us(lambda: metrics.projector_batch("pgvector-items", 0.01, 100), n // 10)
    decode_fact = per_call_us(lambda: decode(fact, keys), max(1, n // 50))
    decode_created = per_call_us(lambda: decode(created, keys), max(1, n // 50))
    peek = per_call_us(lambda: metrics.peek_type(created), n)
    print(f"records: fact.extracted {len(fact)} bytes, memory.created {len(created)} bytes (sealed, 384-d embedding)")
    print(f"peek_type (the type label without decoding): {peek:.2f} µs")
    print(f"decode (unseal + validate), the floor of a consumer's per-event work: fact {decode_fact:.1f} µs, "
          f"memory.created {decode_created:.1f} µs")
    print(f"projector batch histogram + applied counter: {batch_us:.2f} µs per batch")
    for name, fn in stages.items():
        us = per_call_us(fn, n)
        if name.startswith("projector"):
            us += batch_us / 100
        floor = decode_created if name.startswith("projector") else decode_fact
        print(f"{name}: {us:.2f} µs = {100 * us / floor:.1f}% of one decode")


if __name__ == "__main__":
    main()
