"""Every workaround memstream needs in faust-streaming (and its aiokafka), in one place.

Nothing else in the project touches a private attribute of faust or aiokafka, or depends on a
faust behaviour that is not its documented API (tests/fast/test_faust_adapter.py holds both: a
scan of the sources, and one test per workaround that fails when the faust behaviour it relies on
changes). The workarounds are written for faust-streaming 0.15.x (FAUST_SUPPORTED, the bound in
pyproject.toml): a new faust minor version is taken only after those tests pass on it.

1. At-least-once on faust's offset bookkeeping: no commit over a record that was never
   processed, and such a record re-read instead of lost (`install`, `OffsetHealer`, `attach`).
2. A commit that never finishes exits the worker (`commit_stalled_for`, checked by `OffsetHealer`).
3. A table's store options are copied before faust gets them: its RocksDB store pops keys from
   the dict it is given (`table_options`).
4. A table's size for the worker's health, from faust's in-memory or RocksDB store
   (`table_size`: the RocksDB store keeps its databases in a private attribute).
5. The broker's append time of a faust message: faust turns aiokafka's milliseconds into float
   seconds, or None/0 when the record has none (`appended_ms`).

The offsets, in detail (1 and 2). Two faust defects together lost one fact in a kill -9 fault run (facts:1:37 was never decided,
and the memory group's committed offset stood past it):
1. faust#596: around a rebalance and table recovery a fetched record can be skipped by the
   stream (a stale generation id, queues cleared on resume, a fetch batch cut short) while the
   later records of its partition are processed and acked; nothing re-reads it.
2. faust#606: `Consumer._new_offset` commits over one unacked offset at the head of the acks
   (`min(acked) - committed > 1`, an off-by-one: `committed` is the next offset to read), so the
   skipped record is committed past. A hole of two or more blocks that partition's commits until
   the worker restarts — and a long uncommitted tail is re-read past the memory processor's
   applied window.

`install()` fixes 2: a partition whose acks do not start at its committed offset is not committed
(faust's registered gaps, offsets that do not exist in a compacted log, still count as acked).
`OffsetHealer` turns 1 from a stall into a re-read: a hole at the head of a partition's acks that
no in-flight record explains, seen on two consecutive checks, is read again and handed to the
streams. A healed record is processed after later ones of its partition (its decisions are made
on a state that already holds them); a record handed over twice is absorbed as any re-read is
(derived ids, the memory processor's applied window).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from importlib.metadata import version

from faust.transport.consumer import Consumer

log = logging.getLogger("memstream.offsets")

# The faust-streaming versions these workarounds are written and tested for: [first, last), the
# same bound as pyproject.toml's dependency.
FAUST_SUPPORTED = ("0.15.3", "0.16")


def faust_version() -> str:
    return version("faust-streaming")


def faust_supported(v: str | None = None) -> bool:
    """Whether faust-streaming `v` (default: the installed one) is within FAUST_SUPPORTED."""
    def key(x: str) -> tuple[int, ...]:
        return tuple(int(p) for p in x.split("+")[0].split(".")[:3] if p.isdigit())
    low, high = FAUST_SUPPORTED
    return key(low) <= key(v or faust_version()) < key(high)


def head_hole(acked: list[int], committed: int | None, gap_covers) -> tuple[int, int] | None:
    """The unacked offsets [committed, first acked) at the head of a partition's acks, or None.

    `committed` is the next offset to read (None: unknown, nothing committed yet); `gap_covers(o)`
    says whether faust registered offset o as a gap (a record that does not exist)."""
    if not acked or committed is None:
        return None
    head = min(acked)
    if head <= committed or gap_covers(committed):
        return None
    return committed, head


def tail_hole(read: int | None, committed: int | None, highwater: int | None, gap_covers) -> tuple[int, int] | None:
    """With no acks at all: the offsets [committed, read] that faust delivered (its read offset is
    the last offset handed to the streams) but no stream processed, or None. The queues being
    cleared on a resume (faust#596) drop a partition's whole tail this way, with no later ack to
    show the hole. `highwater` (the log end the fetcher last saw) rules out the state just after
    a seek, when the read offset equals the committed offset and nothing is there to read yet."""
    if read is None or committed is None or highwater is None:
        return None
    if read < committed or highwater <= committed or gap_covers(committed):
        return None
    return committed, min(read + 1, highwater)


def install() -> None:
    """Patch Consumer once (idempotent): never commit over an unacked head; time each commit."""
    if getattr(Consumer._new_offset, "memstream_guarded", False):
        return
    original = Consumer._new_offset

    def _new_offset(self, tp):
        gaps = self._gap[tp]
        committed = committed_or_log_start(self, tp)
        if committed is None and self._acked[tp]:
            return None    # nothing committed and the log start not known yet: wait for the next check
        if head_hole(self._acked[tp], committed, lambda o: bool(gaps.at(o))) is not None:
            return None
        offset = original(self, tp)
        if offset is not None:
            # faust has just taken these acks off its list; `_committed_offset` follows only when
            # the commit ends, after a producer flush that takes seconds under load. Until then
            # the offsets below are acked, not a hole (the healer read them as one and re-read
            # the first records of every partition at start-up: duplicate decisions on the log).
            acked_to(self)[tp] = offset
        return offset

    _new_offset.memstream_guarded = True
    _new_offset.memstream_original = original   # faust's own: tests/fast/test_faust_adapter.py checks its off-by-one
    Consumer._new_offset = _new_offset

    original_commit = Consumer._commit_offsets

    async def _commit_offsets(self, *args, **kwargs):
        # When this commit started (its producer flush comes first): OffsetHealer.check watches it.
        self._memstream_commit_started = time.monotonic()
        try:
            return await original_commit(self, *args, **kwargs)
        finally:
            self._memstream_commit_started = None

    _commit_offsets.memstream_original = original_commit
    Consumer._commit_offsets = _commit_offsets


def acked_to(consumer) -> dict:
    """tp -> the offset a commit in progress is committing: every offset below it was acked."""
    return consumer.__dict__.setdefault("_memstream_acked_to", {})


def faust_new_offset():
    """faust's own Consumer._new_offset, patched or not."""
    return getattr(Consumer._new_offset, "memstream_original", Consumer._new_offset)


def committed_or_log_start(consumer, tp) -> int | None:
    """The next offset the group will read on `tp`: its committed offset, or where the log starts
    when nothing is committed. faust keeps None for both "never committed" and "committed 0"
    (perform_seek maps 0 to None), and commits the first run of acks wherever it starts in that
    case: records skipped at the start of a partition's life were committed past. The log start is
    read by OffsetHealer.check (None until then)."""
    committed = consumer._committed_offset.get(tp)
    if committed is not None:
        return committed
    return getattr(consumer, "_memstream_log_start", {}).get(tp)


def acked_below(consumer, tp) -> int | None:
    """The offset below which every record of `tp` was acked: committed_or_log_start, or the offset
    a commit in progress is committing (acked_to) when that is further."""
    committed = committed_or_log_start(consumer, tp)
    pending = acked_to(consumer).get(tp)
    return pending if pending is not None and (committed is None or pending > committed) else committed


def commit_stalled_for(consumer) -> float:
    """Seconds the commit in progress has been running (0: none)."""
    started = getattr(consumer, "_memstream_commit_started", None)
    return 0.0 if started is None else time.monotonic() - started


@dataclass(frozen=True, slots=True)
class FetchedRecord:
    """A record read by `fetch_range`, shaped as the aiokafka record faust turns into a message."""
    topic: str
    partition: int
    offset: int
    timestamp: int | None
    timestamp_type: int
    headers: list
    key: bytes | None
    value: bytes | None
    checksum: None = None

    @property
    def serialized_key_size(self) -> int:
        return len(self.key or b"")

    @property
    def serialized_value_size(self) -> int:
        return len(self.value or b"")


def fetch_range(kafka: dict, topic: str, partition: int, start: int, end: int,
                timeout: float = 15.0) -> list[FetchedRecord]:
    """Records [start, end) of one partition, read with the one bounded reader (adapters/bus.py
    LogReader) under a group of our own. A read cut short (the broker not answering within
    `timeout`) returns what it read: the healer checks the hole again on its next round."""
    from adapters.bus import LogReader, LogReadError
    out: list[FetchedRecord] = []
    try:
        with LogReader(kafka, group_id="memstream-offset-guard", idle_timeout_s=timeout) as reader:
            for m in reader.records({(topic, partition): (start, end)}, timeout_s=timeout):
                ts_type, ts = m.timestamp()
                out.append(FetchedRecord(m.topic(), m.partition(), m.offset(), ts if ts_type else None,
                                         max(ts_type - 1, 0), list(m.headers() or []), m.key(), m.value()))
    except LogReadError as e:
        log.warning("offset guard: reading %s[%d] %d..%d stopped after %d records: %s",
                    topic, partition, start, end, len(out), e)
    return out


class OffsetHealer:
    """Finds partitions whose acks start past their committed offset with nothing in flight there
    (records faust skipped) and hands those records to the app's streams again.

    The records are read by a consumer of our own and delivered through faust's own message
    callback, as the fetcher would: a seek would race faust's drain loop (which drops records
    below the read offset it keeps setting from the batch in hand), and only the skipped records
    are processed again, not everything after them."""

    def __init__(self, component: str, kafka: dict, redeliver_after: float = 30.0,
                 commit_stall_s: float = 120.0, on_stall=None):
        self.component = component
        self.kafka = kafka
        self.redeliver_after = redeliver_after
        self.commit_stall_s = commit_stall_s
        self.on_stall = on_stall    # called with the seconds stalled (the app exits the process)
        self.suspects: dict = {}
        self.delivered: dict = {}   # tp -> (hole, monotonic time): not again while it is queued
        self.healed = 0

    def holes(self, consumer, queued: int = 0) -> dict:
        """tp -> (first, end) of offsets delivered to the streams but never processed. `queued`:
        records waiting in the streams' queues (not tracked as in flight yet); a partition with
        no acks is judged only when nothing waits there."""
        in_flight = {(m.tp, m.offset) for m in list(consumer._unacked_messages) if not m.acked}
        out = {}
        acking = consumer.app.topics.acks_enabled_for
        for tp in set(consumer._acked) | set(consumer._read_offset):
            acked = list(consumer._acked.get(tp, ()))
            gaps = consumer._gap[tp]
            covers = lambda o, g=gaps: bool(g.at(o))  # noqa: E731
            committed = acked_below(consumer, tp)
            if acked:
                hole = head_hole(acked, committed, covers)
            elif queued or not acking(tp.topic) or tp in consumer._paused_partitions:
                continue    # records still queued, a changelog (never committed), or a partition faust holds back
            else:
                hole = tail_hole(consumer._read_offset.get(tp), committed, _highwater(consumer, tp), covers)
            if hole is not None and not any((tp, o) in in_flight for o in range(*hole)):
                out[tp] = hole
        return out

    async def check(self, app) -> int:
        """One check; returns the records handed to the streams again. Nothing is judged across a
        rebalance (its own seek re-reads from the committed offsets)."""
        # 0. A commit that never ends: faust flushes its producer first, and a batch for a
        #    partition without a leader (seen on a freshly started broker) waits out faust's
        #    20-minute request timeout while nothing of this worker is committed. Exiting hands the
        #    partitions to a restart that reads from the committed offsets: nothing is lost.
        stalled = commit_stalled_for(app.consumer)
        if stalled > self.commit_stall_s and self.on_stall is not None:
            log.error("%s: an offset commit has not finished after %.0f s (MEMSTREAM_COMMIT_STALL_S); "
                      "exiting for a restart", self.component, stalled)
            self.on_stall(stalled)
            return 0
        if app.rebalancing or getattr(app, "in_recovery", False) or not app.flow_control.is_active():
            self.suspects = {}
            # a rebalance discards the commits of revoked partitions and seeks to what is committed
            acked_to(app.consumer).clear()
            return 0
        consumer = app.consumer
        await _learn_log_starts(consumer)
        holes = self.holes(consumer, queued=_queued(app))
        now = time.monotonic()
        healed = 0
        for tp, hole in holes.items():
            if self.suspects.get(tp) != hole:
                continue   # 1. seen once: maybe a record between fetch and stream; judge on the next check
            last = self.delivered.get(tp)
            if last is not None and last[0] == hole and now - last[1] < self.redeliver_after:
                continue   # 2. handed over already and waiting in the stream's queue
            log.warning("%s: offsets %d..%d of %s:%d were skipped by the stream and never processed "
                        "(faust#596); reading them again", self.component, hole[0], hole[1] - 1, tp.topic, tp.partition)
            # 3. read the hole ourselves and deliver it as faust's fetcher would
            records = await asyncio.to_thread(fetch_range, self.kafka, tp.topic, tp.partition, *hole)
            for record in records:
                await consumer.callback(consumer._to_message(tp, record))
            self.delivered[tp] = (hole, now)
            healed += len(records)
        self.suspects = holes
        self.healed += healed
        return healed


async def _learn_log_starts(consumer) -> None:
    """Where the log starts, for acked partitions with nothing committed (see committed_or_log_start)."""
    known = consumer.__dict__.setdefault("_memstream_log_start", {})
    wanted = [tp for tp in list(consumer._acked)
              if consumer._committed_offset.get(tp) is None and tp not in known and consumer._acked.get(tp)]
    if not wanted:
        return
    try:
        starts = await consumer.earliest_offsets(*wanted)
    except Exception as exc:   # noqa: BLE001 - a broker hiccup: the commit waits for the next check
        log.info("log start offsets not read (%r); commits of %d partitions wait", exc, len(wanted))
        return
    known.update({tp: off for tp, off in starts.items() if off is not None and off >= 0})


def _highwater(consumer, tp) -> int | None:
    try:
        return consumer.highwater(tp)
    except Exception:       # not assigned (any more), or no fetch response seen yet: unknown
        return None


def _queued(app) -> int:
    """Records in the streams' queues: delivered by the fetcher, not yet taken by a stream."""
    return sum(t._queue.qsize() for t in list(app.topics._topics) if getattr(t, "_queue", None) is not None)


def attach(app, component: str, kafka: dict, every: float = 2.0, commit_stall_s: float = 120.0,
           on_stall=None) -> OffsetHealer:
    """Guard an app's commits and heal skipped records every `every` seconds; `on_stall` is called
    when a commit has run longer than `commit_stall_s`."""
    install()
    healer = OffsetHealer(component, kafka, commit_stall_s=commit_stall_s, on_stall=on_stall)

    @app.timer(every)
    async def heal_skipped_offsets() -> None:
        await healer.check(app)

    return healer


# -- tables -----------------------------------------------------------------------------------

def table_options(options: dict | None) -> dict | None:
    """The options for an app.Table: a copy, as faust's RocksDB store pops keys ("driver",
    "read_only") from the dict it is given, and one module-level dict serves every table."""
    return None if options is None else dict(options)


def table_size(table) -> dict:
    """Keys and value bytes of a state table. In memory: exact (a pass over the values). On RocksDB
    a pass would read the whole store from disk every few seconds, so RocksDB's own estimates per
    partition: keys, and the bytes of its live data plus what is still in its write buffers.
    (faust's RocksDB store keeps its open databases, one per partition, in `_dbs`.)"""
    dbs = getattr(table.data, "_dbs", None)
    if dbs is None:
        values = list(table.values())
        return {"keys": len(values), "bytes": sum(len(v) for v in values if v)}
    keys = size = 0
    for db in list(dbs.values()):
        keys += db.property_int_value("rocksdb.estimate-num-keys") or 0
        size += (db.property_int_value("rocksdb.estimate-live-data-size") or 0) + (
            db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0)
    return {"keys": keys, "bytes": size, "estimated": True}


# -- messages ---------------------------------------------------------------------------------

def appended_ms(msg) -> int | None:
    """The broker's timestamp of a faust message in milliseconds, None when it has none: faust
    (its aiokafka driver's _to_message) gives it in float seconds, None (or 0) when absent."""
    return round(msg.timestamp * 1000) if msg.timestamp else None
