"""Erase a user: crypto-shredding (adapters/erasure.py: `user.erased` published, then their data
key deleted), then a storage scrub asked of the pipeline (rewriting what held the user's rows,
dropping old WAL: memstream/app/storage_scrub.py, ScrubRequests), which needs the database owner
and so is no serving process's work. The CLI's `memstream erase user` runs the scrub itself."""
from __future__ import annotations

import asyncio

from adapters.erasure import erase_user, request_scrub
from services.access import Caller


async def erase(backend, caller: Caller, user: str, *, requested_by: str):
    """Returns the Position of the `user.erased` event (the scrub waits until it is applied)."""
    position = await asyncio.to_thread(erase_user, backend.settings, caller.internal(user), requested_by=requested_by)
    await asyncio.to_thread(request_scrub, backend.settings, position)
    return position
