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

from datetime import datetime

from memstream.bus import EventProducer, Position, ensure_topics
from memstream.config import Settings
from memstream.kafka_auth import CONTROL
from memstream.errors import MemstreamError
from memstream.privacy.keystore import KeyStore
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


def forget_for_caller(settings: Settings, user: str, memory_id: str, requested_by: str, reason: str = "") -> dict:
    """forget_memory for the HTTP API and the MCP server: `user` is the caller's internal id, and a
    memory they cannot reach (another tenant's, or none) is NotYours, the same answer either way."""
    from memstream.privacy.tenants import NotYours
    try:
        pos, ids = forget_memory(settings, user, memory_id, requested_by=requested_by, reason=reason)
    except NoSuchMemory:
        raise NotYours("no such memory") from None
    return {**pos.as_dict(), "memory_ids": ids}
