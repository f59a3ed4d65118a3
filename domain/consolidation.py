"""Consolidation and forgetting: pure decisions over one user's state, in event time.

Run by the memory processor every `consolidate_every` stores (after the fact that completes the
count, at the user's clock) and for every `decay.ticked` (at the tick's time, so idle users age
too). Each decision is an event with absolute values; replay applies the events and never calls
this again.

1. Merge / dedup over the working set. Only memories touched since the last consolidation (the
   `dirty` list: created, reinforced or merged) are compared, against the recent window (at most
   `recent_window` memories with embeddings): a T x W matrix product, T <= W = 50. Each step
   retires one memory, so a consolidation takes at most W steps: O(W^2 * d) in the worst case,
   whatever the user's total (1,000 or 10,000 memories cost the same). Pairs are taken best first;
   a merged memory is compared again with its new embedding (a merge can make a dedup).
   - cosine >= dedup threshold: `memory.deduped`, the higher importance kept, the other retired —
     never a session digest with a fact;
   - merge band [merge, dedup): `memory.merged` into the higher importance, only for the same
     proposition (`same_proposition`: same subject, predicate and compatible object, read by
     propositions.py; never an event, plan or digest, never two different event dates — a car
     bought yesterday and a trip next month stay two memories): importance max, content the
     longer if one contains the other else both joined with "；", embedding weighted by importance
     and re-normalised, both parents and their facts kept. A merge is not an access: the merged
     memory is idle since the later of its parents' last accesses, and decays from the parent
     that stands higher (a merge never keeps an idle fact from being forgotten);
   - keyed memories with a different key or value never dedup or merge (docs/calibration.md).
2. Aging (decay, progressive forgetting, archiving) over the ledger: O(1) arithmetic per memory, no
   vectors. A store-triggered consolidation ages at most `sweep_max` memories, round-robin over the
   ledger's buckets (a 10,000-memory user is fully aged every ~5 consolidations); a tick ages all.
   - decay: importance = base x rate^(days since creation or last re-statement), recomputed from
     the base (never compounded), decided in steps of decay_min_change (what merges, dedups and
     the TTL compare). Decay is a function (decay.py): readers decay the last published value
     themselves, so a step is published (`memory.decayed`) only when theirs would be off by
     decay_min_change or more — the idle lowering, its undoing, a merge that took the other
     parent's anchor — not for the passing of time;
   - progressive forgetting of memories not accessed (reinforced, recalled) for a while:
     weight lowered (x idle_factor, `memory.decayed` reason "idle") -> content summarised
     (`memory.summarized`: the main clause with its subject, verb and object, never cut; only
     subordinate detail goes) -> archived (`memory.expired` reason "idle"); an access undoes step 1;
   - TTL by kind: last stated longer ago than its kind's TTL AND importance below the minimum ->
     archived (`memory.expired` reason "ttl"). Kept kinds (identity, policy) and kept tags
     (constraint, decision) are never archived and skip progressive forgetting; a memory with graph
     in-degree >= protect_in_degree is never archived (the ledger counts the FOLLOWS/SIMILAR_TO edges
     the processor itself decided).

Forgetting archives, it never deletes (only `forget` and `erase` do): `memory.expired` keeps its
name in the log, and every projector marks the memory `archived` — row, embedding and content stay,
it only leaves the working set (window, ledger, the default recall tier). The ledger keeps a compact
record of it, so a recall that returns it (`memory.recalled`) with a score at or above the rules'
relevance bar (REVIVE_MIN_SCORE) revives it: `recalled()` decides a `memory.revived` that puts
it back into the ledger, re-stated at the recall's time.
"""
from __future__ import annotations

import re
from typing import cast

import numpy as np

