"""Memory decisions for one user: pure functions of (state, fact) → (new state, decisions).

The processor records every decision as an event; replay reads the events and never calls
this again (law 2). Two kinds of determinism matter:
- decisions depend only on the state and the fact (its own event time, its stored embedding);
- a fact the state has already applied yields exactly the decisions it yielded the first time
  (kept in `applied`), so a processor that re-reads after a crash re-emits identical events
  (same derived ids) instead of deciding anew on a state that already contains the fact.

State is bounded per user: the `recent_window` most recently touched memories (with their
embeddings, for dedup and SIMILAR_TO), the current preference versions, and the decisions of
the last APPLIED_WINDOW facts. Every live memory also has a compact ledger entry (no vector;
domain/ledger.py), kept beside the state in buckets, for decay, expiry and forgetting.

Every `consolidate_every` stores, the fact that completes the count also runs consolidation
(domain/consolidation.py): merge/dedup over the working set, decay, expiry and
progressive forgetting, all decided at the user's clock (the newest event time seen), never the
wall clock.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from domain import ontology
from domain.consolidation import consolidate as run_consolidation
from domain.consolidation import consolidation_due
from domain.ledger import Entry, add_capped
from domain.memory_state import APPLIED_WINDOW, Decision, PrefState, Recent, Rules, UserState
from schemas.events import (LATEST, FactExtracted, MemoryCreated, MemoryLinked, MemoryReinforced,
                            MemorySuperseded, PreferenceSet)

def time_of(event_id: str) -> float:
    """Event time encoded in a UUIDv7 / derived UUIDv8 id (its 48-bit millisecond prefix); 0 if none."""
    try:
        return (uuid.UUID(event_id).int >> 80) / 1000.0
    except ValueError:
        return 0.0


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


def decide(state: UserState, fact: FactExtracted, rules: Rules, event_id_for: Callable[[str], str],
           at: float | None = None, consolidate: bool = True) -> tuple[UserState, list[Decision]]:
    """Decide what one fact does to the user's memory.

    `event_id_for(tag)` is the id the processor will stamp on the decision with that tag, so a
    new preference version can name the event it supersedes. `at` is the fact's event time
    (epoch s; default: the time in its id). With consolidate=False a due consolidation is left to
    the caller (`consolidation_due`): the processor publishes the fact's own decisions first.
    """
    if fact.fact_id in state.applied:
        return state, _redo(state.applied[fact.fact_id], fact)
    # 0. An edit (a statement's `edits`: PATCH /v1/users/{user}/memories/{id}) is decided here, in the
    #    user's order, not by the API that published it: since the API looked, the memory may have
    #    been superseded, merged, archived or forgotten. Only a memory this state holds as live can
    #    be edited; any other target (gone, or never this user's) decides nothing. That is recorded
    #    in `applied` like any decision, so a re-delivery after a revival still decides nothing.
    edited = fact.edits
    if edited is not None and not editable(state, edited):
        state.applied[fact.fact_id] = []
        _trim_applied(state)
        return state, []
    t = at if at is not None else time_of(fact.fact_id)
    state.clock = now = max(state.clock, t)
    ledger = state.ledger
    if edited is not None:
        # The old version leaves the working set first, as a superseded memory does (step 3): it is
        # history now, and neither a duplicate of its new version nor a neighbour to link to.
        _leave(state, edited)

    vec = np.asarray(fact.embedding, dtype=np.float32)
    sims = (np.stack([r.vec for r in state.recent]) @ vec) if state.recent else np.zeros(0, dtype=np.float32)
    decisions: list[Decision] = []

    # 1. Write-time dedup: the same slot with the same value is the same memory whatever the
    #    wording; otherwise the most similar compatible recent memory at or above the threshold.
    #    (Not for an attribute the ontology says can hold several things of one value: a second dog.)
    #    (Not for an edit: it always makes the new version the API named — its id is the fact's —
    #    with the fields it was given; reinforcing another memory would drop them. A copy of another
    #    memory is left to consolidation's dedup, as any near-duplicate that slipped through.)
    target: Recent | None = None
    if edited is None and fact.key is not None and ontology.same_value_same_memory(fact.key):
        for i, r in enumerate(state.recent):
            if r.key == fact.key and r.value == fact.value:
                target, similarity = r, float(sims[i])
                break
    for i in np.argsort(-sims, kind="stable") if target is None and edited is None else ():
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
        # The ledger: a reinforcement re-states the memory, so it decays from now at its new
        # importance and is no longer idle (a memory from before the ledger existed joins it here).
        entry = ledger.edit(target.memory_id)
        if entry is None:
            entry = Entry(fact.content, target.importance, now, now, target.importance, now, facts=[target.memory_id])
            ledger.put(target.memory_id, entry)
            target.noted = None   # a new entry has no kind yet: consolidation notes it again
        entry.base = entry.importance = target.importance
        entry.anchor = entry.last_access = now
        entry.published(target.importance, t)   # memory.reinforced carries it at the fact's time
        entry.access = target.access_count
        entry.stage = 0
        state.recent.remove(target)
        state.recent.append(target)  # most recently touched goes last
        decisions.append(Decision("memory.reinforced", MemoryReinforced(
            memory_id=target.memory_id, fact_id=fact.fact_id, similarity=round(similarity, 4),
            importance=target.importance, category=target.category, slot_hint=target.slot_hint,
            tags=target.tags, access_count=target.access_count)))
        memory_id = target.memory_id
    else:
        # 2b. Create, link FOLLOWS from the previous memory and SIMILAR_TO to close recent ones.
        #     The ledger counts every edge at both ends: in-degree protects from expiry.
        memory_id = fact.fact_id
        decisions.append(Decision("memory.created", _created(fact)))
        entry = Entry(fact.content, fact.importance, t, t, fact.importance, t, facts=[fact.fact_id],
                      shown=fact.importance, shown_at=t)
        if state.last_memory_id is not None:
            decisions.append(Decision(f"linked:FOLLOWS:{state.last_memory_id}", MemoryLinked(
                from_id=state.last_memory_id, to_id=memory_id, kind="FOLLOWS")))
            add_capped(entry.inc, state.last_memory_id)
            previous = ledger.edit(state.last_memory_id)
            if previous is not None:
                add_capped(previous.out, memory_id)
        close = [i for i in np.argsort(-sims, kind="stable") if sims[i] >= rules.link_threshold][: rules.link_max]
        for i in sorted(close):  # log order: oldest first
            r = state.recent[i]
            decisions.append(Decision(f"linked:SIMILAR_TO:{r.memory_id}", MemoryLinked(
                from_id=memory_id, to_id=r.memory_id, kind="SIMILAR_TO", weight=round(float(sims[i]), 4))))
            add_capped(entry.out, r.memory_id)
            similar = ledger.edit(r.memory_id)
            if similar is not None:
                add_capped(similar.inc, memory_id)
        ledger.put(memory_id, entry)
        state.recent.append(Recent(memory_id, vec, fact.importance, fact.category, fact.slot_hint,
                                   list(fact.tags), fact.key, fact.value))
        del state.recent[:-rules.recent_window]
        state.last_memory_id = memory_id
        if edited is not None:
            # The edit's own supersession: the old version is outdated by the new one, with history.
            decisions.append(Decision(f"superseded:{edited}", MemorySuperseded(
                memory_id=edited, superseded_by=memory_id, reason="edited")))

    # 3. Preferences: a new value for a key is a new version that supersedes the old one, and
    #    the memory that held the old value becomes outdated (never silently deleted), when the
    #    ontology says the attribute holds one value at a time (every known key, and unknown ones).
    #    An edit that keeps the slot's value still moves the slot to the new version (a new
    #    preference version, same value), so a later value supersedes the live memory, not the old
    #    one; the edited memory is already superseded ("edited"), never twice.
    if fact.key is not None and fact.value is not None:
        current = state.prefs.get(fact.key)
        moved = edited is not None and current is not None and current.memory_id == edited
        if current is None or current.value != fact.value or moved:
            version = 1 if current is None else current.version + 1
            tag = pref_event_tag(fact.key, version)
            if (current is not None and current.memory_id not in (None, memory_id, edited)
                    and ontology.supersedes(fact.key)):
                decisions.append(Decision(f"superseded:{current.memory_id}", MemorySuperseded(
                    memory_id=current.memory_id, superseded_by=memory_id,
                    reason=f"new value for {fact.key}")))
                state.recent = [r for r in state.recent if r.memory_id != current.memory_id]
                # An outdated memory leaves the working set: it is history, never decayed or expired.
                ledger.pop(current.memory_id)
                if current.memory_id in state.dirty:
                    state.dirty.remove(current.memory_id)
            decisions.append(Decision(tag, PreferenceSet(
                key=fact.key, value=fact.value, pref_version=version,
                supersedes=None if current is None else current.event_id,
                memory_id=memory_id, fact_id=fact.fact_id)))
            state.prefs[fact.key] = PrefState(version, fact.value, event_id_for(tag), memory_id)

    # 4. Remember the decisions for crash re-delivery (embeddings are re-read from the fact).
    #    Consolidation's decisions are not kept: once the state is saved they are in the log.
    state.applied[fact.fact_id] = [(d.tag, d.data.TYPE, d.data.model_dump(exclude={"embedding"})) for d in decisions]
    _trim_applied(state)

    # 5. Every `consolidate_every` stores: consolidation, at the user's clock.
    if memory_id in state.dirty:
        state.dirty.remove(memory_id)
    state.dirty.append(memory_id)
    del state.dirty[:-rules.recent_window]
    state.stores += 1
    if consolidate and consolidation_due(state, rules):
        decisions += run_consolidation(state, rules, now)
    return state, decisions


def editable(state: UserState, memory_id: str) -> bool:
    """Whether an edit may make a new version of this memory: it is live in the user's state (the
    ledger holds every live memory; the window, memories from before the ledger). Superseded,
    merged, deduped, archived and forgotten memories are in neither, nor is another user's."""
    return state.ledger.get(memory_id) is not None or any(r.memory_id == memory_id for r in state.recent)


