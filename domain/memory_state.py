"""The memory processor's per-user working state and its rule settings: plain data, no decisions.

Shared by the write-time rules (memory_rules.py) and consolidation (consolidation.py), which both
read and change it; kept apart so that neither of those two imports the other's internals.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

from domain.ledger import Ledger
from schemas.events import EventData

# Revival's relevance bar: an archived memory a recall returned is revived only when its recall
# score (`memory.recalled` scores; the archive penalty included) is at least this. Scores are
# 0.8 x (0.7 x sim' + 0.3 x importance) for an archived hit (docs/calibration.md): a median relevant
# LoCoMo hit (cosine 0.855, sim' 0.34) at an archived importance of ~0.2 scores ~0.24, the median
# best irrelevant one (0.78, sim' ~0) ~0.05, its 75th percentile (0.864) ~0.17, a graph neighbour
# (0.45 x its seed) ~0.15: 0.2 revives what was asked for, not what came along. A code constant
# like the rules' own logic, not a setting: a setting would enter the rules profile (every hash,
# so every running worker's rollover) and the settings table.
REVIVE_MIN_SCORE = 0.2
STATE_BYTES = b"MSv2"  # a state stored by UserState.to_bytes; older ones are JSON ("{")
APPLIED_WINDOW = 32  # facts whose decisions are kept for crash re-delivery; covers any uncommitted tail


class RuleSettings(Protocol):
    """What `Rules.from_settings` reads of kernel.config.Settings (which the pure domain may not import)."""
    @property
    def dedup_threshold(self) -> float: ...
    @property
    def link_threshold(self) -> float: ...
    @property
    def recent_window(self) -> int: ...
    @property
    def link_max(self) -> int: ...
    @property
    def merge_threshold(self) -> float: ...
    @property
    def consolidation_every(self) -> int: ...
    @property
    def consolidation_sweep_max(self) -> int: ...
    @property
    def decay_rate(self) -> float: ...
    @property
    def decay_min_change(self) -> float: ...
    @property
    def expire_ttl_days(self) -> float: ...
    @property
    def expire_min_importance(self) -> float: ...
    @property
    def expire_protect_in_degree(self) -> int: ...
    @property
    def idle_lower_days(self) -> float: ...
    @property
    def idle_factor(self) -> float: ...
    @property
    def idle_summarize_days(self) -> float: ...
    @property
    def idle_expire_days(self) -> float: ...
    @property
    def memory_summary_chars(self) -> int: ...
    @property
    def ttl_general_days(self) -> float: ...
    @property
    def ttl_preference_days(self) -> float: ...
    @property
    def forget_keep_kinds(self) -> str: ...
    @property
    def forget_keep_tags(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Rules:
    """Thresholds calibrated for the default embedder (docs/calibration.md).

    Consolidation is off (consolidate_every = 0) unless asked for; `from_settings` wires the
    configured values (default: every 5 stores).
    """
    dedup_threshold: float = 0.98
    link_threshold: float = 0.91
    recent_window: int = 50
    link_max: int = 3
    merge_threshold: float = 0.95
    consolidate_every: int = 0
    sweep_max: int = 2000
    decay_rate: float = 0.995
    decay_min_change: float = 0.01
    expire_ttl_days: float = 30.0
    expire_min_importance: float = 0.3
    protect_in_degree: int = 3
    idle_lower_days: float = 14.0
    idle_factor: float = 0.5
    idle_summarize_days: float = 30.0
    idle_expire_days: float = 60.0
    summary_chars: int = 40
    # Forgetting by kind. `expire_ttl_days` is the TTL of every kind not named here; a kind mapped
    # to 0 (or in `keep_kinds`), and a memory with a tag in `keep_tags`, is never archived by age
    # and skips progressive forgetting (its importance still decays). The defaults here are the
    # seed's single TTL; Settings carry the measured per-kind defaults.
    ttl_by_kind: tuple[tuple[str, float], ...] = ()
    keep_kinds: tuple[str, ...] = ()
    keep_tags: tuple[str, ...] = ()

    def ttl_days(self, kind: str | None, pinned: bool = False) -> float | None:
        """Days after which a memory of this kind may be archived by age; None: never."""
        if pinned or kind in self.keep_kinds:
            return None
        ttls: dict[str | None, float] = dict(self.ttl_by_kind)
        ttl = ttls.get(kind, self.expire_ttl_days)
        return ttl if ttl > 0 else None

    @classmethod
    def from_settings(cls, settings: RuleSettings) -> "Rules":
        ttl_by_kind = (("general", settings.ttl_general_days), ("preference", settings.ttl_preference_days))
        return cls(settings.dedup_threshold, settings.link_threshold, settings.recent_window, settings.link_max,
                   merge_threshold=settings.merge_threshold, consolidate_every=settings.consolidation_every,
                   sweep_max=settings.consolidation_sweep_max, decay_rate=settings.decay_rate,
                   decay_min_change=settings.decay_min_change, expire_ttl_days=settings.expire_ttl_days,
                   expire_min_importance=settings.expire_min_importance,
                   protect_in_degree=settings.expire_protect_in_degree, idle_lower_days=settings.idle_lower_days,
                   idle_factor=settings.idle_factor, idle_summarize_days=settings.idle_summarize_days,
                   idle_expire_days=settings.idle_expire_days, summary_chars=settings.memory_summary_chars,
                   ttl_by_kind=ttl_by_kind, keep_kinds=_names(settings.forget_keep_kinds),
                   keep_tags=_names(settings.forget_keep_tags))


def _names(csv: str) -> tuple[str, ...]:
    return tuple(sorted({x.strip().lower() for x in csv.split(",") if x.strip()}))


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
    # [category, pinned] as last copied into (or found in) its ledger entry by consolidation's
    # note_kinds: while both are unchanged, the entry need not be read again to check.
    noted: list[Any] | None = None

    def to_list(self, vector: bool = True) -> list[Any]:
        """`vector` False: its dimension in place of the vector (UserState.to_bytes stores them apart)."""
        vec = base64.b64encode(self.vec.astype("<f4").tobytes()).decode() if vector else int(self.vec.shape[0])
        return [self.memory_id, vec, self.importance, self.category, self.slot_hint, self.tags, self.key, self.value,
                self.access_count, *([self.noted] if self.noted is not None else [])]

    @classmethod
    def from_list(cls, x: list[Any], vectors: memoryview | None = None, at: int = 0) -> "Recent":
        """`vectors`: where to_list(vector=False) left them, this one's starting at float `at`."""
        if isinstance(x[1], int):
            if vectors is None:
                raise ValueError("a window entry stored without its vector, and no vectors given")
            return cls(x[0], np.frombuffer(vectors, dtype="<f4", count=x[1], offset=4 * at).copy(), *x[2:])
        return cls(x[0], np.frombuffer(base64.b64decode(x[1]), dtype="<f4").copy(), *x[2:])