from domain.aging_schedule import plans, skippable
from domain.decay import DAY, importance_at
from domain.ledger import BUCKETS, FACTS_CAP, Entry
from domain.memory_state import REVIVE_MIN_SCORE, Decision, PrefState, Recent, Rules, UserState
from domain.propositions import DATE_TAIL as _DATE_TAIL
from domain.propositions import FUNCTION_WORDS as _FUNCTION_WORDS
from domain.propositions import event_dates, is_digest, lemma, proposition, verb_lemma
from schemas.events import (MemoryDecayed, MemoryDeduped, MemoryExpired, MemoryMerged, MemoryRevived,
                            MemorySummarized)

_EPS = 1e-9
FORGOTTEN_VALUE = "\x00forgotten"  # a preference whose memory was forgotten: any new value is a new version
_CLAUSE_END = re.compile(r"[。！？!?；;，,\n]|\.(?:\s|$)")
_SENTENCE_END = re.compile(r"[。！？!?；;\n]|\.(?:\s|$)")
_CLAUSE_ZH = re.compile(r"[，,：:]")
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_USER_EN = re.compile(r"(?i)\buser\b")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+|[\u3400-\u9fff\uf900-\ufaff]+")
# What starts subordinate detail after the object: a relative or adverbial clause, a second
# coordinated predicate, a parenthetical, a dash.
_RELATIVE = (r"that|which|who|whom|whose|where|when|while|because|since|although|though|as|after|before|until|unless|"
             r"if|so|and|but")
_SUBORDINATE = re.compile(r"\s*[(（—–]|\s+-\s|\s+(?:" + _RELATIVE + r")\b|,\s*(?:" + _RELATIVE
                          + r"|then|with|especially|including|for|in|at|on|it|they|she|he|the|not)\b|,\s*(?=[A-Z\u3400-\u9fff])")


def consolidate(state: UserState, rules: Rules, now: float, full: bool = False) -> list[Decision]:
    """Merge/dedup the touched memories, then age the ledger (all of it when `full`, e.g. a tick)."""
    note_kinds(state, rules)
    decisions = merge_and_dedup(state, rules, now)
    decisions += age(state, rules, now, full)
    state.stores = 0
    state.dirty = []
    return decisions


def note_kinds(state: UserState, rules: Rules) -> None:
    """Copy each window memory's kind (category, upgraded by reinforcements and merges) and whether a
    kept tag pins it into its ledger entry, which ages it by kind after it has left the window.
    Consolidation runs every few stores and the window holds the last `recent_window` memories, so
    every memory is noted before it leaves (an entry never noted ages with the default TTL)."""
    keep = set(rules.keep_tags)
    for r in state.recent:
        pinned = bool(keep) and any(t.lower() in keep for t in r.tags)
        if r.noted == [r.category, pinned]:
            continue   # already in its entry, which only this function changes (or a new one replaces: noted reset)
        e = state.ledger.get(r.memory_id)
        if e is not None and (e.kind != r.category or e.pinned != pinned):
            e = cast(Entry, state.ledger.edit(r.memory_id))   # live: get() just found it
            e.kind, e.pinned = r.category, pinned
        r.noted = [r.category, pinned] if e is not None else None


# -- 1. merge and dedup -------------------------------------------------------------------------

def compatible(a: Recent, b: Recent) -> bool:
    """The key guard: keyed memories must agree on key and value to be the same memory."""
    if a.key is None or b.key is None:
        return True
    return a.key == b.key and a.value == b.value


EVENT_KINDS = frozenset({"event", "plan"})


def is_event(r: Recent, content: str) -> bool:
    """Something that happens once (an event, a plan, a feeling now, a session's digest): its own memory."""
    return r.category == "episodic" or r.slot_hint in EVENT_KINDS or is_digest(content)


def may_dedup(a: Recent, ca: str, b: Recent, cb: str) -> bool:
    """Near-identical vectors are one memory, but never a session digest and a fact."""
    return compatible(a, b) and is_digest(ca) == is_digest(cb)


