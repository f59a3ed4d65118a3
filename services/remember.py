"""Remember: publish what happens (conversation turns, task steps, a task's start and finish).

Each returns the record's Position; its token, passed as `after` to a read, reads this write.
The SDK checks the input contract (ids, content, event time) and seals the content with the
user's key; an erased user has no key any more (UserErased). Publishing waits for the broker's
acknowledgement in a worker thread, so an event loop never blocks on it.
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from services.access import Caller


async def turn(backend, caller: Caller, user: str, session: str, role: str, content: str, *,
               task: str | None = None, at: datetime | None = None):
    return await asyncio.to_thread(backend.client.record_turn, caller.internal(user), session, role, content,
                                   task=task, at=at)


async def step(backend, caller: Caller, user: str, task: str, content: str, *, status: str = "ok",
               kind: str = "step", session: str | None = None, at: datetime | None = None):
    return await asyncio.to_thread(backend.client.record_step, caller.internal(user), task, content, status=status,
                                   kind=kind, session=session, at=at)


async def start_task(backend, caller: Caller, user: str, task: str, *, session: str | None = None, goal: str = "",
                     at: datetime | None = None):
    """task.started: the task's step buffer starts over."""
    return await asyncio.to_thread(backend.client.start_task, caller.internal(user), task, session=session,
                                   goal=goal, at=at)


async def finish_task(backend, caller: Caller, user: str, task: str, *, status: str = "succeeded",
                      at: datetime | None = None):
    return await asyncio.to_thread(backend.client.finish_task, caller.internal(user), task, status=status, at=at)
