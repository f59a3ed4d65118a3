"""Driver-side routing for the stream cores: partitions and raw records, so the cores never see them.

The cores (streams/memory_core.py, streams/session_core.py, streams/extraction_core.py) take
decoded envelopes and return events; whoever drives them — the faust agents, what-if
(replay/whatif.py), the fast tier's in-memory pipeline (tests/fast/inmemory.py) — reads records,
decides which ones a core gets, decodes them here, and routes what comes back.

- `partition_of`: the partition Kafka's default partitioner gives a key (adapters/bus.py:
  every producer here partitions alike); `partitioner(n)` is the function a memory core is given
  to answer a tick's "which users are on partition p".
- `memory_input`: a raw memory-topic record → the decoded event the memory core acts on, or None
  for the core's own output and for records it must not act on.
"""
from __future__ import annotations

from collections.abc import Callable

from aiokafka.partitioner import murmur2

from kernel.errors import InvalidEvent
from schemas.codec import KeyRing
from schemas.envelope import Envelope
from schemas.peek import peek_type
from schemas.records import decode_record
from streams.memory_core import MEMORY_INPUTS


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2, as librdkafka's murmur2_random and
    aiokafka use) gives a key: how a tick for partition p finds that partition's users."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def partitioner(partitions: int) -> Callable[[bytes], int]:
    """`partition_of` for a topic of `partitions` partitions: what a MemoryCore is given."""
    return lambda key: partition_of(key, partitions)


def memory_input(key: bytes | None, value: bytes | None, keys: KeyRing, *, appended_ms: int | None,
                 max_future_skew_s: float) -> Envelope | None:
    """One raw record of the memory topic as the memory core's input, or None: the processor's own
    output (most of the topic) is only peeked at, and an unreadable record is left to the
    projectors, which dead-letter memory-topic records (once is enough).
    `appended_ms`: the broker's timestamp of the record (schemas/records.py), None when unknown."""
    if peek_type(value) not in MEMORY_INPUTS:
        return None
    # Decoded before acting, never trusted from the peeked type: decode verifies a control
    # event's MAC (schemas/codec.py), so a user.erased produced by anyone but memstream drops nothing.
    try:
        return decode_record(key, value, keys, appended_ms=appended_ms, max_future_skew_s=max_future_skew_s)
    except InvalidEvent:
        return None
