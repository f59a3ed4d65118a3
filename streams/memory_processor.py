"""The memory processor: fact.extracted → memory.created / preference.set, one writer per user.

Per-user working state lives in a changelog-backed faust table, sealed with the user's data key
(the changelog is a Kafka topic: plaintext there would outlive erasure). The processor also reads
`user.erased` from the memory topic to drop the user's state.
"""
from __future__ import annotations

import logging

import orjson

from memstream import watermarks
from memstream.config import Settings
from memstream.domain.memory_rules import Rules, UserState, decide
from memstream.errors import InvalidEvent
from memstream.ids import derived_id
from memstream.privacy.keystore import KeyStore
from schemas.codec import decode, encode, make_envelope, open_blob, seal_blob
from streams.app import DeadLetters, make_app, raw_topic

log = logging.getLogger("memstream.memory")
PRODUCER = "memory-processor/1"


def _peek_type(raw: bytes | None) -> str | None:
    try:
        return orjson.loads(raw).get("type") if raw else None
    except orjson.JSONDecodeError:
        return None


def build(settings: Settings):
    app = make_app("memory", settings)
    keys = KeyStore(settings)
    rules = Rules.from_settings(settings)
    facts_topic = settings.topic("facts")
    memory_topic = settings.topic("memory")
    inputs = app.topic(facts_topic, memory_topic, key_type=bytes, value_type=bytes,
                       key_serializer="raw", value_serializer="raw")
    memory = raw_topic(app, memory_topic)
    dead = DeadLetters(app, settings, "memory-processor", keys)
    # Keys and values are raw bytes (the app's serializers): the value is the sealed state.
    states = app.Table("user-state", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)

    def load_state(user: str) -> UserState:
        blob = states.get(user.encode())
        if blob is None:
            return UserState()
        opened = open_blob(keys, user, f"state:{user}", orjson.loads(blob))
        return UserState() if opened is None else UserState.from_dict(orjson.loads(opened))

    def save_state(user: str, state: UserState) -> None:
        sealed = seal_blob(keys, user, f"state:{user}", orjson.dumps(state.to_dict()))
        states[user.encode()] = orjson.dumps(sealed)

    @app.agent(inputs)
    async def process(stream):
        async for event in stream.events():
            msg = event.message
            mark = watermarks.parse(msg.headers)
            if mark is not None:
                # A source watermark: pass it on, in order, after this partition's decisions.
                if msg.topic == facts_topic:
                    await memory.send(value=b"", partition=msg.partition, headers=watermarks.header(*mark))
                continue
            if msg.topic == memory_topic:
                # Our own output comes back here; only erasure concerns the processor.
                if _peek_type(msg.value) == "user.erased" and msg.key:
                    states.pop(msg.key, None)
                continue
            try:
                fact = decode(msg.value, keys)
            except InvalidEvent as exc:
                await dead.send(event, exc)
                continue
            if fact.erased or fact.type != "fact.extracted":
                continue
            # 1. decide from the user's state (pure; event time only)
            state, decisions = decide(load_state(fact.user), fact.data, rules,
                                      lambda tag: derived_id(fact.id, tag))
            # 2. publish the decisions before saving state: if we crash in between, the fact is
            #    re-read and the same decisions (same ids) are published again — harmless.
            for d in decisions:
                env = make_envelope(d.data, user=fact.user, time=fact.time, id=derived_id(fact.id, d.tag),
                                    causation=fact.id, correlation=fact.correlation, producer=PRODUCER)
                await memory.send(key=fact.user.encode(), value=encode(env, keys))
            # 3. save state
            save_state(fact.user, state)

    return app
