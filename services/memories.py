"""A user's memories and preferences as lists (the CLI), and browsing them (the console): by
status with counts, the caller's tenant's users, the memory graph. Reading is not recalling:
nothing here publishes memory.recalled. `as_of` reads what memory held then (query/as_of.py).

Memories as a resource (the HTTP API's /v1/memories and /v1/users/{user}/memories; issue 25):
adding them (as turns to extract from, or memory.stated to keep as stated: either way a fact the
memory processor decides), batches of turns with agent_id / run_id / metadata, one page of a user's
memories under filters compiled to SQL (projections/memory_filters.py), one memory, its history,
and editing one (a memory.stated with `edits`: the memory processor makes it a new version).
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from typing import Any

from services.as_of import read_as_of
from adapters.privacy.tenants import DEFAULT_TENANT, NotYours, externalize, internal_user
from services.access import Caller, owned
from services.read_your_writes import RECALL_READS, wait_for
from projections import memory_filters, queries
from projections.memory_filters import CURSOR_PATTERN  # noqa: F401  (the API's cursor parameter)
from query import browse
from schemas.events import MemoryStated, TurnRecorded
from schemas.limits import check_content, check_event_time

ADD_SESSION = "memories"   # the session of turns and statements added through /v1/memories without one
FLOAT_DIGITS = 6           # answers round floats: a real column read back is float32 noise (0.699999988…)


async def listed(backend, caller: Caller, user: str, limit: int = 100, as_of: datetime | None = None) -> list[dict]:
    """The user's memory items, oldest first."""
    internal = caller.internal(user)
    if as_of is not None:
        from query import as_of as past
        from replay.timetravel import memories_as_of
        return await read_as_of(backend, lambda: past.memories(backend.models, internal, as_of, limit),
                                lambda: memories_as_of(backend.settings, internal, as_of, limit=limit,
                                                       keys=backend.client.keys))
    return await asyncio.to_thread(queries.memories, backend.settings, internal, limit)


async def preference_rows(backend, caller: Caller, user: str, as_of: datetime | None = None) -> list[dict]:
    """The key-value preference table, one row per key (with its version and the memory behind it)."""
    internal = caller.internal(user)
    if as_of is not None:   # from the preference history: one indexed read, no replay (issue 26)
        return await asyncio.to_thread(queries.preferences_as_of, backend.settings, internal, as_of)
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


# -- memories as a resource ---------------------------------------------------------------------

def _publish_all(backend, items: list[tuple[str, Any, Any]]) -> list:
    """Publish (internal user, event data, at) in order; each input-contract check first, so a batch
    with a bad item publishes nothing. Positions in order."""
    settings, client = backend.settings, backend.client
    for _user, data, at in items:
        check_content(data.content, "content", settings.max_content_chars)
        check_event_time(at, settings.max_future_skew_s)
    sent = [client.publish_nowait("turns", data, user=user, at=at) for user, data, at in items]
    return [f.result(timeout=30) for f in sent]


def _turn(caller: Caller, t: dict) -> tuple[str, Any, Any]:
    data = TurnRecorded(session=t["session"], task=t.get("task"), role=t["role"], content=t["content"],
                        agent_id=t.get("agent_id"), run_id=t.get("run_id"), metadata=t.get("metadata"))
    return caller.internal(t["user"]), data, t.get("at")


async def record_turns(backend, caller: Caller, turns: list[dict]) -> list:
    """Turns (each a dict of TurnRecorded's fields, `user`, `at`), published in order: their Positions."""
    items = [_turn(caller, t) for t in turns]
    return await asyncio.to_thread(_publish_all, backend, items)


