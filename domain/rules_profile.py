"""The rules profile: the settings that change the memory processor's decisions, as one hash.

Two memory workers with different thresholds decide differently from the same facts; before
this, nothing in the log said which settings a decision was made under. The profile is the
canonical form of `Rules` (domain/memory_state.py), named by the settings it comes
from, so a message can say "MEMSTREAM_DEDUP_THRESHOLD: 0.98 → 0.9". Its hash (12 hex of the
sha256 of canonical JSON) is stamped on every decision event (`rules_profile`), and the full
profile is written once per new profile in a `rules.adopted` event (streams/rules_gate.py).

What is in it, and why: exactly what `Rules.from_settings` reads, i.e. everything write-time
decisions (memory_rules.py) and consolidation/forgetting (consolidation.py) depend on. Left out:
- recall weights (recall_*): they rank what the query side returns; the memory.recalled event
  records the ids that recall returned, so the processor's decisions do not depend on them;
- tick_slice_users and partitions: how a tick is sliced and routed, not what is decided for a user;
- the embedder and its model: the extractor computes embeddings once and records them in the fact;
- the session summarizer's settings: it writes session summaries and episodic facts, not memory
  decisions (the episodic facts come back through the facts topic and are decided under this profile).

Pure: no I/O, no clock.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from domain.memory_state import Rules
from kernel.errors import ConfigError

PROFILE_VERSION = 1   # part of the hashed content: a change of what the profile means changes every hash


def _ttl(kind: str) -> Callable[[Rules], float]:
    return lambda r: dict(r.ttl_by_kind).get(kind, r.expire_ttl_days)


# setting name → how its effective value is read from Rules (the one place decisions read it from).
FROM_RULES: dict[str, Callable[[Rules], Any]] = {
    "dedup_threshold": lambda r: r.dedup_threshold,
    "merge_threshold": lambda r: r.merge_threshold,
    "link_threshold": lambda r: r.link_threshold,
    "link_max": lambda r: r.link_max,
    "recent_window": lambda r: r.recent_window,
    "consolidation_every": lambda r: r.consolidate_every,
    "consolidation_sweep_max": lambda r: r.sweep_max,
    "decay_rate": lambda r: r.decay_rate,
    "decay_min_change": lambda r: r.decay_min_change,
    "expire_ttl_days": lambda r: r.expire_ttl_days,
    "ttl_general_days": _ttl("general"),
    "ttl_preference_days": _ttl("preference"),
    "expire_min_importance": lambda r: r.expire_min_importance,
    "expire_protect_in_degree": lambda r: r.protect_in_degree,
    "idle_lower_days": lambda r: r.idle_lower_days,
    "idle_factor": lambda r: r.idle_factor,
    "idle_summarize_days": lambda r: r.idle_summarize_days,
    "idle_expire_days": lambda r: r.idle_expire_days,
    "memory_summary_chars": lambda r: r.summary_chars,
    # comma-separated names, normalised (sorted, lower-case) so "policy,identity" is the same profile
    "forget_keep_kinds": lambda r: ",".join(r.keep_kinds),
    "forget_keep_tags": lambda r: ",".join(r.keep_tags),
}
# Rules fields with a setting name above (ttl_by_kind: the two per-kind TTLs).
COVERED_RULES_FIELDS = frozenset({
    "dedup_threshold", "merge_threshold", "link_threshold", "link_max", "recent_window", "consolidate_every",
    "sweep_max", "decay_rate", "decay_min_change", "expire_ttl_days", "ttl_by_kind", "expire_min_importance",
    "protect_in_degree", "idle_lower_days", "idle_factor", "idle_summarize_days", "idle_expire_days",
    "summary_chars", "keep_kinds", "keep_tags"})


def _canonical_value(value: Any) -> Any:
    # counts stay ints, every other number a float: 7 and 7.0 (a TTL typed either way) hash alike
    return value if isinstance(value, (bool, int, str)) else float(value)


def profile_of(rules: Rules) -> dict[str, Any]:
    """The profile: {setting name: effective value}, sorted by name."""
    out = {name: read(rules) for name, read in FROM_RULES.items()}
    # A per-kind TTL with no setting of its own (Rules built by hand) still counts, under the name one would get.
    out.update({f"ttl_{kind}_days": ttl for kind, ttl in dict(rules.ttl_by_kind).items()})
    return {name: _canonical_value(out[name]) for name in sorted(out)}


def canonical_json(profile: Mapping[str, Any]) -> bytes:
    return orjson.dumps({"profile_version": PROFILE_VERSION, "settings": dict(profile)}, option=orjson.OPT_SORT_KEYS)


def profile_hash(profile: Mapping[str, Any]) -> str:
    """12 hex digits of sha256 over the canonical JSON: short enough for every event, and a
    collision between the handful of profiles a deployment ever has is out of reach (48 bits)."""
    return hashlib.sha256(canonical_json(profile)).hexdigest()[:12]


def rules_hash(rules: Rules) -> str:
    return profile_hash(profile_of(rules))


def env_name(setting: str) -> str:
    return f"MEMSTREAM_{setting.upper()}"


def differences(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(setting, old value, new value) for each setting that differs; old None: unknown (every
    setting of `new` is listed with old value None)."""
    old = old or {}
    missing = object()
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name, missing), new.get(name, missing)
        if a != b:
            out.append((name, None if a is missing else a, None if b is missing else b))
    return out


def describe_differences(diffs: list[tuple[str, Any, Any]]) -> str:
    """`MEMSTREAM_DEDUP_THRESHOLD 0.98 → 0.9; …`: the variables an operator sets."""
    def show(v: Any) -> str:
        return "(not set)" if v is None else str(v)
    return "; ".join(f"{env_name(n)} {show(a)} → {show(b)}" for n, a, b in diffs)


class ProfileMismatch(ConfigError):
    """The memory topic's decisions were made under another rules profile than this worker's.

    A configuration refusal: restarting with the same environment cannot help, so the supervisor
    holds the worker (memstream/app/workers.py) instead of restarting it. Exit code 2."""
    exit_code = 2
    refusal = True
