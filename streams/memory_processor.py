"""The memory processor's faust agent: fact.extracted → memory decisions, one writer per user.

The decisions themselves are made by streams/memory_core.py (a plain class, also what what-if
runs); this module only wires it to Kafka and does the routing and decoding the core leaves to
its drivers (streams/routing.py): the inputs (the facts topic and the memory topic,
co-partitioned by user), the three changelog-backed state tables (the user's working state,
one sealed value per ledger bucket, one per recent-window vector), the out-going memory topic and the dead-letter topic. The
session summarizer (streams/session_summarizer.py) is a second agent of the same app.

Crash notes (faust is at-least-once here): each Outgoing is sent before the core saves state, the
ledger's buckets before the state. A fact re-read with its decisions already in `applied`
re-emits them (same ids); one re-read without re-decides deterministically from the saved state.
Every event carries absolute values, so a repeat changes no projection.

Rules provenance: before it joins its group the worker checks that the memory topic's decisions
were made under its own rules profile (streams/rules_gate.py) and refuses to start otherwise;
every decision it writes carries the profile's hash.

Failures (streams/app.py's Guard): a fact that cannot be decoded, or whose key is not its user, is
dead-lettered; a step that cannot reach the key store (or the broker) is retried whole, in place,
from the state as last saved — the core saves only after its last out-going record, so a retry
re-decides identically; anything else exits the process before faust can ack the record. Offsets
are committed by faust after its producer is flushed (decisions, state changelog, ledger).
"""
from __future__ import annotations

import logging

from adapters import metrics
from kernel import watermarks
from kernel.config import Settings
from domain.memory_state import Rules
from domain.rules_profile import profile_of
from adapters.embedding import Embedder
from adapters.privacy import decision_key
from adapters.privacy.keystore import KeyStore
from schemas.codec import encode
from streams.faust_adapter import appended_ms
from streams.app import DeadLetters, Guard, decode_keyed, fatal, make_app, raw_topic, report_table_sizes, state_table
from streams.memory_core import MemoryCore, SealedStates
from streams.routing import memory_input, partitioner
from streams.rules_gate import check_profile
from streams.session_summarizer import attach_session_summarizer

log = logging.getLogger("memstream.memory")


def build(settings: Settings, embedder: Embedder | None = None):
    """`embedder`: for the session summarizer's episodes (none: no episodes)."""
    app = make_app("memory", settings)
    keys = KeyStore(settings)
    decision_key.check_held(keys)   # it signs every decision it writes (#28)
    facts_topic = settings.topic("facts")
    memory_topic = settings.topic("memory")
    inputs = app.topic(facts_topic, memory_topic, key_type=bytes, value_type=bytes,
                       key_serializer="raw", value_serializer="raw")
    memory = raw_topic(app, memory_topic)
    dead = DeadLetters(app, settings, "memory-processor", keys)
    # Keys and values are raw bytes (the app's serializers): the values are sealed.
    states = state_table(app, settings, "user-state")
    ledgers = state_table(app, settings, "user-ledger")
    vectors = state_table(app, settings, "user-vectors")
    sessions = attach_session_summarizer(app, settings, keys, memory, embedder)
    rules = Rules.from_settings(settings)
    # Before joining the group: the memory topic's decisions must have been made under these rules,
    # or this worker refuses (ProfileMismatch, exit 2) unless told to roll over (streams/rules_gate.py).
    gate = check_profile(settings, profile_of(rules), keys, rollover=settings.rules_rollover,
                         worker=settings.worker_label("memory"))
    log.info("deciding under rules profile %s", gate.profile)
    core = MemoryCore(settings, rules, keys, states, ledgers, SealedStates(keys),
                      on_user_erased=sessions.drop_user, partition_of=partitioner(settings.partitions),
                      vectors=vectors)

    @app.on_partitions_revoked.connect
    async def forget_window_vectors(app, revoked, **kwargs) -> None:
        # Another worker may decide for these users while they are away: their cached vectors
        # could be older than the table when they come back (streams/window_vectors.py).
        core.window_vectors.forget_cached()

    async def send_all(outgoing) -> None:
        for out in outgoing:   # the core saves its state only after the last one was sent
            await memory.send(key=out.key.encode(), value=encode(out.envelope, keys), partition=out.partition)
            metrics.produced("memory", memory_topic, out.envelope.type)
            metrics.decision(out.envelope.type)

    guard = Guard("memory", dead, settings)
    report_table_sizes(app, "memory")

    async def handle(event) -> None:
        msg = event.message
        mark = watermarks.parse(msg.headers)
        metrics.consumed("memory", msg.topic, msg.value, "watermark" if mark is not None else None)
        if mark is not None:
            # A source watermark: pass it on, in order, after this partition's decisions.
            if msg.topic == facts_topic:
                await guard.run(lambda: memory.send(value=b"", partition=msg.partition, headers=watermarks.header(*mark)))
            return
        if msg.topic == memory_topic:
            # Our own output comes back here; erasure, forgetting, recalls and ticks concern us.
            # (Unreadable memory-topic records are the projectors' to dead-letter.)
            async def control() -> None:
                env = memory_input(msg.key, msg.value, keys, appended_ms=appended_ms(msg),
                                   max_future_skew_s=settings.max_future_skew_s)
                if env is not None:
                    await send_all(core.on_control(env, msg.partition))
            await guard.run(control)
            return
        await guard.run(lambda: send_all(core.on_fact(decode_keyed(msg, keys, settings.max_future_skew_s))), event)

    @app.agent(inputs)
    async def process(stream):
        async for event in stream.events():
            # 1. mark the record in flight (a record that keeps killing us is dead-lettered instead)
            if not await guard.begin([event]):
                continue
            # 2. decide and send; an error the guard does not classify exits before faust acks
            try:
                await handle(event)
            except Exception as exc:  # noqa: BLE001 - a bug: leave for the supervisor
                fatal("memory", exc)
            # 3. the record is done: its decisions are sent and its state saved
            guard.done()

    return app