def same_proposition(a: Recent, ca: str, b: Recent, cb: str) -> bool:
    """A merge (the cosine band below dedup) needs the same proposition: never an event (two trips, a
    purchase and a trip, a fact and its session's digest), never two different event dates; keyed
    memories agree on key and value, otherwise the sentences agree on subject, predicate and object
    (domain/propositions.py). Unreadable content (e.g. a revived memory's, not in the
    ledger) never merges."""
    if not compatible(a, b) or is_event(a, ca) or is_event(b, cb):
        return False
    da, db = event_dates(ca), event_dates(cb)
    if da and db and da != db:
        return False
    if a.key is not None and b.key is not None:
        return True  # compatible: same key, same value
    pa, pb = proposition(ca), proposition(cb)
    return pa is not None and pb is not None and bool(pa.predicate) and pa.same(pb)


def merge_content(base: str, other: str) -> str:
    """The longer if one contains the other, else both joined with "；" (base first)."""
    if other in base:
        return base
    if base in other:
        return other
    return f"{base}；{other}"


def merged_vector(a: np.ndarray, wa: float, b: np.ndarray, wb: float) -> np.ndarray:
    """Importance-weighted mean, re-normalised (equal weights when both are 0)."""
    if wa + wb <= 0:
        wa = wb = 1.0
    v = wa * a.astype(np.float64) + wb * b.astype(np.float64)
    n = np.linalg.norm(v)
    return (v / n if n > 0 else a.astype(np.float64)).astype(np.float32)


def _best_pair(state: UserState, rules: Rules, dirty: set[str]) -> tuple[float, int, int] | None:
    rows = [i for i, r in enumerate(state.recent) if r.memory_id in dirty]
    if not rows or len(state.recent) < 2:
        return None
    vecs = np.stack([r.vec for r in state.recent])
    sims = vecs[rows] @ vecs.T                      # T x W: the only similarity work there is
    best: tuple[float, int, int] | None = None
    for n, i in enumerate(rows):
        for j in np.argsort(-sims[n], kind="stable"):
            s = float(sims[n, j])
            if s < rules.merge_threshold:
                break
            if j == i or not compatible(state.recent[i], state.recent[j]):
                continue
            ei, ej = state.ledger.get(state.recent[i].memory_id), state.ledger.get(state.recent[j].memory_id)
            if ei is None or ej is None:
                continue  # not a live memory (e.g. state older than the ledger): never merged blind
            ok = may_dedup if s >= rules.dedup_threshold else same_proposition
            if not ok(state.recent[i], ei.content, state.recent[j], ej.content):
                continue
            pair = (s, min(i, j), max(i, j))
            if best is None or (pair[0], -pair[1], -pair[2]) > (best[0], -best[1], -best[2]):
                best = pair
            break  # the best compatible partner of row i
    return best


