"""Audit: a memory's whole life and a user's timeline (replay/audit.py reads them back from the
audit index and the log), in the caller's own user ids.

Memory ids are global, users are per tenant: a memory whose events are another tenant's (or
another user's than a bound key's) is as absent as one that never existed (NotYours). Decrypted
content needs the scope audit:content besides audit:read; without it a caller asks for the
clear fields alone (ids, types, times, positions).
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from kernel.errors import MissingScope
from adapters.privacy.tenants import NotYours, externalize
from services.access import Caller, owned
from replay.audit import NotFound, memory_audit, memory_user, user_timeline


def _content_allowed(caller: Caller, content: bool) -> None:
    if content and "audit:content" not in caller.scopes:
        raise MissingScope("audit:content", "this API key lacks the scope audit:content (needed for content=true; "
                                            "pass content=false for the clear fields alone)")


async def memory_life(backend, caller: Caller, memory_id: str, *, content: bool = True) -> dict:
    """The memory's events (each with its causation chain), its origin, parents, children and links;
    `user` is its owner, in the caller's ids."""
    _content_allowed(caller, content)
    settings = backend.settings
    owned(caller, await asyncio.to_thread(memory_user, settings, memory_id))
    try:
        life = await asyncio.to_thread(memory_audit, settings, memory_id, content=content,
                                         keys=backend.client.keys)
    except NotFound:
        raise NotYours("no such memory") from None
    return externalize(life, caller)


async def timeline(backend, caller: Caller, user: str, *, content: bool = False, limit: int = 1000,
                   since: datetime | None = None, until: datetime | None = None) -> dict:
    """Every indexed event of the user, oldest first."""
    _content_allowed(caller, content)
    internal = caller.internal(user)
    return externalize(await asyncio.to_thread(lambda: user_timeline(backend.settings, internal, content=content, keys=backend.client.keys,
                                                                     limit=limit, since=since, until=until)), caller)
