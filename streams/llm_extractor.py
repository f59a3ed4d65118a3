"""The LLM extraction channel: turn.recorded → fact.extracted (channel "llm").

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
"""
from __future__ import annotations

import asyncio
import logging
import re

from memstream.config import Settings
from memstream.domain.classification import classify
from memstream.domain.extraction import extract_rules
from memstream.embedding import Embedder
from memstream.privacy.keystore import KeyStore
from schemas.codec import encode
from schemas.envelope import Envelope
from schemas.events import TurnRecorded
from streams.app import DeadLetters, make_app, raw_topic, user_turns
from streams.extractor import fact_from_turn
from streams.llm_channel import LlmClient, LlmFact

log = logging.getLogger("memstream.extractor-llm")
PRODUCER = "extractor-llm/1"
APP_NAME = "extractor-llm"


def _norm_key(key: str | None) -> str | None:
    # Same normalisation as the rule channel's keys, so "likes:Green Tea" meets "likes:green tea".
    key = re.sub(r"\s+", " ", key.strip().lower()) if key else None
    return key or None


def new_facts(turn_text: str, facts: list[LlmFact]) -> list[tuple[int, LlmFact]]:
    """(position in the LLM's answer, fact) for the facts the rule channel does not already have."""
    rule_keys = {d.key for d in extract_rules(turn_text)}
    return [(i, f) for i, f in enumerate(facts) if _norm_key(f.key) is None or _norm_key(f.key) not in rule_keys]


async def classified(llm: LlmClient, fact: LlmFact) -> tuple[str, list[str], str | None]:
    """Category, tags and slot hint of one LLM fact: rules, then the LLM, else general."""
    # The extraction's own label is the LLM's answer; ask again only when it gave none we know.
    answer = ({"category": fact.category, "tags": fact.tags, "slot_hint": fact.slot_hint} if fact.category
              else await llm.classify(fact.content))
    c = classify(fact.content, answer)
    tags = list(dict.fromkeys([*fact.tags, *c.tags]))
    slot = (c.slot_hint or fact.slot_hint) if c.source == "rule" else (fact.slot_hint or c.slot_hint)
    return c.category, tags, slot


def llm_fact_event(turn: Envelope[TurnRecorded], i: int, fact: LlmFact, category: str, tags: list[str],
                   slot_hint: str | None, vector: list[float], llm_model: str, embed_model: str) -> Envelope:
    return fact_from_turn(turn, f"llm-fact:{i}", PRODUCER, channel="llm", rule=None, model=llm_model,
                          key=_norm_key(fact.key), value=fact.value, content=fact.content, category=category,
                          tags=tags, slot_hint=slot_hint, importance=fact.importance, embedding=vector,
                          embed_model=embed_model)


async def facts_for_turn(llm: LlmClient, turn: Envelope[TurnRecorded]) -> list[tuple[int, LlmFact, tuple]]:
    """The LLM's new, classified facts for one turn; [] when the LLM gave no usable answer."""
    try:
        answer = await llm.extract(turn.data.content)
        if not answer:
            return []
        kept = new_facts(turn.data.content, answer)
        labels = await asyncio.gather(*(classified(llm, f) for _, f in kept))
        return [(i, f, label) for (i, f), label in zip(kept, labels)]
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - one bad answer costs that turn's LLM facts, never the worker
        log.exception("llm extraction failed for turn %s; its rule facts are unaffected", turn.id)
        return []


def build(settings: Settings, embedder: Embedder, llm: LlmClient | None = None):
    app = make_app(APP_NAME, settings)
    keys = KeyStore(settings)
    llm = llm or LlmClient.from_settings(settings)
    turns = raw_topic(app, settings.topic("turns"))
    facts = raw_topic(app, settings.topic("facts"))
    dead = DeadLetters(app, settings, APP_NAME, keys)
    batch_size = max(16, 4 * settings.llm_concurrency)

    @app.agent(turns)
    async def extract(stream):
        async for batch in stream.take_events(batch_size, within=0.05):
            # 1. decode; bad records go to the dead-letter topic and the batch goes on
            work: list[Envelope] = await user_turns(batch, keys, dead)
            if not work:
                continue
            # 2. ask the LLM about every turn of the batch at once (the client bounds concurrency)
            found = await asyncio.gather(*(facts_for_turn(llm, env) for env in work))
            texts = [f.content for per_turn in found for _, f, _ in per_turn]
            if not texts:
                continue
            # 3. embed every fact of the batch at once, off the event loop
            vectors = await asyncio.get_running_loop().run_in_executor(None, embedder.passages, texts)
            # 4. publish in turn order (key = user keeps one user's facts ordered)
            pos = 0
            for env, per_turn in zip(work, found):
                for i, fact, (category, tags, slot) in per_turn:
                    event = llm_fact_event(env, i, fact, category, tags, slot, vectors[pos], llm.model, embedder.model)
                    await facts.send(key=env.user.encode(), value=encode(event, keys))
                    pos += 1

    @app.timer(60.0)
    async def report():
        # A periodic summary, so a dashboard-less operator still sees the channel's health.
        log.info("llm channel: %s; dead letters: %d", llm.counters(), dead.count)

    return app