def merge_and_dedup(state: UserState, rules: Rules, now: float) -> list[Decision]:
    if not state.dirty or rules.merge_threshold > rules.dedup_threshold:
        return []
    ledger = state.ledger
    dirty = set(state.dirty)
    decisions: list[Decision] = []
    for _ in range(len(state.recent)):  # each step retires one memory: bounded by the window
        best = _best_pair(state, rules, dirty)
        if best is None:
            break
        sim, i, j = best
        a, b = state.recent[i], state.recent[j]
        # both live: _best_pair pairs only memories the ledger has
        ea, eb = cast(Entry, ledger.get(a.memory_id)), cast(Entry, ledger.get(b.memory_id))
        # The higher importance survives; ties: the older, then the smaller id (deterministic).
        if (-eb.importance, eb.created, b.memory_id) < (-ea.importance, ea.created, a.memory_id):
            a, b, ea, eb = b, a, eb, ea
        keep, gone, eg = a, b, eb
        ek = cast(Entry, ledger.edit(keep.memory_id))   # keep is a or b: live
        weights = (ek.importance, eg.importance)
        facts = (ek.facts + [f for f in eg.facts if f not in ek.facts])[:FACTS_CAP]
        keep.tags = keep.tags + [t for t in gone.tags if t not in keep.tags]
        if keep.category == "general" and gone.category != "general":
            keep.category = gone.category
        keep.slot_hint = keep.slot_hint or gone.slot_hint
        if keep.key is None and gone.key is not None:
            keep.key, keep.value = gone.key, gone.value
        keep.importance = ek.importance = max(weights)
        ek.published(keep.importance, now)    # both dedup and merge carry it, at `now`
        keep.access_count = ek.access = ek.access + eg.access
        ek.facts = facts
        data: MemoryDeduped | MemoryMerged
        if sim >= rules.dedup_threshold:
            # Dedup: the kept memory's content and embedding stand; nothing was accessed.
            ek.last_access = max(ek.last_access, eg.last_access)
            tag = f"deduped:{keep.memory_id}:{gone.memory_id}"
            data = MemoryDeduped(memory_id=keep.memory_id, retired_id=gone.memory_id, fact_ids=facts,
                                 similarity=round(sim, 4), importance=keep.importance, category=keep.category,
                                 access_count=keep.access_count, tags=keep.tags)
        else:
            # Merge: new content and embedding. A merge is neither a re-statement nor an access: the
            # merged memory decays from whichever parent stands higher now and is idle since the later
            # of the parents' last accesses (so merges never keep an idle fact from being forgotten).
            keep.vec = merged_vector(keep.vec, weights[0], gone.vec, weights[1])
            ek.content = merge_content(ek.content, eg.content)
            if _standing(eg, rules, now) > _standing(ek, rules, now):
                ek.base, ek.anchor = eg.base, eg.anchor
            ek.last_access = max(ek.last_access, eg.last_access)
            ek.stage = min(ek.stage, eg.stage)
            tag = f"merged:{keep.memory_id}:{gone.memory_id}"
            data = MemoryMerged(memory_id=keep.memory_id, retired_id=gone.memory_id,
                                parent_ids=[keep.memory_id, gone.memory_id], fact_ids=facts, similarity=round(sim, 4),
                                importance=keep.importance, category=keep.category, slot_hint=keep.slot_hint,
                                access_count=keep.access_count, key=keep.key, value=keep.value, content=ek.content,
                                tags=keep.tags, embedding=keep.vec.tolist())
            dirty.add(keep.memory_id)  # compared again with its new embedding
        decisions.append(Decision(tag, data, now))
        _retire(state, gone.memory_id)
        dirty.discard(gone.memory_id)
        for pref in state.prefs.values():  # a preference held by the retired memory is now held by the kept one
            if pref.memory_id == gone.memory_id:
                pref.memory_id = keep.memory_id
    return decisions


def _standing(e: Entry, rules: Rules, now: float) -> tuple[float, float]:
    """A parent's decayed importance now, before the idle factor (ties: the later anchor)."""
    decayed: float = rules.decay_rate ** max(0.0, (now - e.anchor) / DAY)
    return e.base * decayed, e.anchor


# -- 2. aging: decay, progressive forgetting, expiry ---------------------------------------------

def summarize_content(text: str, max_chars: int) -> str:
    """Extractive, keeping the point: the main clause with its subject, main verb and object, never cut.

    The first sentence (Chinese: the first full clause — clauses are joined until one holds the
    subject and a predicate); if it is longer than `max_chars`, the subordinate detail after the
    main verb's object is dropped: a relative or adverbial clause ("that User rides to work…",
    "because…", ", who…", "and works as…") and a parenthetical other than the event date, which
    stays. The main clause itself is never truncated, even past `max_chars`: a summary that lost
    its object says nothing. Only text with no readable clause is truncated (with "…")."""
    text = " ".join(text.split())
    core = _main_clause(text)
    if core is None:
        m = _CLAUSE_END.search(text)
        first = text[: m.start()].strip() if m and m.start() > 0 else text
        if len(first) > max_chars:
            first = first[: max_chars - 1].rstrip() + "…"
        return first or text[:max_chars] or "…"
    if len(core) <= max_chars:
        return core
    date = _DATE_TAIL.search(core)
    body, tail = (core[: date.start()], date.group(0)) if date else (core, "")
    head = _object_end(body)
    if head is not None:
        cut = _SUBORDINATE.search(body, head)
        if cut is not None:
            body = body[: cut.start()].rstrip(" ,;:-—")
    return body + tail