async def add(backend, caller: Caller, user: str, *, messages: list[dict], infer: bool = True,
              category: str | None = None, importance: float | None = None, agent_id: str | None = None,
              run_id: str | None = None, metadata: dict | None = None, session: str | None = None,
              at: datetime | None = None) -> list:
    """Add memories directly: with `infer`, each message is a turn to extract from (user messages
    are extracted, the others kept in the session window, as any turn); without it, each message's
    content is a memory.stated, kept as stated (one fact each). Positions in order."""
    internal = caller.internal(user)
    session = session or ADD_SESSION
    scope = {"agent_id": agent_id, "run_id": run_id, "metadata": metadata}
    items: list[tuple[str, Any, Any]] = []
    for m in messages:
        if infer:
            items.append((internal, TurnRecorded(session=session, role=m.get("role", "user"), content=m["content"],
                                                 **scope), at))
        else:
            items.append((internal, MemoryStated(content=m["content"], category=category, importance=importance,
                                                 session=session, **scope), at))
    return await asyncio.to_thread(_publish_all, backend, items)


def shaped(row: dict) -> dict:
    """A memory item as the API answers it: times in ISO 8601, floats rounded."""
    out = dict(row)
    out["importance"] = round(float(row["importance"]), FLOAT_DIGITS)
    out["tags"] = list(row.get("tags") or [])
    for k in ("created_at", "updated_at", "last_accessed_at"):
        if k in out:
            out[k] = None if out[k] is None else out[k].isoformat()
    return out


STATUSES = {"active": ("active",), "archived": ("archived", "expired"), "superseded": ("outdated",),
            "merged": ("merged", "deduped"), "all": None}


async def page(backend, caller: Caller, user: str, *, status: str = "active", filters: Any = None,
               category: str | None = None, agent_id: str | None = None, run_id: str | None = None,
               created_after: datetime | None = None, created_before: datetime | None = None,
               updated_after: datetime | None = None, updated_before: datetime | None = None,
               cursor: str | None = None, limit: int = 50, after: str | None = None, wait_s: float = 5.0) -> dict:
    """One page of the user's memories, oldest first: {"memories": [...], "next_cursor": str | None}.
    The simple parameters and `filters` (Mem0-style JSON) are ANDed, all in one SQL statement."""
    internal = caller.internal(user)
    if isinstance(filters, str):
        filters = memory_filters.parse_filter_text(filters)
    simple: list[dict] = []
    if STATUSES[status] is not None:
        simple.append({"status": {"in": list(STATUSES[status])}})
    for field, value in (("category", category), ("agent_id", agent_id), ("run_id", run_id)):
        if value is not None:
            simple.append({field: value})
    for field, op, value in (("created_at", "gte", created_after), ("created_at", "lt", created_before),
                             ("updated_at", "gte", updated_after), ("updated_at", "lt", updated_before)):
        if value is not None:
            simple.append({field: {op: value}})
    if filters is not None:
        simple.append(filters)
    where, params = memory_filters.compile_filter({"and": simple} if simple else None)
    last = memory_filters.decode_cursor(cursor) if cursor else None
    await wait_for(backend, after, RECALL_READS, wait_s, caller)
    rows = await asyncio.to_thread(queries.list_memories, backend.models, internal, where, params, last, limit)
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = memory_filters.encode_cursor(rows[-1]["created_at"], rows[-1]["memory_id"]) if more and rows else None
    return {"user": user, "memories": [shaped(r) for r in rows], "next_cursor": nxt}


async def one(backend, caller: Caller, user: str, memory_id: str, *, after: str | None = None,
              wait_s: float = 5.0) -> dict:
    """One memory of the user; another user's (memory ids are global), or none, is NotYours (404)."""
    internal = caller.internal(user)
    await wait_for(backend, after, RECALL_READS, wait_s, caller)
    row = await asyncio.to_thread(queries.get_memory, backend.models, internal, memory_id)
    if row is None:
        raise NotYours("no such memory")
    return {"user": user, **shaped(row)}


_UNSET: Any = object()   # a field the edit does not change (None is a value: `metadata: null` clears it)


