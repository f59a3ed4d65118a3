"""Recall: the user's memories most relevant to a query (query/recall.py ranks them).

A recall is a use of the memories it returns: one `memory.recalled` per call is published (fire
and forget: the answer never waits for it), from which the memory processor refreshes their access
and revives archived ones. Recalling as of a past time (`as_of`, query/as_of.py) reads what
memory held then; reading the past is not a use, so nothing is published.
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from services.as_of import read_as_of
from services.access import Caller
from services.read_your_writes import RECALL_READS, wait_for
from query.recall import RecallRequest, recall as ranked, recalled_event


async def recall(backend, caller: Caller, user: str, query: str, *, channel: str, k: int = 10,
                 categories: list[str] | None = None, tags: list[str] | None = None,
                 max_age_hours: float | None = None, min_score: float | None = None, expand: bool = True,
                 after: str | None = None, wait_s: float = 5.0, as_of: datetime | None = None,
                 filters: dict | None = None) -> list:
    """The hits (query.recall.RecallHit), best first. `channel` names the entry point in the
    memory.recalled event (api, mcp, cli). `filters`: Mem0-style (projections/memory_filters.py),
    run in SQL with the rest of the query."""
    internal = caller.internal(user)
    await wait_for(backend, after, RECALL_READS, wait_s, caller)
    req = RecallRequest(internal, query, k, categories, tags, max_age_hours, min_score, expand, filters=filters)
    if as_of is not None:
        from query import as_of as past
        from replay.timetravel import recall_as_of
        return await read_as_of(backend, lambda: past.recall(backend.models, req, as_of),
                                lambda: recall_as_of(backend.models, req, as_of, keys=backend.client.keys))
    hits = await asyncio.to_thread(ranked, backend.models, req)
    event = recalled_event(hits, channel)
    if event is not None:
        backend.client.publish_nowait("memory", event, user=internal)
    return hits
