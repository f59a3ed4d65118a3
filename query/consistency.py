"""Read-your-writes: wait until the read models a query uses have applied a publish's position."""
from __future__ import annotations

import time

from psycopg import sql

from memstream import watermarks
from memstream.bus import Position
from memstream.errors import Timeout
from projections.graph_generation import RESOLVE
from query.store import ReadModels

# Which projectors each query reads, and which topics each projector consumes directly.
PROJECTOR_TOPICS = {
    "kv-preferences": ("memory",), "pgvector-items": ("memory",), "neo4j-graph": ("memory",),
    "task-buffers": ("tasks",), "session-windows": ("turns",),
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


def wait_until_applied(models: ReadModels, token: str, projectors: tuple[str, ...], timeout: float = 5.0) -> float:
    """Block until every projector has applied `token` (topic:partition:offset); returns seconds waited."""
    pos = Position.parse(token)
    logical = pos.topic.rsplit(".", 1)[-1]
    started = time.monotonic()
    for projector in projectors:
        if logical in PROJECTOR_TOPICS.get(projector, ()):
            topic, partition = pos.topic, pos.partition            # it reads that topic itself
        else:
            topic, partition = watermarks.position_key(pos.topic, pos.partition)  # it sees the effects
        while _stored(models, projector, topic, partition) <= pos.offset:
            if time.monotonic() - started > timeout:
                raise Timeout(f"{projector} has not applied {token} after {timeout:.1f}s; retry later")
            time.sleep(0.005)
    return time.monotonic() - started