async def edit(backend, caller: Caller, user: str, memory_id: str, *, content: str | None = None,
               category: str | None = None, importance: float | None = None, metadata: Any = _UNSET,
               at: datetime | None = None) -> dict:
    """Edit one active memory of the user as a new version: publish a memory.stated with `edits`,
    complete (the fields not given are the memory's own), which the memory processor decides —
    the new memory created, the old one superseded (reason "edited") — if the memory is still
    active then. Answers the statement's position and `memory_id`, the id of the new version.

    Another user's memory (ids are global), or none, is NotYours (404); one that is not active
    (outdated, merged, archived) is NotActive (409): edit its active version."""
    from kernel.errors import NotActive
    from kernel.ids import stated_fact_id, uuid7
    internal = caller.internal(user)
    # 1. The current version, from the read model: the fields the caller leaves out are its own,
    #    so the statement is a whole memory (the processor never reads the read model).
    row = await asyncio.to_thread(queries.get_memory, backend.models, internal, memory_id)
    if row is None:
        raise NotYours("no such memory")
    if row["status"] != "active":
        newer = f" (superseded by {row['superseded_by']})" if row.get("superseded_by") else ""
        raise NotActive(f"memory {memory_id} is {row['status']}{newer}: only an active memory can be edited")
    data = MemoryStated(
        content=row["content"] if content is None else content,
        category=row["category"] if category is None else category,
        importance=round(float(row["importance"]), FLOAT_DIGITS) if importance is None else importance,
        session=row.get("session"), agent_id=row.get("agent_id"), run_id=row.get("run_id"),
        metadata=row.get("metadata") if metadata is _UNSET else metadata, edits=memory_id)
    check_content(data.content, "content", backend.settings.max_content_chars)
    check_event_time(at, backend.settings.max_future_skew_s)
    # 2. The statement's id is chosen here, so the new version's id (its fact's: the fact creates
    #    the memory) is known before the pipeline decides it (kernel/ids.py stated_fact_id).
    event_id = uuid7(at)
    pos = await asyncio.to_thread(
        lambda: backend.client.publish_nowait("turns", data, user=internal, at=at, id=event_id).result(timeout=30))
    return {**pos.as_dict(), "memory_id": stated_fact_id(event_id)}


HISTORY_TYPES = ("memory.created", "memory.reinforced", "memory.superseded", "memory.merged", "memory.deduped",
                 "memory.decayed", "memory.expired", "memory.revived", "memory.summarized", "memory.forgotten")


def _version(e: dict, memory_id: str) -> dict:
    """One event of a memory's life as a version: what it set and what caused it."""
    d, c = e.get("data") or {}, e.get("content")
    content = c.get("content") if isinstance(c, dict) else None
    cause = e["causes"][0] if e.get("causes") else None
    out = {"event_id": e["event_id"], "type": e["type"], "time": e["time"], "summary": e["summary"],
           "caused_by": None if cause is None else {"event_id": cause["event_id"], "type": cause["type"],
                                                    "summary": cause["summary"]}}
    if content is not None and d.get("memory_id", memory_id) == memory_id:
        out["content"] = content
    for k in ("category", "importance", "superseded_by", "retired_id", "reason"):
        if d.get(k) is not None:
            out[k] = round(d[k], FLOAT_DIGITS) if isinstance(d[k], float) else d[k]
    return out


async def history(backend, caller: Caller, user: str, memory_id: str, *, after: str | None = None,
                  wait_s: float = 5.0) -> dict:
    """The memory's versions, oldest first: every event that created or changed it and what caused
    each (the audit index and the log: replay/audit.py), for a memory of a user the caller reaches
    (memory:read suffices: it is the caller's own memory)."""
    from replay.audit import NotFound, memory_audit, memory_user
    internal = caller.internal(user)
    settings = backend.settings
    await wait_for(backend, after, RECALL_READS + ("audit-index",), wait_s, caller)
    if await asyncio.to_thread(memory_user, settings, memory_id) != internal:
        raise NotYours("no such memory")
    owned(caller, internal)
    try:
        life = await asyncio.to_thread(memory_audit, settings, memory_id, content=True, depth=0)
    except NotFound:
        raise NotYours("no such memory") from None
    versions = [_version(e, memory_id) for e in life["events"] if e["type"] in HISTORY_TYPES]
    origin = [{"event_id": e["event_id"], "type": e["type"], "time": e["time"], "summary": e["summary"]}
              for e in life["origin"]]
    return externalize({"user": internal, "memory_id": memory_id, "status": life["status"], "versions": versions,
                        "origin": origin, "parents": [p.get("memory_id") for p in life["parents"]]}, caller)
