"""Memory decisions for one user: pure functions of (state, fact) → (new state, decisions).

The processor records every decision as an event; replay reads the events and never calls
this again (law 2). Two kinds of determinism matter:
- decisions depend only on the state and the fact (its own event time, its stored embedding);
- a fact the state has already applied yields exactly the decisions it yielded the first time
  (kept in `applied`), so a processor that re-reads after a crash re-emits identical events
  (same derived ids) instead of deciding anew on a state that already contains the fact.

State is bounded per user: the `recent_window` most recently touched memories (with their
embeddings, for dedup and SIMILAR_TO), the current preference versions, and the decisions of
the last APPLIED_WINDOW facts.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from schemas.events import (LATEST, EventData, FactExtracted, MemoryCreated, MemoryLinked, MemoryReinforced,
                            MemorySuperseded, PreferenceSet)

APPLIED_WINDOW = 32  # facts whose decisions are kept for crash re-delivery; covers any uncommitted tail


@dataclass(frozen=True, slots=True)
class Rules:
    """Thresholds calibrated for the default embedder (docs/calibration.md)."""
    dedup_threshold: float = 0.98
    link_threshold: float = 0.91
    recent_window: int = 50
    link_max: int = 3

    @classmethod
    def from_settings(cls, settings) -> "Rules":
        return cls(settings.dedup_threshold, settings.link_threshold, settings.recent_window, settings.link_max)


@dataclass(slots=True)
class PrefState:
    version: int
    value: str
    event_id: str
    memory_id: str | None


@dataclass(slots=True)
class Recent:
    memory_id: str
    vec: np.ndarray
    importance: float
    category: str
    slot_hint: str | None
    tags: list[str]
    key: str | None
    value: str | None
    access_count: int = 0

    def to_list(self) -> list:
        return [self.memory_id, base64.b64encode(self.vec.astype("<f4").tobytes()).decode(), self.importance,
                self.category, self.slot_hint, self.tags, self.key, self.value, self.access_count]

    @classmethod
    def from_list(cls, x: list) -> "Recent":
        return cls(x[0], np.frombuffer(base64.b64decode(x[1]), dtype="<f4").copy(), *x[2:])


@dataclass(slots=True)
class UserState:
    prefs: dict[str, PrefState] = field(default_factory=dict)
    recent: list[Recent] = field(default_factory=list)  # oldest first
    last_memory_id: str | None = None
    applied: dict[str, list[tuple[str, str, dict]]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"prefs": {k: [p.version, p.value, p.event_id, p.memory_id] for k, p in self.prefs.items()},
                "recent": [r.to_list() for r in self.recent],
                "last": self.last_memory_id,
                "applied": self.applied}

    @classmethod
    def from_dict(cls, d: dict) -> "UserState":
        return cls(prefs={k: PrefState(*v) for k, v in d.get("prefs", {}).items()},
                   recent=[Recent.from_list(x) for x in d.get("recent", [])],
                   last_memory_id=d.get("last"),
                   applied={k: [tuple(x) for x in v] for k, v in d.get("applied", {}).items()})

    def __eq__(self, other) -> bool:
        return isinstance(other, UserState) and self.to_dict() == other.to_dict()


@dataclass(frozen=True, slots=True)
class Decision:
    tag: str          # the derived event id is derived_id(fact event id, tag)
    data: EventData


def pref_event_tag(key: str, version: int) -> str:
    return f"preference.set:{key}:{version}"


def _compatible(fact: FactExtracted, r: Recent) -> bool:
    """Similar vectors are only the same memory if they do not disagree on a slot.

    e5 puts "likes tea" and "likes coffee", or "likes X" and "does not like X", close together;
    keyed facts must agree on key and value to be duplicates.
    """
    if fact.key is None or r.key is None:
        return True
    return fact.key == r.key and fact.value == r.value


def decide(state: UserState, fact: FactExtracted, rules: Rules, event_id_for) -> tuple[UserState, list[Decision]]:
    """Decide what one fact does to the user's memory.

    `event_id_for(tag)` is the id the processor will stamp on the decision with that tag, so a
    new preference version can name the event it supersedes.
    """
    if fact.fact_id in state.applied:
        return state, _redo(state.applied[fact.fact_id], fact)

    vec = np.asarray(fact.embedding, dtype=np.float32)
    sims = (np.stack([r.vec for r in state.recent]) @ vec) if state.recent else np.zeros(0, dtype=np.float32)
    decisions: list[Decision] = []

    # 1. Write-time dedup: the same slot with the same value is the same memory whatever the
    #    wording; otherwise the most similar compatible recent memory at or above the threshold.
    target: Recent | None = None
    if fact.key is not None:
        for i, r in enumerate(state.recent):
            if r.key == fact.key and r.value == fact.value:
                target, similarity = r, float(sims[i])
                break
    for i in np.argsort(-sims, kind="stable") if target is None else ():
        if sims[i] < rules.dedup_threshold:
            break
        if _compatible(fact, state.recent[i]):
            target, similarity = state.recent[i], float(sims[i])
            break

    if target is not None:
        # 2a. Reinforce: importance max, access refreshed, category upgraded from `general`,
        #     slot hint only if empty, tags merged — absolute values, so re-applying is harmless.
        target.importance = max(target.importance, fact.importance)
        if target.category == "general" and fact.category != "general":
            target.category = fact.category
        target.slot_hint = target.slot_hint or fact.slot_hint
        target.tags = target.tags + [t for t in fact.tags if t not in target.tags]
        target.key = target.key or fact.key
        target.value = target.value if target.value is not None else fact.value
        target.access_count += 1
        state.recent.remove(target)
        state.recent.append(target)  # most recently touched goes last
        decisions.append(Decision("memory.reinforced", MemoryReinforced(
            memory_id=target.memory_id, fact_id=fact.fact_id, similarity=round(similarity, 4),
            importance=target.importance, category=target.category, slot_hint=target.slot_hint,
            tags=target.tags, access_count=target.access_count)))
        memory_id = target.memory_id
    else:
        # 2b. Create, link FOLLOWS from the previous memory and SIMILAR_TO to close recent ones.
        memory_id = fact.fact_id
        decisions.append(Decision("memory.created", _created(fact)))
        if state.last_memory_id is not None:
            decisions.append(Decision(f"linked:FOLLOWS:{state.last_memory_id}", MemoryLinked(
                from_id=state.last_memory_id, to_id=memory_id, kind="FOLLOWS")))
        close = [i for i in np.argsort(-sims, kind="stable") if sims[i] >= rules.link_threshold][: rules.link_max]
        for i in sorted(close):  # log order: oldest first
            r = state.recent[i]
            decisions.append(Decision(f"linked:SIMILAR_TO:{r.memory_id}", MemoryLinked(
                from_id=memory_id, to_id=r.memory_id, kind="SIMILAR_TO", weight=round(float(sims[i]), 4))))
        state.recent.append(Recent(memory_id, vec, fact.importance, fact.category, fact.slot_hint,
                                   list(fact.tags), fact.key, fact.value))
        del state.recent[:-rules.recent_window]
        state.last_memory_id = memory_id

    # 3. Preferences: a new value for a key is a new version that supersedes the old one, and
    #    the memory that held the old value becomes outdated (never silently deleted).
    if fact.key is not None and fact.value is not None:
        current = state.prefs.get(fact.key)
        if current is None or current.value != fact.value:
            version = 1 if current is None else current.version + 1
            tag = pref_event_tag(fact.key, version)
            if current is not None and current.memory_id not in (None, memory_id):
                decisions.append(Decision(f"superseded:{current.memory_id}", MemorySuperseded(
                    memory_id=current.memory_id, superseded_by=memory_id,
                    reason=f"new value for {fact.key}")))
                state.recent = [r for r in state.recent if r.memory_id != current.memory_id]
            decisions.append(Decision(tag, PreferenceSet(
                key=fact.key, value=fact.value, pref_version=version,
                supersedes=None if current is None else current.event_id,
                memory_id=memory_id, fact_id=fact.fact_id)))
            state.prefs[fact.key] = PrefState(version, fact.value, event_id_for(tag), memory_id)

    # 4. Remember the decisions for crash re-delivery (embeddings are re-read from the fact).
    state.applied[fact.fact_id] = [(d.tag, d.data.TYPE, d.data.model_dump(exclude={"embedding"})) for d in decisions]
    while len(state.applied) > APPLIED_WINDOW:
        state.applied.pop(next(iter(state.applied)))
    return state, decisions


def _created(fact: FactExtracted) -> MemoryCreated:
    return MemoryCreated(memory_id=fact.fact_id, fact_id=fact.fact_id, session=fact.session, key=fact.key,
                         value=fact.value, content=fact.content, category=fact.category, tags=fact.tags,
                         slot_hint=fact.slot_hint, importance=fact.importance, embedding=fact.embedding)


def _redo(recorded: list[tuple[str, str, dict]], fact: FactExtracted) -> list[Decision]:
    out = []
    for tag, type_, payload in recorded:
        cls = LATEST[type_]
        data = cls(**payload, embedding=fact.embedding) if "embedding" in cls.model_fields else cls(**payload)
        out.append(Decision(tag, data))
    return out
