"""Erase a user: crypto-shredding (adapters/erasure.py: `user.erased` published, then their data
key deleted). What follows is the storage scrub (memstream/app/storage_scrub.py), which the entry
point runs: in the background for the HTTP API, to completion for the CLI."""
from __future__ import annotations

import asyncio

from adapters.erasure import erase_user
from services.access import Caller


async def erase(backend, caller: Caller, user: str, *, requested_by: str):
    """Returns the Position of the `user.erased` event (a scrub waits until it is applied)."""
    return await asyncio.to_thread(erase_user, backend.settings, caller.internal(user), requested_by=requested_by)
