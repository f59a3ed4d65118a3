"""The memory worker's start-up gate: refuse to decide under another rules profile than the log's.

Two memory workers whose environments differ would decide differently from the same facts, each
for its own partitions, silently. So before the worker joins its consumer group, it reads which
rules profile (domain/rules_profile.py) governs each partition of the memory topic:
the profile of the partition's newest record that is either a memory-processor decision (its
`rules_profile`) or a `rules.adopted` event. A partition governed by another profile makes the
worker refuse (ProfileMismatch: the message names each differing setting, old and new value;
exit code 2, and the supervisor does not restart it), unless it is told to roll over
(MEMSTREAM_RULES_ROLLOVER=1, or `memstream worker memory --rollover`).

A partition that is empty, or whose newest decision was written before decisions carried a
profile, is not a conflict: nothing says which settings made it. Every partition not already
governed by this worker's profile gets a `rules.adopted` event (user `system:rules`, an explicit
partition, like the decay ticks) with the full profile, written before any decision under it;
after a roll-over those events are the partition's newest, so the next start passes without it.
The full profile of a differing hash is found by reading further back in the same partition for
its `rules.adopted`: only on a refusal, so the usual start reads a few records per partition.

Limits, on purpose: two workers started at the same moment with different profiles on an empty
topic both adopt theirs (the gate is a start-up check, not a lock); a worker that keeps running
while another rolls over keeps its own profile, and its decisions say so.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from confluent_kafka import Producer

from adapters.bus import LogReader, producer_config
from kernel.config import Settings
from domain.rules_profile import (ProfileMismatch, describe_differences, differences, env_name,
                                            profile_hash)
from adapters.kafka_auth import WORKER, kafka_config
from schemas.codec import KeyRing, encode, make_envelope
from schemas.peek import peek
from schemas.events import ALL_EVENTS, DecisionData, RulesAdopted

log = logging.getLogger("memstream.memory")

RULES_USER = "system:rules"
PRODUCER = "memory-processor/1"
DECISION_TYPES = frozenset(c.TYPE for c in ALL_EVENTS if issubclass(c, DecisionData))
FIRST_WINDOW = 256   # records read back per partition at first; each further window is 4x wider


@dataclass
class PartitionRules:
    partition: int
    governing: str | None = None                             # hash of the newest decision / adoption
    profiles: dict[str, dict] = field(default_factory=dict)  # hash → full profile, from rules.adopted seen


@dataclass
class GateResult:
    profile: str
    adopted: list[int]          # partitions given a rules.adopted event now
    rolled_over: dict[int, str]  # partition → the profile it replaced


def _peek(raw: bytes | None) -> dict | None:
    rec = peek(raw)
    return rec if isinstance(rec.get("data"), dict) else None


def governing_profile(rec: dict) -> tuple[bool, str | None, dict | None]:
    """(does this record govern its partition, its profile hash, the full profile if it carries one).
    Only the memory processor's own records count: anyone else's decision-typed record is not a decision."""
    if not str(rec.get("producer", "")).startswith("memory-processor"):
        return False, None, None
    data = rec["data"]
    if rec.get("type") == RulesAdopted.TYPE:
        settings = data.get("settings")
        return True, data.get("profile"), settings if isinstance(settings, dict) else None
    if rec.get("type") in DECISION_TYPES:
        return True, data.get("rules_profile"), None
    return False, None, None


def _backwards(r: LogReader, topic: str, partition: int, low: int, high: int) -> Iterator[dict]:
    """The partition's records, newest first, read in growing windows from the end."""
    end, window = high, FIRST_WINDOW
    while end > low:
        start = max(low, end - window)
        chunk = [rec for m in r.records({(topic, partition): (start, end)}) if (rec := _peek(m.value())) is not None]
        yield from reversed(chunk)
        end, window = start, window * 4


def read_partition(r: LogReader, topic: str, partition: int, low: int, high: int,
                   resolve: set[str] | None = None) -> PartitionRules:
    """Which profile governs the partition; with `resolve`, read on until the full profile of each
    of those hashes (its rules.adopted) is found, or the partition's start."""
    found = PartitionRules(partition)
    governed = False
    for rec in _backwards(r, topic, partition, low, high):
        counts, profile, full = governing_profile(rec)
        if not counts:
            continue
        if full is not None and profile:
            found.profiles.setdefault(profile, full)
        if not governed:
            governed, found.governing = True, profile
            if not resolve:
                break
        if resolve is not None and resolve <= found.profiles.keys():
            break
    return found


