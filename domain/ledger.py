"""The memory ledger: one compact entry per live memory of a user, for decay, archiving and forgetting.

The processor's recent window holds at most `recent_window` memories (with embeddings, for dedup,
merge and links). Decay and expiry concern *every* live memory, so each one also has a ledger
entry: its content (for summaries and merges), base importance and the time it decays from,
creation and last access times (event time), counters, its forgetting stage, and its incoming and
outgoing FOLLOWS/SIMILAR_TO edges (the graph in-degree that protects it from expiry, known from the
processor's own decisions, never from Neo4j). No vectors: ~150 bytes a memory.

The ledger is split into BUCKETS buckets by a stable hash of the memory id, stored as separate
(sealed) values of the processor's ledger table, so a decision rewrites only the buckets it
touched: a store touches 1-5 buckets whatever the user's size, and no single value grows past
~1/64 of the user's memories (a 10,000-memory user: ~25 KB a bucket, far below Kafka's message limit).

Archived memories (forgetting archives, it never deletes: DESIGN.md) leave the live ledger but keep a
smaller record in their bucket, under the key ARCHIVE_KEY: no content and no provenance (both stay
in the read models), just what a revival needs to put the memory back into aging — kind, base and
last importance, times, counters and its edges. At most ARCHIVE_CAP records a bucket (8,192 a
user); past that the oldest archived (then the smallest id) is dropped from the ledger: it stays
archived and recallable in the read models, but a recall no longer revives it. Deterministic.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

BUCKETS = 64
EDGE_CAP = 8    # incoming edges remembered per memory: enough to know in-degree >= any sane protection level
FACTS_CAP = 32  # provenance fact ids remembered per memory (merges append their parents')
ARCHIVE_KEY = "~archived"  # not a memory id (those are UUIDs): the bucket's archived records
ARCHIVE_CAP = 128          # archived records kept per bucket (x BUCKETS = 8,192 a user)


def bucket_of(memory_id: str) -> int:
    """Stable across processes and versions (not Python's salted hash)."""
    return int.from_bytes(hashlib.blake2b(memory_id.encode(), digest_size=4).digest(), "big") % BUCKETS


def add_capped(items: list[str], item: str, cap: int = EDGE_CAP) -> None:
    if item not in items and len(items) < cap:
        items.append(item)


@dataclass(slots=True)
class Entry:
    content: str
    base: float            # importance when last (re)stated: creation, reinforcement, merge
    anchor: float          # epoch seconds (event time) it decays from
    created: float         # epoch seconds (event time) of creation; age for the TTL
    importance: float      # as last decided: the value merges, dedups and the TTL compare (stepped by decay_min_change)
    last_access: float     # epoch seconds: creation, reinforcement, merge or recall
    access: int = 0        # access_count as published (reinforcements, merges)
    recalls: int = 0       # times returned by recall (memory.recalled)
    stage: int = 0         # progressive forgetting: 0 active, 1 weight lowered, 2 summarised
    inc: list[str] = field(default_factory=list)    # sources of incoming FOLLOWS/SIMILAR_TO edges
    out: list[str] = field(default_factory=list)    # targets of outgoing FOLLOWS/SIMILAR_TO edges
    facts: list[str] = field(default_factory=list)  # provenance: the facts this memory was built from
    kind: str | None = None  # its category (TTL by kind); None until consolidation saw it in the window
    pinned: bool = False     # a tag that keeps it from age-based forgetting (e.g. "decision")
    # What readers hold: the importance last published in an event and that event's time (epoch s).
    # They decay it themselves (domain/decay.py); None for entries stored before decay was a function.
    shown: float | None = None
    shown_at: float | None = None

    def to_list(self) -> list[Any]:
        return [self.content, self.base, self.anchor, self.created, self.importance, self.last_access, self.access,
                self.recalls, self.stage, self.inc, self.out, self.facts, self.kind, self.pinned, self.shown,
                self.shown_at]

    @classmethod
    def from_list(cls, x: list[Any]) -> "Entry":
        # entries stored before kinds were kept have 12 fields, before decay was a function 14
        # (ignore: mypy lets the leading *x[:9] fill every parameter; the slices are 9 + 3 + up to 4 fields)
        return cls(*x[:9], list(x[9]), list(x[10]), list(x[11]), *x[12:16])  # type: ignore[call-arg]

    def published(self, importance: float, at: float) -> None:
        """An event carried `importance` at event time `at`: what readers decay from now on."""
        self.shown, self.shown_at = importance, at

    def archived_record(self, at: float) -> list[Any]:
        """The compact record an archived memory keeps (no content, no provenance)."""
        return [self.kind, self.pinned, self.base, self.anchor, self.created, self.importance, self.last_access,
                self.access, self.recalls, at, list(self.inc), list(self.out)]

    @classmethod
    def from_archived(cls, x: list[Any]) -> tuple["Entry", float]:
        """(entry without content, archived-at time) from an archived record."""
        kind, pinned, base, anchor, created, importance, last_access, access, recalls, at, inc, out = x
        return cls("", base, anchor, created, importance, last_access, access, recalls, 2, list(inc), list(out), [],
                   kind, pinned), at

    @property
    def in_degree(self) -> int:
        return len(self.inc)


class Ledger:
    """A user's ledger, loaded bucket by bucket on demand; `dirty` names the buckets to write back.

    `load(bucket)` returns the stored {memory_id: entry list} or None; without it the ledger is
    purely in memory (tests, benchmarks).
    """

    def __init__(self, load: Callable[[int], dict[str, Any] | None] | None = None) -> None:
        self._load = load
        self._buckets: dict[int, dict[str, Entry]] = {}
        self._archives: dict[int, dict[str, list[Any]]] = {}
        self.dirty: set[int] = set()

    def bucket(self, b: int) -> dict[str, Entry]:
        got = self._buckets.get(b)
        if got is None:
            raw = dict(self._load(b) or {}) if self._load is not None else {}
            self._archives[b] = {k: list(v) for k, v in (raw.pop(ARCHIVE_KEY, None) or {}).items()}
            got = self._buckets[b] = {k: Entry.from_list(v) for k, v in raw.items()}
        return got

    def _archive(self, b: int) -> dict[str, list[Any]]:
        self.bucket(b)
        return self._archives[b]

    def loaded(self) -> list[int]:
        """The buckets read so far (or written without being read)."""
        return sorted(self._buckets)

    def get(self, memory_id: str) -> Entry | None:
        return self.bucket(bucket_of(memory_id)).get(memory_id)

    def edit(self, memory_id: str) -> Entry | None:
        """The entry, marked to be written back (callers mutate it in place)."""
        b = bucket_of(memory_id)
        entry = self.bucket(b).get(memory_id)
        if entry is not None:
            self.dirty.add(b)
        return entry

    def put(self, memory_id: str, entry: Entry) -> None:
        b = bucket_of(memory_id)
        self.bucket(b)[memory_id] = entry
        self.dirty.add(b)

    def pop(self, memory_id: str) -> Entry | None:
        """The memory leaves the ledger entirely (live or archived): its entry, or None if unknown."""
        b = bucket_of(memory_id)
        entry = self.bucket(b).pop(memory_id, None)
        record = self._archive(b).pop(memory_id, None)
        if entry is None and record is not None:
            entry = Entry.from_archived(record)[0]
        if entry is not None:
            self.dirty.add(b)
        return entry

    # -- the archive -------------------------------------------------------------------------

    def archive(self, memory_id: str, at: float) -> Entry | None:
        """Move a live memory to the archive (a compact record); its entry, or None if not live."""
        b = bucket_of(memory_id)
        entry = self.bucket(b).pop(memory_id, None)
        if entry is None:
            return None
        archive = self._archive(b)
        archive[memory_id] = entry.archived_record(at)
        while len(archive) > ARCHIVE_CAP:  # the oldest archived goes (then the smallest id): deterministic
            del archive[min(archive, key=lambda k: (archive[k][9], k))]
        self.dirty.add(b)
        return entry

    def archived(self, memory_id: str) -> tuple[Entry, float] | None:
        """(entry without content, archived-at time) of an archived memory the ledger still knows."""
        record = self._archive(bucket_of(memory_id)).get(memory_id)
        return None if record is None else Entry.from_archived(record)

    def unarchive(self, memory_id: str, entry: Entry) -> None:
        """Put an archived memory back among the live ones, as `entry`."""
        b = bucket_of(memory_id)
        self._archive(b).pop(memory_id, None)
        self.bucket(b)[memory_id] = entry
        self.dirty.add(b)

    def drop_archived_edge(self, memory_id: str, source: str) -> None:
        """An incoming edge of an archived memory is gone (its source was forgotten)."""
        b = bucket_of(memory_id)
        record = self._archive(b).get(memory_id)
        if record is not None and source in record[10]:
            record[10].remove(source)
            self.dirty.add(b)

    def archived_count(self) -> int:
        return sum(len(self._archive(b)) for b in range(BUCKETS))

    def items(self) -> Iterator[tuple[str, Entry]]:
        """Every entry (loads every bucket), in bucket then id order: deterministic."""
        for b in range(BUCKETS):
            bucket = self.bucket(b)
            for mid in sorted(bucket):
                yield mid, bucket[mid]

    def __len__(self) -> int:
        return sum(len(self.bucket(b)) for b in range(BUCKETS))

    def dump(self, b: int) -> dict[str, Any]:
        """{memory_id: entry list}, plus the archived records under ARCHIVE_KEY ({memory_id: record})."""
        out: dict[str, Any] = {k: e.to_list() for k, e in self.bucket(b).items()}
        if self._archives[b]:
            out[ARCHIVE_KEY] = {k: list(v) for k, v in sorted(self._archives[b].items())}
        return out

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every non-empty bucket (for tests and benchmarks; the processor stores buckets one by one)."""
        return {str(b): d for b in range(BUCKETS) if (d := self.dump(b))}

    @classmethod
    def from_dict(cls, d: dict[str, dict[str, Any]]) -> "Ledger":
        return cls(lambda b: d.get(str(b)))
