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
Both replay: the event sits in the log after what it deletes, so a rebuild deletes it again.
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from memstream.bus import EventProducer, Position, ensure_topics
from memstream.config import Settings
from memstream.kafka_auth import CONTROL
from memstream.errors import MemstreamError
from memstream.privacy.keystore import KeyStore
from memstream.privacy.tenants import NotYours
from memstream.services.access import OPERATOR, Caller
from schemas.codec import encode, make_envelope
from schemas.events import EventData, MemoryForgotten, UserForgotten

PRODUCER = "operator/1"


def _publish(settings: Settings, user: str, data: EventData, at: datetime | None) -> Position:
    ensure_topics(settings)
    keys = KeyStore(settings)
    producer = EventProducer(settings, CONTROL)   # the memory topic: an operator's write, as the control principal (it may write only that topic) (the API checks the caller's scope)
    try:
        env = make_envelope(data, user=user, time=at, producer=PRODUCER)
        return producer.send(settings.topic("memory"), user, encode(env, keys)).result(timeout=30)
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
