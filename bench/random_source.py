"""The cost of the random source behind AES-GCM nonces and event ids.

Compares, per 12-byte nonce and per UUIDv7: a direct os.urandom() call per use (what
kernel.ids does now: fork-safe, no state) and the per-thread 4 KiB buffer it used before
(a forked child inherited the buffer and repeated its parent's nonces). Best and median of
alternating runs, since the dev box is shared.
    .venv/bin/python -m bench.random_source [--n 200000] [--runs 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import threading

from kernel import ids

_local = threading.local()


def buffered_bytes(n: int) -> bytes:
    """The former kernel.ids.random_bytes: one getrandom() per 4 KiB (not fork-safe)."""
    buf = getattr(_local, "buf", b"")
    pos = getattr(_local, "pos", 0)
    if pos + n > len(buf):
        buf, pos = os.urandom(max(4096, n)), 0
        _local.buf = buf
    _local.pos = pos + n
    return buf[pos:pos + n]


def _per_call(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    cases = {
        "os.urandom(12)": lambda: os.urandom(12),
        "4 KiB buffer (12)": lambda: buffered_bytes(12),
        "ids.uuid7() (os.urandom)": ids.uuid7,
        "uuid7 over the buffer": lambda: ids._uuid7_from(buffered_bytes(10)),
    }
    results: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(a.runs):          # alternate the cases so they share the machine's noise
        for name, fn in cases.items():
            results[name].append(_per_call(fn, a.n))
    for name, xs in results.items():
        print(f"{name:28s} best {min(xs):6.0f} ns/call, median {statistics.median(xs):6.0f}")


if __name__ == "__main__":
    main()
