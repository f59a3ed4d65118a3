"""The extractor's faust agent: turn.recorded → fact.extracted (the offline channel), and
memory.stated → exactly one fact.extracted (channel `stated`: kept as stated).

The step itself is streams/extraction_core.py's RuleExtractor; this agent takes turns in small
batches (so the embedder runs on many passages at once), runs the step off the event loop, and
publishes facts then source watermarks.

Failures (streams/app.py): bad turns are dead-lettered; a batch whose facts cannot be sealed or
delivered (key store or broker away) is retried whole, in place — its facts have ids derived from
their turns, so a repeat is identical; the batch is acked only after every fact and watermark of
it was delivered.
"""
from __future__ import annotations

import asyncio
import logging

from adapters import metrics
from kernel import watermarks
from kernel.config import Settings
from adapters.embedding import Embedder
from adapters.privacy.keystore import KeyStore
from streams.app import DeadLetters, Guard, encode_or_drop, fatal, make_app, raw_topic, user_turns
from streams.extraction_core import ReplyContexts, RuleExtractor

log = logging.getLogger("memstream.extractor")


def build(settings: Settings, embedder: Embedder):
    app = make_app("extractor", settings)
    keys = KeyStore(settings)
    turns_name = settings.topic("turns")
    turns = raw_topic(app, turns_name)
    facts = raw_topic(app, settings.topic("facts"))
    dead = DeadLetters(app, settings, "extractor", keys)
    core = RuleExtractor(embedder)
    contexts = ReplyContexts()
    guard = Guard("extractor", dead, settings)

    async def extract_unit(batch) -> None:
        # 1. decode; bad records go to the dead-letter topic and the batch goes on; every readable
        #    turn, the assistant's too, tells the reply contexts what each user turn answers
        replies: dict[str, str | None] = {}

        def seen(position, env) -> None:
            if (question := contexts.observe(position, env)) is not None:
                replies[env.id] = question
        work = await user_turns(batch, keys, dead, settings.max_future_skew_s, guard, stated=True, seen=seen)
        # 2. extract and embed, off the event loop (once: retries below re-send, not re-embed)
        found: list = []

        async def run_step() -> None:
            found[:] = await asyncio.get_running_loop().run_in_executor(None, core.events_for, work, replies)
        if work:
            await guard.run(run_step)
        ends: dict[int, int] = {}
        for event in batch:
            ends[event.message.partition] = max(ends.get(event.message.partition, 0), event.message.offset + 1)

        async def publish() -> None:
            # 3. facts in turn order (key = user keeps one user's facts ordered), then
            # 4. watermarks: everything from these turns is now in the facts topic;
            # 5. delivered before the batch is acked (flush before commit)
            #    (a fact of a user erased since their turn was read is dropped, counted: encode_or_drop)
            sent = [await facts.send(key=fact.user.encode(), value=raw) for fact in found
                    if (raw := encode_or_drop(fact, keys, guard)) is not None]
            for partition, next_offset in ends.items():
                sent.append(await facts.send(value=b"", partition=partition,
                                             headers=watermarks.header(turns_name, partition, next_offset)))
            await asyncio.gather(*sent)
            metrics.produced("extractor", facts.get_topic_name(), "fact.extracted", len(found))
            metrics.produced("extractor", facts.get_topic_name(), "watermark", len(ends))
        await guard.run(publish)

    @app.agent(turns)
    async def extract(stream):
        async for batch in stream.take_events(64, within=settings.extractor_linger_ms / 1000.0):
            # The batch is one unit, or one per record where the last process died (crash ledger).
            for unit in guard.units(batch):
                if not await guard.begin(unit):
                    continue
                try:
                    await extract_unit(unit)
                except Exception as exc:  # noqa: BLE001 - a bug: exit before take_events acks the batch
                    fatal("extractor", exc)
                guard.done()

    return app
