"""The memory processor: fact.extracted → memory decisions, one writer per user.

Per-user working state lives in a changelog-backed faust table, sealed with the user's data key
(the changelog is a Kafka topic: plaintext there would outlive erasure). Beside it, the user's
memory ledger (one compact entry per live memory, for decay and expiry; memstream/domain/ledger.py)
lives in a second table, one sealed value per ledger bucket, so a decision rewrites only the
buckets it touched.

Besides facts, the processor reads its own memory topic for the events that change its state:
  user.erased / user.forgotten  drop the user's state and ledger (erasure: session state too);
  memory.forgotten              the memories leave the window and ledger, their edges stop counting;
  memory.recalled               (published by the query side) refreshes access in the ledger;
  decay.ticked                  (one per partition, from `memstream ticker`) ages every user of that
                                partition at the tick's own event time — idle users decay too.
Consolidation (merge/dedup, decay, expiry, progressive forgetting) runs inline after every
`consolidation_every`-th store of a user; its cost is bounded (memstream/domain/consolidation.py),
so ingestion never waits on more than a bounded step. The session summarizer
(streams/session_summarizer.py) is a second agent of the same app over the turns topic.

Crash notes (faust is at-least-once here): decisions are published before state is saved, the
ledger's buckets before the state. A fact re-read with its decisions already in `applied` re-emits
them (same ids); one re-read without re-decides deterministically from the saved state. Every
event carries absolute values, so a repeat changes no projection.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone

import orjson
from aiokafka.partitioner import murmur2

from memstream import watermarks
from memstream.config import Settings
from memstream.domain.consolidation import consolidate, forget, recalled
from memstream.domain.ledger import BUCKETS, Ledger
from memstream.domain.memory_rules import Decision, Rules, UserState, consolidation_due, decide
from memstream.errors import InvalidEvent
from memstream.ids import derived_id
from memstream.privacy.keystore import KeyStore
from schemas.codec import decode, encode, make_envelope, open_blob, seal_blob
from schemas.envelope import Envelope
from streams.app import DeadLetters, make_app, raw_topic
from streams.session_summarizer import attach_session_summarizer

log = logging.getLogger("memstream.memory")
PRODUCER = "memory-processor/1"
# Memory-topic events the processor acts on (everything else there is its own output).
CONTROL = frozenset({"memory.recalled", "memory.forgotten", "user.forgotten", "decay.ticked"})


def _peek_type(raw: bytes | None) -> str | None:
    try:
        return orjson.loads(raw).get("type") if raw else None
    except orjson.JSONDecodeError:
        return None


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2, as librdkafka's murmur2_random and
    aiokafka use) gives a key: how a tick for partition p finds that partition's users."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


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
    # One sealed value per (user, ledger bucket).
    ledgers = app.Table("user-ledger", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
    sessions = attach_session_summarizer(app, settings, keys, memory)

    def ledger_key(user: str, b: int) -> bytes:
        return f"{user}\x00{b}".encode()

    def load_ledger(user: str) -> Ledger:
        def load(b: int) -> dict | None:
            blob = ledgers.get(ledger_key(user, b))
            if blob is None:
                return None
            opened = open_blob(keys, user, f"ledger:{user}:{b}", orjson.loads(blob))
            return None if opened is None else orjson.loads(opened)
        return Ledger(load)

    def load_state(user: str) -> UserState | None:
        """The user's state with a lazily loaded ledger; None when it exists but is unreadable (erased)."""
        ledger = load_ledger(user)
        blob = states.get(user.encode())
        if blob is None:
            return UserState(ledger=ledger)
        opened = open_blob(keys, user, f"state:{user}", orjson.loads(blob))
        return None if opened is None else UserState.from_dict(orjson.loads(opened), ledger)

    def save_state(user: str, state: UserState) -> None:
        # The ledger's touched buckets first, then the state (see the crash notes above).
        for b in sorted(state.ledger.dirty):
            data = state.ledger.dump(b)
            if data:
                ledgers[ledger_key(user, b)] = orjson.dumps(
                    seal_blob(keys, user, f"ledger:{user}:{b}", orjson.dumps(data)))
            else:
                ledgers.pop(ledger_key(user, b), None)
        state.ledger.dirty.clear()
        sealed = seal_blob(keys, user, f"state:{user}", orjson.dumps(state.to_dict()))
        states[user.encode()] = orjson.dumps(sealed)

    def drop_user(user: str) -> None:
        states.pop(user.encode(), None)
        for b in range(BUCKETS):
            ledgers.pop(ledger_key(user, b), None)

    async def publish(user: str, decisions: list[Decision], cause: Envelope, correlation: str | None,
                      tag_prefix: str = "") -> None:
        for d in decisions:
            when = cause.time if d.at is None else datetime.fromtimestamp(d.at, timezone.utc)
            env = make_envelope(d.data, user=user, time=when, id=derived_id(cause.id, tag_prefix + d.tag),
                                causation=cause.id, correlation=correlation, producer=PRODUCER)
            await memory.send(key=user.encode(), value=encode(env, keys))

    async def control(env: Envelope, partition: int) -> None:
        """An event on the memory topic that changes the processor's state."""
        if env.type == "user.forgotten":
            drop_user(env.user)
            return
        if env.type == "decay.ticked":
            await tick(env, partition)
            return
        state = load_state(env.user)
        if state is None:
            return
        if env.type == "memory.recalled":
            changed = recalled(state, env.data.memory_ids, env.time.timestamp())
        else:  # memory.forgotten
            changed = sum(forget(state, mid) for mid in env.data.memory_ids)
        if changed:
            save_state(env.user, state)

    async def tick(env: Envelope, partition: int) -> None:
        """Age the users of this partition at the tick's event time (a full ledger sweep each),
        `tick_slice_users` users (in key order) per event, so facts queued behind a tick wait for at
        most one slice; the rest in a continuation tick published to the
        same partition, behind whatever arrived meanwhile."""
        tick_data = env.data
        if tick_data.partition != partition:
            return  # a tick is for the partition it was written to
        at = env.time.timestamp()
        after = (tick_data.after or "").encode()
        users = sorted(k for k in list(states.keys())
                       if k > after and partition_of(k, settings.partitions) == partition)
        users, rest = users[:settings.tick_slice_users], users[settings.tick_slice_users:]
        for key in users:
            user = key.decode()
            state = load_state(user)
            if state is None:
                continue
            now = max(state.clock, at)
            decisions = consolidate(state, rules, now, full=True)
            state.clock = now
            # One tick decides for many users: the user is part of each derived id's tag.
            await publish(user, decisions, env, env.id, tag_prefix=f"{user}|")
            save_state(user, state)
        if rest:
            last = users[-1].decode()
            more = tick_data.model_copy(update={"after": last})
            cont = make_envelope(more, user=env.user, time=env.time, id=derived_id(env.id, f"after:{last}"),
                                 causation=env.id, correlation=env.correlation or env.id, producer=PRODUCER)
            await memory.send(key=env.user.encode(), value=encode(cont, keys), partition=partition)
        if users:
            log.info("tick %s: aged %d users of partition %d%s", env.id, len(users), partition,
                     f", {len(rest)} to go" if rest else "")

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
                # Our own output comes back here; erasure, forgetting, recalls and ticks concern us.
                kind = _peek_type(msg.value)
                if kind == "user.erased" and msg.key:
                    drop_user(msg.key.decode())
                    sessions.drop_user(msg.key.decode())
                elif kind in CONTROL:
                    try:
                        env = decode(msg.value, keys)
                    except InvalidEvent:
                        continue  # the projectors dead-letter memory-topic records; once is enough
                    if not env.erased:
                        await control(env, msg.partition)
                continue
            try:
                fact = decode(msg.value, keys)
            except InvalidEvent as exc:
                await dead.send(event, exc)
                continue
            if fact.erased or fact.type != "fact.extracted":
                continue
            # (a state sealed with a key since erased reads as a fresh start, as before)
            state = load_state(fact.user) or UserState(ledger=Ledger())
            # 1. decide from the user's state (pure; event time only)
            state, decisions = decide(state, fact.data, rules, lambda tag: derived_id(fact.id, tag),
                                      at=fact.time.timestamp(), consolidate=False)
            # 2. publish the decisions before saving state: if we crash in between, the fact is
            #    re-read and the same decisions (same ids) are published again — harmless.
            await publish(fact.user, decisions, fact, fact.correlation)
            # 3. every N stores, consolidation — after the fact's own decisions are on their way,
            #    so the fact is never late for it (its cost is bounded: see consolidation.py)
            if consolidation_due(state, rules):
                await publish(fact.user, consolidate(state, rules, state.clock), fact, fact.correlation)
            # 4. save state
            save_state(fact.user, state)

    return app