def _main_clause(text: str) -> str | None:
    """The first sentence, or (Chinese, or a lead-in like "In 2020,") the first clauses up to the one
    holding the subject and its predicate; None when no clause reads as one."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    sentence = text[: ends[0]].rstrip(" 。！？!?.;；") if ends else text
    if not sentence.strip():
        return None
    if _CJK_RE.search(sentence) and not _USER_EN.search(sentence):
        cuts = [m.start() for m in _CLAUSE_ZH.finditer(sentence)] + [len(sentence)]
        for c in cuts:
            part = sentence[:c].strip()
            p = proposition(part)
            if p is not None and p.predicate and (p.objects or c == len(sentence) or "用户" in part):
                return part
        return None
    p = proposition(sentence)
    return sentence.strip() if p is not None and p.predicate else None


def _object_end(body: str) -> int | None:
    """Where the main verb's object starts to be complete in an English clause (the end of its first
    content word; for "is"/"has", of the complement's head), else None (then nothing is cut)."""
    p = proposition(body)
    if p is None or not p.predicate:
        return None
    pred = p.predicate.removeprefix("not:")
    words = list(_WORD_RE.finditer(body))
    if pred.startswith(("be:", "have:")):
        head = pred.split(":", 1)[1]
        i = next((k for k, w in enumerate(words) if lemma(w.group(0)) == head), None)
        return None if i is None else words[i].end()
    i = next((k for k, w in enumerate(words) if verb_lemma(w.group(0).lower()) == pred
              or (_CJK_RE.match(w.group(0)) and pred in w.group(0))), None)
    if i is None:
        return None
    if _CJK_RE.match(words[i].group(0)):   # "User 喜欢喝咖啡": the run holds verb and object
        return words[i].end()
    return next((w.end() for w in words[i + 1:] if w.group(0).lower() not in _FUNCTION_WORDS), words[i].end())


def effective_importance(e: Entry, rules: Rules, now: float) -> float:
    """base x rate^days since the anchor (x idle factor once lowered): from the base, never compounded."""
    factor = rules.idle_factor if e.stage >= 1 else 1.0
    return importance_at(e.base * factor, e.anchor, now, rules.decay_rate)


def shown_importance(e: Entry, rules: Rules, now: float) -> float | None:
    """What readers compute for this memory now (decay.py), or None when the ledger does not know
    what they hold (an entry stored before decay was a function: then every step is published)."""
    if e.shown is None or e.shown_at is None:
        return None
    return importance_at(e.shown, e.shown_at, now, rules.decay_rate)


def age(state: UserState, rules: Rules, now: float, full: bool = False) -> list[Decision]:
    ledger = state.ledger
    window = {r.memory_id: r for r in state.recent}
    decisions: list[Decision] = []
    start = 0 if full else state.cursor % BUCKETS
    seen = 0
    planned = plans(state, rules)
    for k in range(BUCKETS):
        b = (start + k) % BUCKETS
        idle = skippable(planned, state, b, now)
        if idle is not None:
            seen += idle   # nothing in it is due before `now`: aging it would change nothing (aging_schedule.py)
        else:
            bucket = ledger.bucket(b)
            seen += len(bucket)
            for mid in sorted(bucket):
                decisions += _age_one(state, rules, now, mid, bucket[mid], window)
        if not full and seen >= rules.sweep_max:
            state.cursor = (b + 1) % BUCKETS
            break
    return decisions


