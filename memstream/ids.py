"""Event and memory ids.

Fresh ids are UUIDv7 (time-ordered). Ids of *derived* events are deterministic: a processor
that re-handles the same input after a crash emits byte-identical events, so every projector's
upsert-by-id makes the duplicate harmless (law 3, exactly-once in effect). A derived id keeps
its parent's 48-bit millisecond prefix, so derived ids still sort by time.
"""
from __future__ import annotations

import hashlib
import os
import time
import uuid
from datetime import datetime


def _with_version(raw: bytearray, version: int) -> uuid.UUID:
    raw[6] = (raw[6] & 0x0F) | (version << 4)
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return uuid.UUID(bytes=bytes(raw))


def uuid7(at: datetime | None = None) -> str:
    """A time-ordered id; `at` fixes the time prefix (e.g. an event's own time)."""
    ms = int(at.timestamp() * 1000) if at is not None else time.time_ns() // 1_000_000
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    return str(_with_version(raw, 7))


def derived_id(parent_id: str, tag: str) -> str:
    """Deterministic child id of `parent_id` (UUIDv8: parent's time prefix + hash of parent and tag)."""
    parent = uuid.UUID(parent_id).bytes
    digest = hashlib.blake2b(parent + tag.encode(), digest_size=10).digest()
    return str(_with_version(bytearray(parent[:6] + digest), 8))
