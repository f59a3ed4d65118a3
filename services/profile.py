"""Profile: who the user is (identity, preferences, policies by category, and the key-value
preference table), now or as of a past time (query/as_of.py)."""
from __future__ import annotations

import asyncio
from datetime import datetime

from services.as_of import read_as_of
from services.access import Caller
from services.read_your_writes import PREFERENCE_READS, PROFILE_READS, wait_for
from query.profile import profile as current_profile


async def _profile(backend, internal: str, as_of: datetime | None) -> dict:
    if as_of is not None:
        from query import as_of as past
        from replay.timetravel import profile_as_of
        return await read_as_of(backend, lambda: past.profile(backend.models, internal, as_of),
                                lambda: profile_as_of(backend.settings, internal, as_of, keys=backend.client.keys))
    return await asyncio.to_thread(current_profile, backend.models, internal)


async def profile(backend, caller: Caller, user: str, *, after: str | None = None, wait_s: float = 5.0,
                  as_of: datetime | None = None) -> dict:
    internal = caller.internal(user)
    await wait_for(backend, after, PROFILE_READS, wait_s, caller)
    return await _profile(backend, internal, as_of)


async def preferences(backend, caller: Caller, user: str, *, after: str | None = None, wait_s: float = 5.0,
                      as_of: datetime | None = None) -> dict:
    """The profile's preference table alone (waits only for the preference projector)."""
    internal = caller.internal(user)
    await wait_for(backend, after, PREFERENCE_READS, wait_s, caller)
    return (await _profile(backend, internal, as_of))["preferences"]
