"""Decay as a function: a memory's importance at any time, from what was published about it.

Importance falls by `decay_rate` a day from the last time it was stated (created, reinforced,
merged, revived) and is never compounded: importance(t) = published × rate^(days since published).
Readers (recall scoring, profile, context, the memory list, the console) compute it with
`importance_at`, so the passing of time writes nothing to the log. Only transitions are events:
the idle lowering and its undoing (`memory.decayed` reason "idle"/"refresh"), summaries, archives,
revivals, merges, dedups; the processor publishes a `memory.decayed` besides those only when the
importance it decides on has drifted from what readers compute by `decay_min_change` or more
(consolidation.py, _age_one). Logs written before this held a `memory.decayed` for every step of
0.01: they replay to the same read models, since each such event is a new published value.

Only active memories decay: superseded, merged, deduped and archived ones keep the importance they
last had, as the processor's ledger does (they left it).
"""
from __future__ import annotations

DAY = 86400.0


def importance_at(published: float, published_at: float, now: float, decay_rate: float) -> float:
    """`published` (set at epoch seconds `published_at`) decayed to `now`, in [0, 1], 4 digits."""
    days = max(0.0, (now - published_at) / DAY)
    factor: float = decay_rate ** days       # float ** float is typed Any (a negative base gives a complex)
    return round(min(1.0, max(0.0, published * factor)), 4)


def decays(status: str) -> bool:
    """Whether a memory in this status is aging (only the working set is)."""
    return status == "active"
