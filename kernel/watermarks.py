"""Source watermarks: how a query knows every effect of a publish has reached a read model.

A turn at turns:p:X may yield facts, which yield decisions, which projectors apply — or yield
nothing at all. After each batch the extractor sends a control record (no envelope, header
`memstream-watermark: turns:p:X+1`) to the same partition p of the facts topic; the memory
processor forwards it, in order, to partition p of the memory topic; each projector stores it
beside its positions, in the same transaction. Because one user's turns, facts and decisions
all sit in partition p of topics with the same partition count, a stored watermark ≥ X+1 means
every effect of every turn up to X is applied. (The LLM channel runs in its own consumer group
and is not covered: its facts become visible eventually.)
"""
from __future__ import annotations

HEADER = "memstream-watermark"
PREFIX = "watermark:"


def header(topic: str, partition: int, next_offset: int) -> dict[str, bytes]:
    return {HEADER: f"{topic}:{partition}:{next_offset}".encode()}


def parse(headers) -> tuple[str, int, int] | None:
    """The (topic, partition, next offset) a control record carries, or None for a normal record."""
    if not headers:
        return None
    items = headers.items() if isinstance(headers, dict) else headers
    for key, value in items:
        if key == HEADER:
            topic, partition, offset = value.decode().rsplit(":", 2)
            return topic, int(partition), int(offset)
    return None


def position_key(topic: str, partition: int) -> tuple[str, int]:
    """How a watermark is stored among a projector's positions."""
    return PREFIX + topic, partition
