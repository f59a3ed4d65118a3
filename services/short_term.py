"""Short-term memory: a task's ring buffer of steps and a session's window of recent turns."""
from __future__ import annotations

import asyncio

from services.access import Caller
from services.read_your_writes import SESSION_READS, TASK_READS, wait_for
from projections.queries import session_window, task_status, task_steps


async def steps(backend, caller: Caller, user: str, task: str, k: int = 20) -> list[dict]:
    """The task's newest k steps, oldest first."""
    return await asyncio.to_thread(task_steps, backend.settings, caller.internal(user), task, k)


async def task(backend, caller: Caller, user: str, task_id: str, k: int = 20, *, after: str | None = None,
               wait_s: float = 5.0) -> dict:
    """{"task": its start/finish (or None), "steps": its newest k steps}."""
    internal = caller.internal(user)
    await wait_for(backend, after, TASK_READS, wait_s, caller)
    settings = backend.settings
    return await asyncio.to_thread(lambda: {"task": task_status(settings, internal, task_id),
                                            "steps": task_steps(settings, internal, task_id, k)})


async def session(backend, caller: Caller, user: str, session_id: str, *, with_summary: bool = False,
                  after: str | None = None, wait_s: float = 5.0):
    """The session's window, oldest first; with_summary: {"messages", "summary"} (the rolling
    summary of what fell out of the window)."""
    internal = caller.internal(user)
    await wait_for(backend, after, SESSION_READS, wait_s, caller)
    return await asyncio.to_thread(session_window, backend.settings, internal, session_id, with_summary=with_summary)
