"""The cost of sealing: publish and projector throughput with and without AES-GCM.

"Without" swaps the key ring for an identity cipher that exists only in this benchmark (the
codec still does everything else: base64, orjson, the envelope), so the difference is the cost
of encryption and key handling. Runs alternate sealed / unsealed to share the machine's noise.
Each run's namespace (`benchseal…`) is dropped after it unless --keep.
    .venv/bin/python -m bench.sealing [--n 50000] [--runs 3] [--keep]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from schemas.codec import DecisionKey


class IdentityAead:
    def encrypt(self, nonce, data, aad):
        return data

    def decrypt(self, nonce, data, aad):
        return data


class IdentityKeys:
    def key_for_write(self, user):
        return "none", IdentityAead()

    def key_for_read(self, user, kid):
        return IdentityAead()

    def control_key(self, kid=None):
        return "none", b"\x00" * 32

    def decision_key(self):
        return DecisionKey("none", b"\x01" * 32, 0)

    def forget_cached(self, user):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--projector-n", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the runs' namespaces (default: drop them)")
    args = ap.parse_args()
    from bench import namespaces
    base = namespaces.fresh("benchseal")
    os.environ["MEMSTREAM_NAMESPACE"] = base
    from kernel.config import get_settings
    from adapters.sdk import MemoryClient
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    settings = get_settings()
    users = [f"s{i}" for i in range(1000)]
    rates = {"sealed": [], "unsealed": []}
    projector_rates = {"sealed": [], "unsealed": []}
    for run in range(args.runs):
        for mode in ("sealed", "unsealed"):
            ns = settings.model_copy(update={"namespace": f"{base}_{mode}{run}"})
            client = MemoryClient(ns)
            if mode == "unsealed":
                client.keys = IdentityKeys()
            for u in users:
                client.keys.key_for_write(u)
            # 1. publish throughput through the SDK
            t0 = time.perf_counter()
            for i in range(args.n):
                client.record_turn_nowait(users[i % 1000], "b", "user", f"turn {i}: I like item number {i}")
            client.flush(120)
            rates[mode].append(args.n / (time.perf_counter() - t0))
            # 2. projector throughput: the session-windows projector decodes (unseals) every turn
            keys = client.keys
            client._producer.close()
            runner = ProjectorRunner(build_projector("session-windows", ns), ns, keys)
            t0 = time.perf_counter()
            runner.run(idle_exit_after=2.0)
            projector_rates[mode].append(runner.applied / (time.perf_counter() - t0 - 2.0))
            print(f"run {run + 1} {mode:>8}: publish {rates[mode][-1]:,.0f} turns/s, "
                  f"session-windows projector {projector_rates[mode][-1]:,.0f} events/s")
            if mode == "sealed":
                client.keys.close()
            namespaces.finish(ns, args.keep)
    # 3. the codec alone (no I/O): encode + decode of a fact with a 384-d embedding, µs per event
    from adapters.privacy.keystore import KeyStore
    from schemas.codec import decode, encode, make_envelope
    from schemas.events import FactExtracted
    real = KeyStore(settings)
    fact = FactExtracted(fact_id="f", source_turn="t", channel="rule", key="location", value="Lisbon",
                         content="User lives in Lisbon", importance=0.8, embedding=[0.05] * settings.embed_dim,
                         embed_model="m")
    env = make_envelope(fact, user="s0")
    micro = {"sealed": [], "unsealed": []}
    for _ in range(args.runs):
        for mode, ring in (("sealed", real), ("unsealed", IdentityKeys())):
            t0 = time.perf_counter()
            for _ in range(5000):
                decode(encode(env, ring), ring)
            micro[mode].append((time.perf_counter() - t0) / 5000 * 1e6)
    ms, mu = statistics.median(micro["sealed"]), statistics.median(micro["unsealed"])
    print(f"codec encode+decode of a fact with embedding: sealed {ms:.1f} µs vs unsealed {mu:.1f} µs "
          f"(+{100 * (ms / mu - 1):.1f}%)")
    for name, r in (("publish", rates), ("projector", projector_rates)):
        s, u = statistics.median(r["sealed"]), statistics.median(r["unsealed"])
        print(f"{name}: sealed {s:,.0f}/s vs unsealed {u:,.0f}/s -> sealing costs {100 * (1 - s / u):.1f}% "
              f"(median of {args.runs})")
    real.close()
    namespaces.finish(settings, args.keep)   # the key store's schema of the codec runs


if __name__ == "__main__":
    main()
