"""As-of reads (`as_of` on recall, profile, preferences, memories): indexed, or replayed within a budget.

Where the read models' versions hold the whole past (query/as_of.py: history_complete), an as-of
read is an indexed query like any other read (#26 item 6). A namespace projected before the
versions existed has a gap until pgvector-items is rebuilt; there the read replays the user's log
(replay/timetravel.py), and those replays are bounded:

Each one replays the user's history into a throw-away schema and graph generation
(replay/timetravel.py): seconds of CPU and a schema's DDL per request on a long history, so an
unbounded number of them is a cheap way to exhaust the server (#28: one took 49.2 s on a loaded
machine). A process runs at most MEMSTREAM_MAX_AS_OF_REPLAYS of them at once; one more is refused
at once (TooManyAsOf, HTTP 429 with Retry-After), never queued behind the others. Relations' as-of
is an indexed query (pg-relations keeps validity) and does not count here.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kernel.errors import TooManyAsOf

_running = 0   # one event loop per process: no lock needed


async def read_as_of(backend, indexed: Callable[[], Any], replay: Callable[[], Any]) -> Any:
    """indexed() where the versions hold the past, else replay() within the replay budget."""
    from query.as_of import history_complete
    if await asyncio.to_thread(history_complete, backend.models):
        return await asyncio.to_thread(indexed)
    return await replayed(backend.settings, replay)


async def replayed(settings, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """fn(*args, **kw) in a worker thread, within the process's budget of as-of replays."""
    global _running
    if _running >= settings.max_as_of_replays:
        raise TooManyAsOf(f"too many as-of reads replaying at once ({settings.max_as_of_replays} per process): "
                          "retry in a moment")
    _running += 1
    try:
        return await asyncio.to_thread(fn, *args, **kw)
    finally:
        _running -= 1
