"""What an operator sees beside memory: the dead-letter topic and the projectors' positions
(query/operator_view.py reads them). Both need the scope admin.

A tenant's admin sees only its own users' dead letters. Projector positions are per namespace,
not per tenant: one partition holds every tenant's records, so its offsets and lag tell how much
all tenants write. They are the stack operator's alone (sees_stack): the CLI, or an admin key of
the tenant `default` bound to no user — the tenant `stack up`'s local admin key belongs to, whose
users are the ones from before tenants existed. Another tenant's admin is refused (MissingScope)."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

from kernel.errors import MissingScope
from adapters.privacy.tenants import DEFAULT_TENANT
from services.access import Caller, require
from query import operator_view


STACK_ONLY = ("replay status (every projector's position and lag) covers every tenant of the stack: only the "
              "stack's operator sees it (an admin key of the tenant default bound to no user)")


def sees_stack(caller: Caller) -> bool:
    """Whether the caller is the stack's operator: it may see what concerns every tenant at once."""
    return "admin" in caller.scopes and caller.tenant == DEFAULT_TENANT and caller.user is None


async def dead_letters(backend, caller: Caller, per_partition: int = 100) -> list[dict]:
    """The newest `per_partition` dead letters of each partition the caller may see, newest first,
    each with `time` (ISO 8601, or None) and `user` (the caller's id for it, or None)."""
    require(caller, "admin")
    rows = []
    for d in await asyncio.to_thread(operator_view.dead_letters, backend.settings, per_partition):
        # one without a usable user key (nobody's) only the operator's tenant, default, sees
        key = d["key"] or ""
        if (key and caller.owns(key)) or (not key and sees_stack(caller)):
            when = datetime.fromtimestamp(d["time_ms"] / 1000, timezone.utc).isoformat() if d["time_ms"] else None
            rows.append({**d, "time": when, "user": caller.external(key) if key else None})
    return rows


async def positions(backend, caller: Caller) -> list[dict]:
    """Every projector's stored position per topic partition against the log end (`behind`):
    the stack operator's alone (MissingScope for any other caller, admin or not)."""
    require(caller, "admin")
    if not sees_stack(caller):
        raise MissingScope("admin", STACK_ONLY)
    return await asyncio.to_thread(operator_view.positions, backend.models)