def _age_one(state: UserState, rules: Rules, now: float, mid: str, e: Entry, window: dict[str, Recent]) -> list[Decision]:
    ledger = state.ledger
    idle = max(0.0, (now - e.last_access) / DAY)
    age_days = max(0.0, (now - e.created) / DAY)
    ttl = rules.ttl_days(e.kind, e.pinned)
    kept = ttl is None and (e.pinned or e.kind in rules.keep_kinds)  # never forgotten by age or idleness
    out: list[Decision] = []
    lowered: int = False   # 1 once lowered (assigned along with e.stage)
    if not kept and e.stage == 0 and rules.idle_lower_days > 0 and idle >= rules.idle_lower_days:
        e.stage = lowered = 1
        ledger.edit(mid)
    imp = effective_importance(e, rules, now)
    if abs(imp - e.importance) + _EPS >= rules.decay_min_change or (lowered and imp != e.importance):
        # 1. The step is decided as before: merges, dedups and the TTL compare e.importance.
        # 2. It is published only where readers, decaying the last published value themselves,
        #    would be off by a step or more: the idle factor came or went, or a merge moved the
        #    anchor. Plain decay matches their function and writes nothing.
        shown = shown_importance(e, rules, now)
        if shown is None or lowered or abs(imp - shown) + _EPS >= rules.decay_min_change:
            reason: str | None = "idle" if lowered else ("refresh" if imp > e.importance else "decay")
            out.append(Decision(f"decayed:{mid}", MemoryDecayed(
                memory_id=mid, importance=imp, previous=e.importance if shown is None else shown, reason=reason,
                age_days=round(age_days, 4)), now))
            e.published(imp, now)
        e.importance = imp
        ledger.edit(mid)
        if mid in window:
            window[mid].importance = imp
    if not kept and e.stage == 1 and rules.idle_summarize_days > 0 and idle >= rules.idle_summarize_days:
        e.stage = 2
        ledger.edit(mid)
        if e.content:  # a revived memory's content is not in the ledger: it stays as it is
            e.content = summarize_content(e.content, rules.summary_chars)
            out.append(Decision(f"summarized:{mid}", MemorySummarized(memory_id=mid, content=e.content,
                                                                      idle_days=round(idle, 4)), now))
    reason = None
    stated = max(0.0, (now - e.anchor) / DAY)  # since created or last re-stated (reinforced, revived)
    if ttl is not None and stated > ttl and e.importance < rules.expire_min_importance:
        reason = "ttl"
    elif not kept and e.stage >= 2 and rules.idle_expire_days > 0 and idle >= rules.idle_expire_days:
        reason = "idle"
    if reason is not None and e.in_degree < rules.protect_in_degree:
        out.append(Decision(f"expired:{mid}", MemoryExpired(memory_id=mid, reason=reason, importance=e.importance,
                                                            age_days=round(age_days, 4), idle_days=round(idle, 4),
                                                            in_degree=e.in_degree), now))
        archive(state, mid, now)
    return out


def _retire(state: UserState, memory_id: str) -> None:
    """A memory leaves the working set for good (merged, deduped): window and ledger.

    Its graph edges stay (the node stays in Neo4j, with a status), so the in-degree it gave
    others stands.
    """
    _leave_window(state, memory_id)
    state.ledger.pop(memory_id)


def archive(state: UserState, memory_id: str, at: float) -> None:
    """A memory is archived: it leaves the window and the live ledger, the ledger keeps a compact
    record for a revival. Its edges stay, as for a retired one."""
    _leave_window(state, memory_id)
    state.ledger.archive(memory_id, at)


def _leave_window(state: UserState, memory_id: str) -> None:
    state.recent = [r for r in state.recent if r.memory_id != memory_id]
    if memory_id in state.dirty:
        state.dirty.remove(memory_id)


