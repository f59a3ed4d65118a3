"""Read your writes: before a query, wait until the read models it uses have applied `after`.

`after` is the position token a publish returned (topic:partition:offset). The wait is asyncio's
(query/consistency.py: short looks in a worker thread, asyncio sleeps between them), so waiting
callers hold no thread. Two tokens can never be applied, and waiting them out would end in a
"retry later" that is a lie: one that is no position of this namespace's log (InvalidInput), and
one past the end of its partition, which no publish returned (PositionPastEnd). The log's end is
asked only after the wait ran out: a real token is applied before that.

A tenant may have at most MEMSTREAM_MAX_WAITS_PER_TENANT waits in flight in one process (#28):
each wait polls the read models, and 100 hanging waits of one tenant doubled another tenant's
recall latency; one more is refused at once (TooManyWaits, HTTP 429), never queued.
"""
from __future__ import annotations

import asyncio

from adapters.bus import Position
from kernel.errors import InvalidInput, PositionPastEnd, Timeout, TooManyWaits
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


# Waits in flight per tenant in this process (one event loop: no lock needed).
_waiting: dict[str, int] = {}


async def wait_for(backend, after: str | None, reads: tuple[str, ...], wait_s: float, caller=None) -> None:
    """Return once every read model in `reads` has applied `after` (at once without one); Timeout
    after `wait_s` (at most MEMSTREAM_MAX_WAIT_S); TooManyWaits when `caller`'s tenant already has
    its share waiting."""
    if not after:
        return
    tenant = getattr(caller, "tenant", "")
    if _waiting.get(tenant, 0) >= backend.settings.max_waits_per_tenant:
        raise TooManyWaits(f"too many reads waiting for their `after` position ({backend.settings.max_waits_per_tenant} "
                           "at once per tenant): retry in a moment")
    _waiting[tenant] = _waiting.get(tenant, 0) + 1
    try:
        await _wait(backend, after, reads, wait_s)
    finally:
        _waiting[tenant] -= 1
        if not _waiting[tenant]:
            del _waiting[tenant]


async def _wait(backend, after: str, reads: tuple[str, ...], wait_s: float) -> None:
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
