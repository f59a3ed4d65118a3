"""The LLM extraction channel's faust agent: turn.recorded → fact.extracted (channel "llm").

The step itself is streams/extraction_core.py's LlmExtractor.

Its own faust app and consumer group ("extractor-llm") over the turns topic, so the rule channel
(streams/extractor.py) publishes its facts without ever waiting for an LLM. The LLM's answer is
decided once, here, and recorded in the facts it produces (law 2); replay reads those events and
never calls the LLM.

What is emitted for a turn:
  - only facts whose key the rule channel does not already extract from the same turn (the rules
    are cheap to re-run here, and deterministic);
  - classified rules first, then the LLM (its extraction label, or a classify call when it gave
    none), else `general`;
  - ids `derived_id(turn.id, "llm-fact:<i>")`, i = position in the LLM's answer.

A re-delivered turn calls the LLM again, and an LLM need not answer twice alike: ids stay stable
per position, but the content behind an id can differ. The memory processor re-emits its recorded
decisions for a fact id it has already applied (within its applied window), so the first answer wins.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import asyncio
import logging

from adapters import metrics
from kernel.config import Settings
from adapters.embedding import Embedder
from adapters.privacy.keystore import KeyStore
from streams.app import DeadLetters, Guard, encode_or_drop, fatal, make_app, raw_topic, user_turns
from streams.extraction_core import LlmExtractor
from streams.llm_channel import LlmClient

log = logging.getLogger("memstream.extractor-llm")
APP_NAME = "extractor-llm"


def build(settings: Settings, embedder: Embedder, llm: LlmClient | None = None):
    app = make_app(APP_NAME, settings)
    keys = KeyStore(settings)
    llm = llm or LlmClient.from_settings(settings)
    core = LlmExtractor(llm, embedder)
    turns = raw_topic(app, settings.topic("turns"))
    facts = raw_topic(app, settings.topic("facts"))
    dead = DeadLetters(app, settings, APP_NAME, keys)
    batch_size = max(16, 4 * settings.llm_concurrency)
    guard = Guard(APP_NAME, dead, settings)

    async def extract_unit(batch) -> None:
        # 1. decode; bad records go to the dead-letter topic and the batch goes on
        work = await user_turns(batch, keys, dead, settings.max_future_skew_s, guard)
        # 2. the LLM's facts for the batch, classified and embedded (once: a retry re-sends)
        found = await core.facts_for(work) if work else []

        async def publish() -> None:
            # 3. publish in turn order (key = user keeps one user's facts ordered), delivered
            #    before the batch is acked
            #    (a fact of a user erased since their turn was read is dropped, counted: encode_or_drop)
            await asyncio.gather(*[await facts.send(key=fact.user.encode(), value=raw) for fact in found
                                   if (raw := encode_or_drop(fact, keys, guard)) is not None])
            metrics.produced(APP_NAME, facts.get_topic_name(), "fact.extracted", len(found))
        await guard.run(publish)

    @app.agent(turns)
    async def extract(stream):
        async for batch in stream.take_events(batch_size, within=0.05):
            for unit in guard.units(batch):   # one per record where the last process died
                if not await guard.begin(unit):
                    continue
                try:
                    await extract_unit(unit)
                except Exception as exc:  # noqa: BLE001 - a bug: exit before take_events acks the batch
                    fatal(APP_NAME, exc)
                guard.done()

    @app.timer(60.0)
    async def report():
        # A periodic summary, so a dashboard-less operator still sees the channel's health.
        log.info("llm channel: %s; dead letters: %d", llm.counters(), dead.count)

    return app