@dataclass(slots=True)
class UserState:
    prefs: dict[str, PrefState] = field(default_factory=dict)
    recent: list[Recent] = field(default_factory=list)  # oldest first
    last_memory_id: str | None = None
    applied: dict[str, list[tuple[str, str, dict[str, Any]]]] = field(default_factory=dict)
    clock: float = 0.0          # the user's clock: newest event time seen (epoch s); decisions never go back in time
    stores: int = 0             # stores since the last consolidation
    dirty: list[str] = field(default_factory=list)  # memories created/reinforced/merged since the last consolidation
    cursor: int = 0             # ledger bucket the next store-triggered sweep starts at
    # The user's entities and current relations (domain/relation_rules.py GraphState,
    # as its dict): kept here so one writer per user decides relations as it decides memories.
    graph: dict[str, Any] = field(default_factory=dict)
    # When each ledger bucket next needs aging: bucket -> (due event time or None for never, live
    # entries), made under the rules profile `aging_rules` (domain/aging_schedule.py).
    aging: dict[int, tuple[float | None, int]] = field(default_factory=dict)
    aging_rules: str | None = None
    # Not part of to_dict: the processor stores the ledger's buckets separately (see ledger.py).
    ledger: Ledger = field(default_factory=Ledger)
    # Nor this: where the processor stored the window's vectors as this state was loaded
    # (streams/window_vectors.py); opaque to the rules.
    stored_vectors: Any = None

    def to_bytes(self) -> bytes:
        """What the processor stores: STATE_BYTES, the JSON's length (4 bytes), to_dict's JSON with
        each window vector's dimension in its place, then the vectors as little-endian float32.
        The window is most of a state (50 x 384 floats): as base64 inside JSON, sealed and
        base64'd again, it was 145 KB a user rewritten on every fact; this is ~80 KB, no base64."""
        head = orjson.dumps(self.to_dict(vectors=False))
        return b"".join((STATE_BYTES, len(head).to_bytes(4, "big"), head,
                         *(r.vec.astype("<f4").tobytes() for r in self.recent)))

    @classmethod
    def from_bytes(cls, data: bytes, ledger: Ledger | None = None) -> "UserState":
        """The inverse of to_bytes, and of orjson.dumps(to_dict()) (states stored before to_bytes)."""
        if not data.startswith(STATE_BYTES):
            return cls.from_dict(orjson.loads(data), ledger)
        n = int.from_bytes(data[4:8], "big")
        return cls.from_dict(orjson.loads(data[8:8 + n]), ledger, memoryview(data)[8 + n:])

    def to_dict(self, vectors: bool = True) -> dict[str, Any]:
        return {"prefs": {k: [p.version, p.value, p.event_id, p.memory_id] for k, p in self.prefs.items()},
                "recent": [r.to_list(vectors) for r in self.recent],
                "last": self.last_memory_id,
                "applied": self.applied,
                "clock": self.clock, "stores": self.stores, "dirty": self.dirty, "cursor": self.cursor,
                # off the saved state while empty: a user who never named anyone keeps its old shape
                **({"graph": self.graph} if self.graph else {}),
                **({"aging": {"rules": self.aging_rules, "plan": [[b, due, n] for b, (due, n) in sorted(self.aging.items())]}}
                   if self.aging else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any], ledger: Ledger | None = None,
                  vectors: memoryview | list[np.ndarray] | None = None) -> "UserState":
        """`vectors`: the window's vectors where to_dict(vectors=False) left them out: one buffer of
        them all (to_bytes), or one array per entry (stored apart: streams/window_vectors.py)."""
        recent, at = [], 0
        for i, x in enumerate(d.get("recent", [])):
            if isinstance(vectors, list):
                recent.append(Recent(x[0], vectors[i], *x[2:]))
                continue
            recent.append(Recent.from_list(x, vectors, at))
            at += x[1] if isinstance(x[1], int) else 0
        return cls(prefs={k: PrefState(*v) for k, v in d.get("prefs", {}).items()},
                   recent=recent,
                   last_memory_id=d.get("last"),
                   applied={k: [tuple(x) for x in v] for k, v in d.get("applied", {}).items()},
                   clock=d.get("clock", 0.0), stores=d.get("stores", 0), dirty=list(d.get("dirty", [])),
                   cursor=d.get("cursor", 0), graph=d.get("graph") or {},
                   aging={b: (due, n) for b, due, n in (d.get("aging") or {}).get("plan", [])},
                   aging_rules=(d.get("aging") or {}).get("rules"),
                   ledger=ledger if ledger is not None else Ledger())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserState) and self.to_dict() == other.to_dict()


@dataclass(frozen=True, slots=True)
class Decision:
    tag: str          # the derived event id is derived_id(fact event id, tag)
    data: EventData
    at: float | None = None  # event time (epoch s) when it is not the cause's own time (consolidation: the user's clock)
