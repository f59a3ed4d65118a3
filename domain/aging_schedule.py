"""When each ledger bucket next needs aging, so consolidation reads only the buckets that are due.

Aging (consolidation.py, `_age_one`) changes a ledger entry, or decides something about it, only
at a few moments that follow from the entry itself and the rules: the idle lowering, the next
0.01 step of its decided importance, the summary, the expiry by TTL or idleness. Before the
earliest of them, aging the entry changes nothing and decides nothing. So each bucket's earliest
such moment is kept in the user's state (with how many live entries the bucket holds, which the
sweep's `sweep_max` budget counts), and `age` skips a bucket that is not due: it is neither
unsealed nor parsed. Since decay became a function most memories sit still for days, and a
consolidation of a user with thousands of memories read every bucket of the ledger every
`consolidation_every` stores (issue 31 item 2: the memory stage on long histories).

Exactness: skipping a bucket is equivalent to aging it, and the decisions, their order and the
saved state stay those of a full sweep, because
- every due time errs early (a rounding slack on the importance step, `EARLY_S` seconds off every
  moment), and aging an entry before it is due is exactly what the sweep did anyway;
- a bucket's plan is recomputed whenever the bucket was changed (the ledger's dirty set) and is
  never used for a bucket changed since its plan was made;
- plans are made under one rules profile and ignored under any other (a rollover).
tests/fast/test_aging_schedule.py checks the equivalence against sweeps with no plans.
"""
from __future__ import annotations

import math
from functools import lru_cache

from domain.decay import DAY
from domain.ledger import Entry
from domain.memory_state import Rules, UserState
from domain.rules_profile import rules_hash

EARLY_S = 60.0        # every due time is moved this much earlier: float error never makes one late
_STEP_SLACK = 1e-4    # importance_at rounds to 4 digits: the step may come half a unit (5e-5) early
_ALWAYS = -1e15       # "due at any time" (JSON has no -inf)


@lru_cache(maxsize=16)
def _profile(rules: Rules) -> str:
    return rules_hash(rules)


def _next_step(e: Entry, rules: Rules) -> float:
    """The earliest time the decided importance (`e.importance`) moves by `decay_min_change`:
    importance(t) = base (x idle factor) x rate^days since the anchor falls from its start value."""
    start = min(1.0, max(0.0, e.base * (rules.idle_factor if e.stage >= 1 else 1.0)))
    band = rules.decay_min_change - _STEP_SLACK
    if abs(start - e.importance) >= band or rules.decay_rate >= 1.0:
        return _ALWAYS          # already a step away (a refresh): due now; a rate of 1 or more: not planned
    target = e.importance - band   # it falls to here, then the step is decided
    if target <= 0.0:
        return math.inf         # importance never falls that far from a value this small
    if target >= start:
        return _ALWAYS
    return e.anchor + math.log(target / start) / math.log(rules.decay_rate) * DAY


def entry_due(e: Entry, rules: Rules) -> float:
    """The earliest event time at which aging could change this entry (inf: never, while it and
    the rules stay as they are). Mirrors `_age_one`'s conditions, in its order."""
    ttl = rules.ttl_days(e.kind, e.pinned)
    kept = ttl is None and (e.pinned or e.kind in rules.keep_kinds)
    times = [_next_step(e, rules)]
    if not kept and e.stage == 0 and rules.idle_lower_days > 0:      # 1. lowered once idle
        times.append(e.last_access + rules.idle_lower_days * DAY)
    if not kept and e.stage == 1 and rules.idle_summarize_days > 0:  # 3. summarised once idle longer
        times.append(e.last_access + rules.idle_summarize_days * DAY)
    if e.in_degree < rules.protect_in_degree:                        # 4. expired (unless protected)
        if ttl is not None and e.importance < rules.expire_min_importance:
            times.append(e.anchor + ttl * DAY)    # (above the minimum it first needs a step: planned above)
        if not kept and e.stage >= 2 and rules.idle_expire_days > 0:
            times.append(e.last_access + rules.idle_expire_days * DAY)
    return min(times) - EARLY_S


def plan(state: UserState, rules: Rules) -> None:
    """Before the state is saved: a plan for every bucket in memory that was changed, or that has
    none yet (a state from before plans, or a bucket read for the first time)."""
    profile = _profile(rules)
    if state.aging_rules != profile:
        state.aging, state.aging_rules = {}, profile
    ledger = state.ledger
    for b in ledger.loaded():
        if b in ledger.dirty or b not in state.aging:
            bucket = ledger.bucket(b)
            due = min((entry_due(e, rules) for e in bucket.values()), default=math.inf)
            state.aging[b] = (None if due == math.inf else max(due, _ALWAYS), len(bucket))


def plans(state: UserState, rules: Rules) -> dict[int, tuple[float | None, int]]:
    """The state's plans when they were made under these rules, else none (a rollover): checked
    once per consolidation, not once per bucket."""
    return state.aging if state.aging_rules == _profile(rules) else {}


def skippable(planned: dict[int, tuple[float | None, int]], state: UserState, b: int, now: float) -> int | None:
    """The bucket's live entry count when aging it at `now` would change nothing (it is not read
    then), else None. `planned`: plans(state, rules)."""
    got = planned.get(b)
    if got is None or b in state.ledger.dirty:
        return None
    due, count = got
    return count if due is None or due > now else None
