"""Aging plans (domain/aging_schedule.py): consolidation skips ledger buckets that are not due, and
decides exactly what a sweep of every bucket decides.

The reference keeps one user's state in memory and never saves it, so no plan is ever made and
every consolidation reads every bucket (as before plans existed). The candidate is the memory
processor's core, saving and loading the state around every step as the live worker does, so
plans are made on every save and used by the next consolidation. Both get the same facts, the
same store-triggered consolidations and the same full ticks, over months with idle stretches, so
every transition (idle lowering, summary, expiry by TTL and by idleness, importance steps,
refreshes by reinforcement, merges) happens; decisions and the saved state must be identical.
"""
from __future__ import annotations

import uuid
from collections import Counter

import numpy as np
import pytest

from domain.aging_schedule import EARLY_S, entry_due
from domain.consolidation import consolidate, consolidation_due
from domain.decay import DAY
from domain.ledger import Entry, Ledger
from domain.memory_rules import decide
from domain.memory_state import Rules, UserState
from kernel.ids import derived_id
from schemas.events import FactExtracted
from streams.memory_core import MemoryCore, PlainStates
from tests.fast.test_memory_core import StaticKeys, settings

RULES = Rules(dedup_threshold=0.97, link_threshold=0.85, recent_window=20, link_max=2, merge_threshold=0.93,
              consolidate_every=4, sweep_max=60, decay_rate=0.97, expire_ttl_days=20, expire_min_importance=0.35,
              idle_lower_days=6, idle_summarize_days=12, idle_expire_days=25,
              ttl_by_kind=(("general", 15.0), ("preference", 0.0)), keep_tags=("keep",))
CATEGORIES = ["general", "general", "preference", "identity", "episodic"]


class CountingDict(dict):
    """A state store that counts reads: how many ledger buckets were unsealed."""
    reads = 0

    def get(self, key, default=None):
        self.reads += 1
        return super().get(key, default)


GAPS = ([30.0, 600.0, 3 * 3600.0, 5 * DAY, 13 * DAY], [0.5, 0.25, 0.15, 0.07, 0.03])


def facts(n: int, seed: int, gaps=GAPS):
    """(event time, fact) for one user: bursts of talk, then silences (400 facts: about 300 days)."""
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((12, 16)).astype(np.float32)
    t = 1_767_225_600.0   # 2026-01-01
    for i in range(n):
        t += float(rng.choice(gaps[0], p=gaps[1]))
        base = pool[rng.integers(len(pool))]
        v = base + rng.normal(scale=float(rng.choice([0.02, 0.1, 0.5])), size=16).astype(np.float32)
        key, value = ("location", f"city-{rng.integers(3)}") if i % 7 == 0 else (None, None)
        yield t, FactExtracted(fact_id=str(uuid.UUID(int=seed << 32 | i)), source_turn=str(uuid.UUID(int=i)), channel="rule", key=key, value=value,
                               content=f"User said thing {i} about topic {i % 9} at some length",
                               category=CATEGORIES[i % len(CATEGORIES)], importance=float(rng.uniform(0.2, 0.9)),
                               tags=["keep"] if i % 11 == 0 else [], embedding=(v / np.linalg.norm(v)).tolist(),
                               embed_model="m")


def run(n: int, seed: int, rules: Rules, saved: bool, gaps=GAPS):
    """Every decision (tag, type, data) in order, the final state, and the ledger bucket reads."""
    ledgers = CountingDict()
    core = MemoryCore(settings(), rules, StaticKeys(), {}, ledgers, PlainStates())
    kept = UserState()
    out: list = []

    def step(fn):
        nonlocal kept
        state = (core.load_state("u") or UserState(ledger=Ledger())) if saved else kept
        out.extend((d.tag, d.data.TYPE, d.data.model_dump()) for d in fn(state))
        if saved:
            core.save_state("u", state)
        kept = state

    for i, (t, fact) in enumerate(facts(n, seed, gaps)):
        def on_fact(state, t=t, fact=fact):
            state, decisions = decide(state, fact, rules, lambda tag, f=fact.fact_id: derived_id(f, tag), at=t,
                                      consolidate=False)
            if consolidation_due(state, rules):
                decisions += consolidate(state, rules, state.clock)
            return decisions
        step(on_fact)
        if i % 40 == 39:   # a decay tick: every bucket, at the tick's time
            def tick(state, t=t):
                now = max(state.clock, t + 2 * DAY)
                decisions = consolidate(state, rules, now, full=True)
                state.clock = now
                return decisions
            step(tick)
    final = (core.load_state("u") if saved else kept).to_dict()
    final.pop("aging", None)
    return out, final, ledgers.reads


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plans_decide_exactly_what_full_sweeps_decide(seed):
    reference, ref_state, _ = run(400, seed, RULES, saved=False)
    planned, state, reads = run(400, seed, RULES, saved=True)
    kinds = Counter(t for _, t, _ in reference)
    # the scenario exercises every transition aging decides (else the equivalence says little)
    assert {"memory.decayed", "memory.summarized", "memory.expired"} <= set(kinds), kinds
    assert planned == reference
    assert state == ref_state


def test_plans_skip_buckets_that_are_not_due(monkeypatch):
    """A user talking steadily (a fact every few minutes for days): few memories are due at any
    consolidation, so with plans the ledger's buckets are read far less often than without."""
    rules = Rules(dedup_threshold=0.97, link_threshold=0.85, recent_window=20, consolidate_every=4, sweep_max=5000,
                  decay_rate=0.995, idle_lower_days=14, idle_summarize_days=30, idle_expire_days=60)
    steady = ([120.0, 600.0], [0.5, 0.5])
    decisions, _, reads = run(600, 4, rules, saved=True, gaps=steady)
    monkeypatch.setattr("domain.consolidation.skippable", lambda *a: None)   # plans made, never used
    unplanned, _, swept = run(600, 4, rules, saved=True, gaps=steady)
    assert decisions == unplanned
    assert reads < swept / 2, (reads, swept)


def test_an_entry_is_never_due_late():
    """entry_due is never after the first time _age_one would change the entry: checked by aging a
    copy at the due time plus EARLY_S (it must not have changed before) for many random entries."""
    from domain.consolidation import _age_one
    rng = np.random.default_rng(5)
    for _ in range(2000):
        created = 1_767_225_600.0 + float(rng.uniform(0, 50)) * DAY
        imp = round(float(rng.uniform(0, 1)), 4)
        e = Entry("User likes tea", base=imp, anchor=created, created=created, importance=imp,
                  last_access=created + float(rng.uniform(0, 5)) * DAY, stage=int(rng.integers(0, 3)),
                  kind=str(rng.choice(["general", "preference", "identity"])))
        e.published(imp, created)
        due = entry_due(e, RULES)
        if not np.isfinite(due) or due < created:
            continue
        before = Entry(*e.to_list()[:9], list(e.inc), list(e.out), list(e.facts), *e.to_list()[12:])
        state = UserState()
        state.ledger.put("m", before)
        # just before the due time (as planned, EARLY_S early): nothing may change or be decided
        assert _age_one(state, RULES, due + EARLY_S - 1.0, "m", before, {}) == []
        assert before.to_list() == e.to_list()
