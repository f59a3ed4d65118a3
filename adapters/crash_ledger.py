"""Crash loops: a record that kills its worker every time it is processed is dead-lettered after N tries.

A fatal error exits the worker and the supervisor restarts it from its committed positions, which
is right for a bug that a restart (or a fix) cures. A record that deterministically kills the
process (an unexpected exception on its content, a crash in a C extension, an out-of-memory kill)
would instead restart the worker forever and stall its partition. So every consumer marks what it
is about to process in a small file before processing it and clears the mark once that unit is
committed:

1. `load()` at start: a mark left behind means the previous process died with that unit in flight.
2. A batch that overlaps such a suspect span is taken apart where it overlaps: the records
   before and after stay whole units; the overlap is processed in chunks of CHUNK records (a
   suspect span larger than that: a whole projector batch) or one record at a time (a suspect
   chunk or small batch), so a crash is pinned to a single record within a crash or two, and
   the good records around it are not sacrificed (nor processed one transaction each).
3. A single record's count of crashes is 1 while it was only part of a larger suspect unit, and
   then grows by one for every crash with it alone in flight.
4. When that count reaches `limit`, `should_skip` says so: the consumer dead-letters it (reason:
   crashed the worker N times) and its position moves on.

Kill -9 from an operator also leaves a mark, which only costs the next run some smaller units: a
record is skipped only after `limit - 1` crashes with it alone in flight (after the one or two
that narrowed a batch down to it). The mark is a fixed-size pwrite into an open file, no fsync:
it must survive the process (it does, in the page cache), not the machine.
"""
from __future__ import annotations

import os
from pathlib import Path

import orjson

Position = tuple[str, int, int]          # topic, partition, offset
SLOT = 4096                              # fixed-size mark: one pwrite, never a partial old tail
CHUNK = 16                               # unit size inside a large suspect span


def ledger_path(settings, component: str) -> Path:
    """One file per process: copy k of a stage (MEMSTREAM_INSTANCE) keeps its own marks, and the
    supervisor restarts a copy under the same k, so the restart finds what it had in flight."""
    return Path(settings.stack_dir) / "run" / "inflight" / f"{settings.namespace}-{settings.worker_label(component)}.json"


class CrashLedger:
    def __init__(self, path: Path, limit: int = 3):
        self.path = Path(path)
        self.limit = max(1, limit)
        self.suspect: dict[tuple[str, int], tuple[int, int]] = {}   # (topic, partition) → [first, last]
        self.suspect_attempts = 0
        self._fd: int | None = None
        self._marked = False

    # -- start ------------------------------------------------------------------------------------

    def load(self) -> "CrashLedger":
        try:
            mark = orjson.loads(self.path.read_bytes().rstrip(b"\0 \n") or b"{}")
        except (OSError, orjson.JSONDecodeError):
            mark = {}
        self.suspect = {(t, int(p)): (int(a), int(b)) for t, p, a, b in mark.get("spans", [])}
        self.suspect_attempts = int(mark.get("attempts", 0)) if self.suspect else 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        return self

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- questions --------------------------------------------------------------------------------

    def _in_suspect(self, pos: Position) -> bool:
        span = self.suspect.get((pos[0], pos[1]))
        return span is not None and span[0] <= pos[2] <= span[1]

    def _single_suspect(self, pos: Position) -> bool:
        return list(self.suspect.items()) == [((pos[0], pos[1]), (pos[2], pos[2]))]

    def crashes(self, pos: Position) -> int:
        """How many earlier processes died with this record in flight (as far as the marks tell)."""
        if self._single_suspect(pos):
            return self.suspect_attempts
        return 1 if self._in_suspect(pos) else 0

    def should_skip(self, pos: Position) -> bool:
        return self.crashes(pos) >= self.limit

    def _suspect_size(self) -> int:
        return sum(b - a + 1 for a, b in self.suspect.values())

    def give_up(self, pos: Position, consumer: str) -> str | None:
        """The dead-letter reason if this record keeps killing `consumer` (and stop suspecting
        it: the caller dead-letters it and commits past); None to process it."""
        if not self.should_skip(pos):
            return None
        reason = f"{consumer} crashed {self.crashes(pos)} times with this record in flight"
        self.forget(pos)
        return reason

    def units(self, records: list, position_of) -> list[list]:
        """The batch as one unit, or taken apart where it overlaps the suspect span (in order, so
        each partition's records stay in their order): whole before, chunks or single records
        across the overlap, whole after."""
        inside = [i for i, r in enumerate(records) if self.suspect and self._in_suspect(position_of(r))]
        if not inside:
            return [records] if records else []
        first, last = inside[0], inside[-1] + 1
        size = CHUNK if self._suspect_size() > CHUNK else 1
        middle = records[first:last]
        return ([records[:first]] if first else []) + [middle[i:i + size] for i in range(0, len(middle), size)] \
            + ([records[last:]] if last < len(records) else [])

    # -- marks ------------------------------------------------------------------------------------

    def begin(self, positions: list[Position]) -> None:
        """Mark these records as in flight (call before processing them)."""
        if self._fd is None or not positions:
            return
        spans: dict[tuple[str, int], list[int]] = {}
        for t, p, o in positions:
            span = spans.setdefault((t, p), [o, o])
            span[0], span[1] = min(span[0], o), max(span[1], o)
        attempts = self.crashes(positions[0]) + 1 if len(positions) == 1 else 1
        self._write({"spans": [[t, p, a, b] for (t, p), (a, b) in spans.items()], "attempts": attempts,
                     "pid": os.getpid()})
        self._marked = True

    def done(self) -> None:
        """The unit is committed (or dead-lettered): nothing of it is in flight any more."""
        if self._marked:
            self._write({})
            self._marked = False

    def forget(self, pos: Position) -> None:
        """The suspect record was dead-lettered and committed past: stop treating it as suspect."""
        if self._in_suspect(pos) and self._single_suspect(pos):
            self.suspect, self.suspect_attempts = {}, 0

    def _write(self, mark: dict) -> None:
        data = orjson.dumps(mark)
        if len(data) >= SLOT:   # a batch over very many partitions: keep the count, coarsen the spans
            data = orjson.dumps({k: v for k, v in mark.items() if k != "spans"} | {"spans": mark["spans"][:64]})
        os.pwrite(self._fd, data.ljust(SLOT, b" "), 0)