def _leave(state: UserState, memory_id: str) -> None:
    """A memory leaves the working set for good: window, ledger, the consolidation's dirty list.
    (Its graph edges stay, as for a superseded one: the old version is still a node, outdated.)"""
    state.recent = [r for r in state.recent if r.memory_id != memory_id]
    state.ledger.pop(memory_id)
    if memory_id in state.dirty:
        state.dirty.remove(memory_id)


def _trim_applied(state: UserState) -> None:
    while len(state.applied) > APPLIED_WINDOW:
        state.applied.pop(next(iter(state.applied)))


def _created(fact: FactExtracted) -> MemoryCreated:
    return MemoryCreated(memory_id=fact.fact_id, fact_id=fact.fact_id, session=fact.session, key=fact.key,
                         value=fact.value, content=fact.content, category=fact.category, tags=fact.tags,
                         slot_hint=fact.slot_hint, importance=fact.importance, embedding=fact.embedding)


def _redo(recorded: list[tuple[str, str, dict[str, Any]]], fact: FactExtracted) -> list[Decision]:
    out = []
    for tag, type_, payload in recorded:
        cls = LATEST[type_]
        # (ignore: cls is some event type; the branch is taken only for those with an `embedding` field)
        data = cls(**payload, embedding=fact.embedding) if "embedding" in cls.model_fields else cls(**payload)  # type: ignore[call-arg]
        out.append(Decision(tag, data))
    return out
