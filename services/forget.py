"""Forgetting on request: hard deletes recorded as events (the log itself is never rewritten).

- `forget memory ID --user U` publishes `memory.forgotten` naming the memory and every memory
  merged or deduped into it (resolved once, here, from the pgvector read model: their content
  lives on in it). Every projection deletes them (pgvector rows, the preference versions they
  held, Neo4j nodes with their edges, their audit rows except the record); the memory processor
  drops them from its window and ledger, so their edges stop counting towards in-degree.
- `forget user U` publishes `user.forgotten`: everything memory learned about the user goes
  (memories, preferences, graph, audit rows of their facts and memory events, processor state).
  Unlike `erase user` (crypto-shredding: `user.erased` + deleting the data key), the key stays:
  the user's short-term session windows and task buffers remain readable, and new turns build
  new memory. Use erasure when nothing of the user may remain readable anywhere.
- forgetting a session (DELETE /v1/users/{user}/sessions/{session}, a LangChain history's
  clear()) publishes a `memory.forgotten` naming every memory learned in the session (the
  read model's `session` column, any status), then `session.forgotten`: the session window drops
  what was said in it so far, and its summary. Memories still being extracted from its last turns
  when it is cleared are not in the read model yet, so they stay (forget them one by one); the
  session summarizer keeps its own state, so a later summary of the same session, once new turns
  overflow its window, may still fold in what was said before the clear.
All replay: the event sits in the log after what it deletes, so a rebuild deletes it again.
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from adapters.bus import EventProducer, Position, ensure_topics
from kernel.config import Settings
from adapters.kafka_auth import CONTROL
from kernel.errors import MemstreamError
from adapters.privacy.keystore import KeyStore
from adapters.privacy.tenants import NotYours
from services.access import OPERATOR, Caller
from schemas.codec import encode, make_envelope
from schemas.events import EventData, MemoryForgotten, SessionForgotten, UserForgotten

PRODUCER = "operator/1"
PAGE = 500   # memory ids read per query when resolving a session's memories


def _publish(settings: Settings, user: str, data: EventData, at: datetime | None) -> Position:
    return _publish_all(settings, user, [data], at)[-1]


def _publish_all(settings: Settings, user: str, events: list[EventData], at: datetime | None) -> list[Position]:
    """Publish the user's control events in order (one partition: the user's), each after the last is stored."""
    ensure_topics(settings)
    keys = KeyStore(settings)
    producer = EventProducer(settings, CONTROL)   # the memory topic: an operator's write, as the control principal (it may write only that topic) (the API checks the caller's scope)
    try:
        out = []
        for data in events:
            env = make_envelope(data, user=user, time=at, producer=PRODUCER)
            out.append(producer.send(settings.topic("memory"), user, encode(env, keys)).result(timeout=30))
        return out
    finally:
        producer.close()
        keys.close()


class NoSuchMemory(MemstreamError):
    """The user has no such memory in the read model (or it is not projected yet)."""


def forget_memory(settings: Settings, user: str, memory_id: str, requested_by: str = "operator", reason: str = "",
                  at: datetime | None = None, force: bool = False) -> tuple[Position, list[str]]:
    """Publish memory.forgotten for the memory and its merged/deduped parents; returns (position, ids)."""
    from projections.queries import memory_family
    ids = memory_family(settings, user, memory_id)
    if not ids:
        if not force:
            raise NoSuchMemory(f"no memory {memory_id} of user {user} in the read model "
                               "(not projected yet? --force publishes anyway)")
        ids = [memory_id]
    data = MemoryForgotten(memory_id=memory_id, memory_ids=ids, requested_by=requested_by, reason=reason)
    return _publish(settings, user, data, at), ids


def forget_user(settings: Settings, user: str, requested_by: str = "operator", reason: str = "",
                at: datetime | None = None) -> Position:
    return _publish(settings, user, UserForgotten(requested_by=requested_by, reason=reason), at)


def session_memories(models, user: str, session: str) -> list[str]:
    """Every memory of the user learned in the session, whatever its status, oldest first (the
    memories filter's `session` condition, paged through)."""
    from projections import memory_filters, queries
    where, params = memory_filters.compile_filter({"session": session})
    ids: list[str] = []
    last = None
    while True:
        rows = queries.list_memories(models, user, where, params, last, PAGE)
        ids += [r["memory_id"] for r in rows[:PAGE]]
        if len(rows) <= PAGE:
            return ids
        last = (rows[PAGE - 1]["created_at"], rows[PAGE - 1]["memory_id"])


def forget_session(settings: Settings, user: str, session: str, memory_ids: list[str], requested_by: str = "operator",
                   reason: str = "", at: datetime | None = None) -> Position:
    """Publish memory.forgotten for `memory_ids` (when any), then session.forgotten; the latter's Position."""
    events: list[EventData] = []
    if memory_ids:
        events.append(MemoryForgotten(memory_id=memory_ids[0], memory_ids=memory_ids, requested_by=requested_by,
                                      reason=reason))
    events.append(SessionForgotten(session=session, requested_by=requested_by, reason=reason))
    return _publish_all(settings, user, events, at)[-1]


async def memory(backend, caller: Caller, user: str, memory_id: str, *, requested_by: str, reason: str = "",
                 at: datetime | None = None, force: bool = False) -> dict:
    """Forget one memory of a user the caller can reach: {position..., "memory_ids": what went}.
    A caller with a key asks for its own users' memories only, so a memory it cannot reach (another
    tenant's, or none) is NotYours, the same answer either way; the operator is told which (and may
    `force` a memory the read model does not know yet)."""
    internal = caller.internal(user)
    try:
        pos, ids = await asyncio.to_thread(forget_memory, backend.settings, internal, memory_id,
                                           requested_by=requested_by, reason=reason, at=at, force=force)
    except NoSuchMemory:
        if caller is OPERATOR:
            raise
        raise NotYours("no such memory") from None
    return {**pos.as_dict(), "memory_ids": ids}


async def user(backend, caller: Caller, user: str, *, requested_by: str, reason: str = "",
               at: datetime | None = None):
    """Forget everything memory learned about the user (user.forgotten); returns its Position."""
    return await asyncio.to_thread(forget_user, backend.settings, caller.internal(user), requested_by=requested_by,
                                   reason=reason, at=at)


async def session(backend, caller: Caller, user: str, session: str, *, requested_by: str, reason: str = "",
                  at: datetime | None = None) -> dict:
    """Clear one conversation session of a user the caller can reach: its window and summary, and
    the memories learned in it. {position of session.forgotten..., "memory_ids": what went}; a
    session with nothing in it is cleared all the same (idempotent: the answer is a new position)."""
    from schemas.limits import check_content, check_id
    internal = caller.internal(user)
    check_id(session, "session")
    check_content(reason, "reason")
    ids = await asyncio.to_thread(session_memories, backend.models, internal, session)
    pos = await asyncio.to_thread(forget_session, backend.settings, internal, session, ids,
                                  requested_by=requested_by, reason=reason, at=at)
    return {**pos.as_dict(), "memory_ids": ids}
