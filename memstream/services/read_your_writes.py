"""Read your writes: before a query, wait until the read models it uses have applied `after`.

`after` is the position token a publish returned (topic:partition:offset). The wait is asyncio's
(query/consistency.py: short looks in a worker thread, asyncio sleeps between them), so waiting
callers hold no thread. Two tokens can never be applied, and waiting them out would end in a
"retry later" that is a lie: one that is no position of this namespace's log (InvalidInput), and
one past the end of its partition, which no publish returned (PositionPastEnd). The log's end is
asked only after the wait ran out: a real token is applied before that.
"""
from __future__ import annotations

import asyncio

from memstream.bus import Position
from memstream.errors import InvalidInput, PositionPastEnd, Timeout
from query.consistency import SOURCES, wait_until_applied_async

# Which read models (projectors) each query reads.
RECALL_READS = ("pgvector-items",)          # graph expansion uses memory_links, kept by pgvector-items
PREFERENCE_READS = ("kv-preferences",)
PROFILE_READS = RECALL_READS + PREFERENCE_READS
TASK_READS = ("task-buffers",)
SESSION_READS = ("session-windows",)
RELATION_READS = ("pg-relations",)
CONTEXT_READS = PROFILE_READS + SESSION_READS + TASK_READS   # query/context.py: every slot


def log_topics(settings) -> set[str]:
    """The topics a publish in this namespace returns positions of."""
    return {settings.topic(t) for t in SOURCES}


async def wait_for(backend, after: str | None, reads: tuple[str, ...], wait_s: float) -> None:
    """Return once every read model in `reads` has applied `after` (at once without one); Timeout
    after `wait_s` (at most MEMSTREAM_MAX_WAIT_S)."""
    if not after:
        return
    settings = backend.settings
    pos = Position.parse(after)
    topics = log_topics(settings)
    if pos.topic not in topics or not 0 <= pos.partition < settings.partitions:
        raise InvalidInput(f"after: {after!r} is not a position in this namespace's log (a token from "
                           f"publishing here: one of {', '.join(sorted(topics))}, partition "
                           f"0..{settings.partitions - 1})")
    try:
        await wait_until_applied_async(backend.models, after, reads, timeout=min(wait_s, settings.max_wait_s))
    except Timeout:
        if await asyncio.to_thread(backend.log_ends.is_past_end, pos):
            raise PositionPastEnd(f"after: {after!r} is past the end of the log: no publish returned it") from None
        raise