def _reader(settings: Settings) -> LogReader:
    # assign() only, never committed; a `<ns>.` group, which the worker's ACLs allow
    return LogReader(kafka_config(settings, WORKER), group_id=f"{settings.namespace}.rules-gate", idle_timeout_s=30.0)


def check_profile(settings: Settings, profile: dict, keys: KeyRing, *, rollover: bool = False,
                  worker: str = "memory") -> GateResult:
    """Refuse (ProfileMismatch) or adopt `profile` on every partition of the memory topic."""
    topic = settings.topic("memory")
    mine = profile_hash(profile)
    with _reader(settings) as r:
        # (low, high) per partition; waited for while a just-created topic's partition has no leader yet
        marks = {p: r.watermarks((topic, p), timeout=10, wait_s=30) for p in r.partitions(topic)}
        found = {p: read_partition(r, topic, p, *marks[p]) for p in marks}
        others: dict[str, list[int]] = {}
        for p, f in found.items():
            if f.governing is not None and f.governing != mine:
                others.setdefault(f.governing, []).append(p)
        if others and not rollover:
            known: dict[str, dict] = {}
            for h, ps in others.items():   # the full profile of each: its rules.adopted, further back
                for p in ps:
                    more = read_partition(r, topic, p, *marks[p], resolve={h})
                    if h in more.profiles:
                        known[h] = more.profiles[h]
                        break
            raise ProfileMismatch(_refusal(topic, mine, profile, others, known))
    todo = {p: f.governing for p, f in found.items() if f.governing != mine}
    if todo:
        _adopt(settings, topic, mine, profile, todo, keys, worker, rollover)
    rolled = {p: g for p, g in todo.items() if g is not None}
    if rolled:
        log.warning("rules profile %s rolled over %s on partitions %s (MEMSTREAM_RULES_ROLLOVER)", mine,
                    ", ".join(sorted(set(rolled.values()))), ", ".join(map(str, sorted(rolled))))
    elif todo:
        log.info("rules profile %s adopted on partitions %s", mine, ", ".join(map(str, sorted(todo))))
    return GateResult(mine, sorted(todo), rolled)


def _refusal(topic: str, mine: str, profile: dict, others: dict[str, list[int]], known: dict[str, dict]) -> str:
    parts = []
    for h, ps in sorted(others.items()):
        where = f"partition{'s' if len(ps) > 1 else ''} {', '.join(map(str, sorted(ps)))}"
        if h in known:
            diff = describe_differences(differences(known[h], profile)) or "(no setting differs: another profile version)"
        else:
            diff = "its settings are not in the log (no rules.adopted event of it found)"
        parts.append(f"rules profile {h} ({where}) differs from this worker's {mine}: {diff}")
    return (f"memory worker refused to start: the decisions in {topic} were made under other rules. "
            + "; ".join(parts) + f". Start it with the same settings, or set {env_name('rules_rollover')}=1 "
            "(or `memstream worker memory --rollover`) to decide under the new ones from now on "
            "(earlier decisions keep theirs)")


def _adopt(settings: Settings, topic: str, mine: str, profile: dict, todo: dict[int, str | None], keys: KeyRing,
           worker: str, rollover: bool) -> None:
    producer = Producer(producer_config(settings, WORKER))
    errors: list = []
    now = datetime.now(UTC)   # a fresh event (when the worker started), like a published turn
    for p, previous in sorted(todo.items()):
        data = RulesAdopted(profile=mine, settings=profile, previous=previous,
                            rollover=rollover and previous is not None, worker=worker)
        env = make_envelope(data, user=RULES_USER, time=now, producer=PRODUCER)
        producer.produce(topic, value=encode(env, keys), key=RULES_USER.encode(), partition=p,
                         on_delivery=lambda err, msg: err and errors.append(err))
    left = producer.flush(30)
    if left or errors:
        raise RuntimeError(f"rules.adopted not delivered to {topic}: {errors or f'{left} left'}")