# -- access and explicit forgetting ---------------------------------------------------------------

def recalled(state: UserState, memory_ids: list[str], at: float, archived_ids: list[str] | None = None,
             scores: list[float] | None = None, min_score: float = REVIVE_MIN_SCORE) -> list[Decision]:
    """A recall returned these memories (`memory.recalled`; `archived_ids`: those it found archived,
    `scores`: the recall score of each of `memory_ids`, in order).

    Live ones: access refreshed (count, last access); step 1 of progressive forgetting is undone
    (the next aging restores the weight). Archived ones the ledger still holds are revived when
    the recall found them relevant — a score of at least `min_score` (REVIVE_MIN_SCORE, memory_state.py);
    without scores (events before they were recorded) every archived hit is, as before: back in
    the ledger as if re-stated now (stage 0, decaying from their base importance again from `at`,
    idle clock reset), one `memory.revived` each, returned in the order given. An archived hit
    below the bar stays archived (it was returned, not used). An archived memory the ledger no
    longer knows (dropped past the archive cap, or archived before archives were kept) stays
    archived — still recallable, just not revived. Unknown ids change nothing. A refresh alone
    returns no decision but marks the ledger dirty: the caller saves when it is."""
    state.clock = max(state.clock, at)
    score = dict(zip(memory_ids, scores)) if scores and len(scores) == len(memory_ids) else {}
    out: list[Decision] = []
    for mid in dict.fromkeys(list(memory_ids) + list(archived_ids or [])):
        e = state.ledger.edit(mid)
        if e is not None:
            e.recalls += 1
            e.last_access = max(e.last_access, at)
            if e.stage == 1:
                e.stage = 0
            continue
        if score and score.get(mid, 0.0) < min_score:
            continue  # returned but not relevant enough to bring back
        found = state.ledger.archived(mid)
        if found is None:
            continue
        old, archived_at = found
        importance = round(min(1.0, max(0.0, old.base)), 4)
        back = Entry("", old.base, at, old.created, importance, at, old.access, old.recalls + 1, 0,
                     old.inc, old.out, [], old.kind, old.pinned, shown=importance, shown_at=at)
        state.ledger.unarchive(mid, back)
        out.append(Decision(f"revived:{mid}", MemoryRevived(
            memory_id=mid, importance=importance, previous=old.importance,
            archived_days=round(max(0.0, (at - archived_at) / DAY), 4), reason="recalled")))
    return out


def forget(state: UserState, memory_id: str) -> bool:
    """A memory was deleted on request. Neo4j DETACH DELETEs its node, so the edges it started no
    longer count towards anyone's in-degree; a preference it held is gone from the KV table, so the
    next fact for that key starts a new version. Returns whether it was known."""
    e = state.ledger.pop(memory_id)  # live or archived
    if e is not None:
        for target in e.out:
            t = state.ledger.edit(target)
            if t is not None and memory_id in t.inc:
                t.inc.remove(memory_id)
            elif t is None:
                state.ledger.drop_archived_edge(target, memory_id)
    known = e is not None or any(r.memory_id == memory_id for r in state.recent)
    state.recent = [r for r in state.recent if r.memory_id != memory_id]
    if memory_id in state.dirty:
        state.dirty.remove(memory_id)
    if state.last_memory_id == memory_id:
        state.last_memory_id = None  # no FOLLOWS edge from a node that no longer exists
    for key, pref in list(state.prefs.items()):
        if pref.memory_id == memory_id:
            state.prefs[key] = PrefState(pref.version, FORGOTTEN_VALUE, pref.event_id, None)
    return known


def consolidation_due(state: UserState, rules: Rules) -> bool:
    """Every `consolidate_every` stores (0: never)."""
    return bool(rules.consolidate_every) and state.stores >= rules.consolidate_every
