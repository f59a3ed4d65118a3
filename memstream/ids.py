"""Event and memory ids.

Fresh ids are UUIDv7 (time-ordered). Ids of *derived* events are deterministic: a processor
that re-handles the same input after a crash emits byte-identical events, so every projector's
upsert-by-id makes the duplicate harmless (law 3, exactly-once in effect). A derived id keeps
its parent's 48-bit millisecond prefix, so derived ids still sort by time.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from datetime import datetime

_local = threading.local()


def random_bytes(n: int) -> bytes:
    """CSPRNG bytes from a per-thread buffer: one getrandom() syscall per 4 KiB, not per call.

    Used for AES-GCM nonces and UUIDv7 randomness on the publish hot path, where a syscall per
    event cost more than the encryption itself.
    """
    buf = getattr(_local, "buf", b"")
    pos = getattr(_local, "pos", 0)
    if pos + n > len(buf):
        buf, pos = os.urandom(max(4096, n)), 0
        _local.buf = buf
    _local.pos = pos + n
    return buf[pos:pos + n]


def _with_version(raw: bytearray, version: int) -> uuid.UUID:
    raw[6] = (raw[6] & 0x0F) | (version << 4)
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return uuid.UUID(bytes=bytes(raw))


_RAND_A = (1 << 12) - 1
_RAND_B = (1 << 62) - 1


def uuid7(at: datetime | None = None) -> str:
    """A time-ordered id; `at` fixes the time prefix (e.g. an event's own time)."""
    ms = int(at.timestamp() * 1000) if at is not None else time.time_ns() // 1_000_000
    r = int.from_bytes(random_bytes(10), "big")
    # 48-bit ms | version 7 | 12 random bits | variant 0b10 | 62 random bits (RFC 9562)
    v = (ms << 80) | (0x7 << 76) | (((r >> 62) & _RAND_A) << 64) | (0b10 << 62) | (r & _RAND_B)
    h = f"{v:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def derived_id(parent_id: str, tag: str) -> str:
    """Deterministic child id of `parent_id` (UUIDv8: parent's time prefix + hash of parent and tag)."""
    parent = uuid.UUID(parent_id).bytes
    digest = hashlib.blake2b(parent + tag.encode(), digest_size=10).digest()
    return str(_with_version(bytearray(parent[:6] + digest), 8))
