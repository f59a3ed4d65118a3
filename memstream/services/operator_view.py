"""What an operator sees beside memory: the dead-letter topic and the projectors' positions
(query/operator_view.py reads them). Both need the scope admin; a tenant's admin sees only its
own users' dead letters."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

from memstream.privacy.tenants import DEFAULT_TENANT
from memstream.services.access import Caller, require
from query import operator_view


async def dead_letters(backend, caller: Caller, per_partition: int = 100) -> list[dict]:
    """The newest `per_partition` dead letters of each partition the caller may see, newest first,
    each with `time` (ISO 8601, or None) and `user` (the caller's id for it, or None)."""
    require(caller, "admin")
    rows = []
    for d in await asyncio.to_thread(operator_view.dead_letters, backend.settings, per_partition):
        # one without a usable user key (nobody's) only the operator's tenant, default, sees
        key = d["key"] or ""
        if (key and caller.owns(key)) or (not key and caller.tenant == DEFAULT_TENANT and caller.user is None):
            when = datetime.fromtimestamp(d["time_ms"] / 1000, timezone.utc).isoformat() if d["time_ms"] else None
            rows.append({**d, "time": when, "user": caller.external(key) if key else None})
    return rows


async def positions(backend, caller: Caller) -> list[dict]:
    """Every projector's stored position per topic partition against the log end (`behind`)."""
    require(caller, "admin")
    return await asyncio.to_thread(operator_view.positions, backend.models)
