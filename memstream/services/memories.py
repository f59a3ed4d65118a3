"""A user's memories and preferences as lists (the CLI), and browsing them (the console): by
status with counts, the caller's tenant's users, the memory graph. Reading is not recalling:
nothing here publishes memory.recalled. `as_of` reads what memory held then (replay/timetravel.py).
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from memstream.privacy.tenants import DEFAULT_TENANT, internal_user
from memstream.services.access import Caller
from projections import queries
from query import browse


async def listed(backend, caller: Caller, user: str, limit: int = 100, as_of: datetime | None = None) -> list[dict]:
    """The user's memory items, oldest first."""
    internal = caller.internal(user)
    if as_of is not None:
        from replay.timetravel import memories_as_of
        return await asyncio.to_thread(memories_as_of, backend.settings, internal, as_of, limit=limit)
    return await asyncio.to_thread(queries.memories, backend.settings, internal, limit)


async def preference_rows(backend, caller: Caller, user: str, as_of: datetime | None = None) -> list[dict]:
    """The key-value preference table, one row per key (with its version and the memory behind it)."""
    internal = caller.internal(user)
    if as_of is not None:
        from replay.timetravel import preferences_as_of
        return await asyncio.to_thread(preferences_as_of, backend.settings, internal, as_of)
    return await asyncio.to_thread(queries.preferences, backend.settings, internal)


async def by_status(backend, caller: Caller, user: str, status: str = "all", category: str | None = None,
                    text: str | None = None, limit: int = 200) -> tuple[list[dict], dict[str, int]]:
    """(the memories matching the filters, newest first; counts per status filter: browse.STATUS_FILTERS)."""
    return await asyncio.to_thread(browse.memories, backend.models, caller.internal(user), status, category, text, limit)


async def users(backend, caller: Caller, limit: int = 200) -> list[dict]:
    """The users of the caller's tenant that have memories (its bound user alone for a bound key),
    most recently active first, each with `user`, the caller's own id for them."""
    if caller.user is not None:
        rows = await asyncio.to_thread(browse.users, backend.models, None, internal_user(caller.tenant, caller.user),
                                       limit)
    else:
        prefix = None if caller.tenant == DEFAULT_TENANT else caller.tenant + "/"
        rows = await asyncio.to_thread(browse.users, backend.models, prefix, None, limit)
    # every row checked again: an id the query matched by its shape alone is shown only if the caller owns it
    return [{**r, "user": caller.external(r["user_id"])} for r in rows if caller.owns(r["user_id"])]


async def graph(backend, caller: Caller, user: str, limit: int = 300) -> tuple[list[dict], list[dict]]:
    """(nodes oldest first, FOLLOWS / SIMILAR_TO edges) of the user's memory graph."""
    return await asyncio.to_thread(browse.graph, backend.models, caller.internal(user), limit)
