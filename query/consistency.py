"""Read-your-writes: wait until the read models a query uses have applied a publish's position."""
from __future__ import annotations

import asyncio
import time

from psycopg import sql

from kernel import watermarks
from adapters.bus import Position
from kernel.errors import Timeout
from adapters.resilience import Backoff
from projections.graph_generation import RESOLVE
from query.store import ReadModels

# Which projectors each query reads, and which topics each projector consumes directly.
PROJECTOR_TOPICS = {
    "kv-preferences": ("memory",), "pgvector-items": ("memory",), "neo4j-graph": ("memory",),
    "task-buffers": ("tasks",), "session-windows": ("turns",), "pg-relations": ("memory",),
}


def _stored(models: ReadModels, projector: str, topic: str, partition: int) -> int:
    if projector == "neo4j-graph":
        # positions are kept per graph generation (projections/graph_generation.py)
        with models.graph.session() as s:
            rec = s.run(RESOLVE + "MATCH (p:ProjectorPosition {key: gen + $k}) RETURN p.next_offset AS o",
                        ns=models.settings.namespace, k=f"|{projector}|{topic}|{partition}").single()
        return rec["o"] if rec else 0
    with models.pool.connection() as conn:
        row = conn.execute(sql.SQL("SELECT next_offset FROM {s}.projector_positions WHERE projector = %s AND topic = %s "
                                   "AND partition = %s").format(s=models.schema), (projector, topic, partition)).fetchone()
    return row[0] if row else 0


# Sources whose effects reach the memory topic behind watermarks (extractor → memory processor).
WATERMARKED_SOURCES = frozenset({"turns", "facts"})
SOURCES = frozenset({"turns", "facts", "tasks", "memory"})


def _targets(pos: Position, projectors: tuple[str, ...]):
    """The (projector, topic, partition) positions that must pass `pos` before a read sees it.

    A projector that reads the token's topic waits for the record itself; one that reads the
    memory topic waits for the watermark of a turn or fact (the decisions it caused); a projector
    holding nothing derived from that topic (task steps never reach the memory topic) is not
    waited for: it would never apply the position."""
    logical = pos.topic.rsplit(".", 1)[-1]
    for projector in projectors:
        reads = PROJECTOR_TOPICS.get(projector)
        if reads is not None and logical in reads:
            yield projector, pos.topic, pos.partition            # it reads that topic itself
        elif (reads is None or logical not in SOURCES
              or (logical in WATERMARKED_SOURCES and "memory" in reads)):
            # it sees the effects (an unknown topic's position is never applied: the caller times out)
            yield (projector, *watermarks.position_key(pos.topic, pos.partition))


def wait_until_applied(models: ReadModels, token: str, projectors: tuple[str, ...], timeout: float = 5.0) -> float:
    """Block until every projector has applied `token` (topic:partition:offset); returns seconds waited."""
    pos = Position.parse(token)
    started = time.monotonic()
    for projector, topic, partition in _targets(pos, projectors):
        while _stored(models, projector, topic, partition) <= pos.offset:
            if time.monotonic() - started > timeout:
                raise Timeout(f"{projector} has not applied {token} after {timeout:.1f}s; retry later")
            time.sleep(0.005)
    return time.monotonic() - started


async def wait_until_applied_async(models: ReadModels, token: str, projectors: tuple[str, ...],
                                   timeout: float = 5.0) -> float:
    """wait_until_applied for an event loop (the API): each look at a position is a short call in a
    worker thread, the waiting between looks is asyncio's, so a thousand waiting requests hold no
    thread and a shutdown cancels them. Polls back off from 5 ms to 100 ms (the one retry policy,
    adapters.resilience.Backoff)."""
    pos = Position.parse(token)
    started = time.monotonic()
    backoff = Backoff(base=0.005, cap=0.1)
    for projector, topic, partition in _targets(pos, projectors):
        while await asyncio.to_thread(_stored, models, projector, topic, partition) <= pos.offset:
            if time.monotonic() - started > timeout:
                raise Timeout(f"{projector} has not applied {token} after {timeout:.1f}s; retry later")
            await asyncio.sleep(backoff.next())
    return time.monotonic() - started
