"""Memory decisions for one user: pure functions of (state, fact) → (new state, decisions).

The processor records every decision as an event; replay reads the events and never calls
this again (law 2). Determinism matters twice: decisions use the fact's own event time, and a
fact the state has already applied yields exactly the decisions it yielded the first time, so a
processor that re-reads after a crash re-emits identical events (same derived ids) instead of
new ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from schemas.events import FactExtracted, MemoryCreated, PreferenceSet

APPLIED_WINDOW = 256  # facts remembered for crash-replay idempotence; bounded per user


@dataclass(slots=True)
class PrefState:
    version: int
    value: str
    event_id: str


@dataclass(slots=True)
class UserState:
    prefs: dict[str, PrefState] = field(default_factory=dict)
    last_memory_id: str | None = None
    # fact id -> [(pref key, version, supersedes event id)] decided for it, oldest first
    applied: dict[str, list[tuple[str, int, str | None]]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"prefs": {k: [p.version, p.value, p.event_id] for k, p in self.prefs.items()},
                "last": self.last_memory_id,
                "applied": self.applied}

    @classmethod
    def from_dict(cls, d: dict) -> "UserState":
        return cls(prefs={k: PrefState(*v) for k, v in d.get("prefs", {}).items()},
                   last_memory_id=d.get("last"),
                   applied={k: [tuple(x) for x in v] for k, v in d.get("applied", {}).items()})


@dataclass(frozen=True, slots=True)
class Decision:
    tag: str          # makes the derived event id: derived_id(fact event id, tag)
    data: object      # an EventData instance


def memory_id_for(fact: FactExtracted) -> str:
    # One fact → at most one memory; the id is stable across re-processing.
    return fact.fact_id


def _memory_created(fact: FactExtracted) -> MemoryCreated:
    return MemoryCreated(memory_id=memory_id_for(fact), fact_id=fact.fact_id, session=fact.session,
                         key=fact.key, value=fact.value, content=fact.content, category=fact.category,
                         tags=fact.tags, slot_hint=fact.slot_hint, importance=fact.importance,
                         embedding=fact.embedding)


def pref_event_tag(key: str, version: int) -> str:
    return f"preference.set:{key}:{version}"


def decide(state: UserState, fact: FactExtracted, pref_event_id) -> tuple[UserState, list[Decision]]:
    """Decide what a fact does to memory.

    `pref_event_id(tag)` gives the id the processor will stamp on the decision with that tag, so
    the next version of a preference can name the event it supersedes.
    """
    memory = _memory_created(fact)
    if fact.fact_id in state.applied:
        # Re-delivery of an applied fact: the same decisions again, byte for byte.
        redo = [Decision("memory.created", memory)]
        for key, version, supersedes in state.applied[fact.fact_id]:
            redo.append(Decision(pref_event_tag(key, version), PreferenceSet(
                key=key, value=fact.value, pref_version=version,
                supersedes=supersedes, memory_id=memory.memory_id, fact_id=fact.fact_id)))
        return state, redo

    decisions = [Decision("memory.created", memory)]
    pref_changes: list[tuple[str, int, str | None]] = []
    if fact.key is not None and fact.value is not None:
        current = state.prefs.get(fact.key)
        if current is None or current.value != fact.value:
            # A new value for the same key supersedes the old one; the old stays in history.
            version = 1 if current is None else current.version + 1
            supersedes = None if current is None else current.event_id
            tag = pref_event_tag(fact.key, version)
            decisions.append(Decision(tag, PreferenceSet(
                key=fact.key, value=fact.value, pref_version=version, supersedes=supersedes,
                memory_id=memory.memory_id, fact_id=fact.fact_id)))
            state.prefs[fact.key] = PrefState(version, fact.value, pref_event_id(tag))
            pref_changes.append((fact.key, version, supersedes))
    state.last_memory_id = memory.memory_id
    state.applied[fact.fact_id] = pref_changes
    while len(state.applied) > APPLIED_WINDOW:
        state.applied.pop(next(iter(state.applied)))
    return state, decisions

