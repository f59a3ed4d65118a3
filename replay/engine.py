"""The replay engine: read the log once, decode each record once, apply it to several projectors.

A live projector (projections/runner.py) is a consumer-group member that runs forever. A replay
is bounded: it assigns every partition explicitly, reads from the lowest stored position of the
projectors it feeds up to a fixed end (the log end when it started, or exact per-partition bounds
for a catch-up), and stops. Everything else is the live runner's contract, unchanged:
- each projector's `apply(items, positions)` writes rows and positions in one transaction, so
  an interrupted replay resumes from the positions the projector stored (law 3);
- every record advances the position, including ignored ones, unreadable ones and watermarks;
- records go through `schemas.codec.decode`, so old versions are upcast on the way (law 5) and
  erased users' records read as erased (their key is gone);
- no embedder and no LLM: projectors only copy what the events recorded (law 2).

Records that fail to decode were dead-lettered when the live pipeline first read them; a replay
counts them (`ReplayStats.undecodable`) instead of dead-lettering them again.

Projectors apply in parallel threads (one per projector, in log order within each), overlapped
with decoding the next batch: Postgres and Neo4j do their work in their own processes. A replay
can also be sharded by partition number over several processes (`load_parallel`): a user's
events of every topic share a partition number (key = user id, the same partition count), so
the shards touch disjoint users, rows and positions.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from kernel import watermarks
from adapters.bus import LogReader
from kernel.errors import InvalidEvent
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy import decision_key
from adapters.privacy.keystore import KeyStore
from projections.registry import build_projector
from projections.runner import Item, Projector, TopicPart
from replay.progress import Progress
from schemas.codec import KeyRing
from schemas.events import DecisionData
from schemas.records import decode_confluent

log = logging.getLogger("memstream.replay")
UNRECORDED = "unrecorded"   # a decision written before decisions carried their rules profile


@dataclass
class ReplayStats:
    records: int = 0                 # records read from the log (each applied to every projector that reads its topic)
    applied: dict[str, int] = field(default_factory=dict)   # events handed to each projector's apply()
    undecodable: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    # decisions replayed, by the rules profile they were made under (domain/rules_profile.py)
    rules_profiles: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return {"records": self.records, "applied": self.applied, "undecodable": self.undecodable,
                "seconds": round(self.seconds, 3), "events_per_s": round(self.rate, 1), "interrupted": self.interrupted,
                "rules_profiles": self.rules_profiles}

    def count_profile(self, env) -> None:
        """Note which rules made a decision; `unrecorded`: written before decisions carried it."""
        if isinstance(env.data, DecisionData):
            made_under = env.data.rules_profile or UNRECORDED
            self.rules_profiles[made_under] = self.rules_profiles.get(made_under, 0) + 1


@dataclass
class _Lane:
    projector: Projector
    topics: frozenset[str]
    start: dict[TopicPart, int]          # the projector's stored next offsets (where it resumes)
    until: dict[TopicPart, int]          # exclusive end per partition
    pending: Future | None = None

    def wants(self, tp: TopicPart, offset: int) -> bool:
        return tp[0] in self.topics and self.start.get(tp, 0) <= offset < self.until.get(tp, 0)


def topics_of(projector: Projector) -> frozenset[str]:
    """The full topic names a projector reads (its settings name the log it projects)."""
    return frozenset(projector.settings.topic(t) for t in projector.topics)


def reader(kafka: dict, purpose: str = "replay") -> LogReader:
    """A bounded log reader (adapters/bus.py); `kafka`: the client config of a principal
    (adapters/kafka_auth.py). Its group is never committed: positions live in the stores. Big
    fetches: a replay reads whole partitions."""
    return LogReader(kafka, purpose, idle_timeout_s=120.0,
                     **{"max.partition.fetch.bytes": 8 * 1024 * 1024, "fetch.max.bytes": 64 * 1024 * 1024})


def real_positions(positions: dict[TopicPart, int], topics: frozenset[str]) -> dict[TopicPart, int]:
    """Stored positions of real topic partitions only (not the watermark entries beside them)."""
    return {tp: o for tp, o in positions.items() if tp[0] in topics}


class Replayer:
    def __init__(self, kafka: dict, keys: KeyRing, batch_size: int = 5000, progress_label: str | None = None,
                 progress: bool = True, stop_after: int | None = None, parallel: bool = True,
                 partitions: set[int] | None = None, on_records=None, *, max_future_skew_s: float):
        self.max_future_skew_s = max_future_skew_s   # the live stages' bound (schemas/records.py)
        self.kafka = kafka                # kafka_auth.kafka_config(settings, ADMIN): replay is an operator's tool
        self.partitions = partitions      # only these partition numbers (a shard of a parallel replay)
        self.on_records = on_records      # called with each batch's record count (a shard reports to its parent)
        self.keys = keys
        self.batch_size = batch_size
        self.progress_label = progress_label or "replay"
        self.progress = progress
        self.stop_after = stop_after
        self.parallel = parallel

    def run(self, projectors: list[Projector], until: dict[str, dict[TopicPart, int]] | None = None) -> ReplayStats:
        """Apply the log to `projectors` (already set up) from their stored positions.

        `until[name]`: exact exclusive end offsets for that projector (a partition not named: none);
        a projector not in `until` reads to the log end as of now.
        """
        stats = ReplayStats(applied={p.name: 0 for p in projectors})
        r = reader(self.kafka)
        pool = ThreadPoolExecutor(max_workers=max(1, len(projectors)), thread_name_prefix="replay") if self.parallel else None
        try:
            lanes, start, stop = self.plan(r, projectors, until)
            total = sum(stop[tp] - start[tp] for tp in start)
            bar = Progress(self.progress_label, total, enabled=self.progress)
            if not start:
                bar.close()
                return stats
            began = time.monotonic()
            for batch in r.read({tp: (start[tp], stop[tp]) for tp in start}, batch_size=self.batch_size):
                records = [self._read(m, stats) for m in batch]
                self._dispatch(pool, lanes, records, stats)
                stats.records += len(records)
                bar.update(len(records))
                if self.on_records is not None:
                    self.on_records(len(records))
                if self.stop_after is not None and stats.records >= self.stop_after:
                    stats.interrupted = bool(r.unfinished)
                    break
            self._drain(lanes)
            stats.seconds = time.monotonic() - began
            bar.close()
            return stats
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
            r.close()

    def plan(self, r: LogReader, projectors: list[Projector], until=None) -> tuple[list[_Lane], dict, dict]:
        """Each projector's lane (stored start, end per partition), and per partition the lowest
        start of the lanes that still need it and their highest end."""
        all_topics = frozenset().union(*(topics_of(p) for p in projectors)) if projectors else frozenset()
        ends = r.ends(all_topics)
        lanes = []
        for p in projectors:
            topics = topics_of(p)
            bound = (until or {}).get(p.name)
            lane_until = ({tp: o for tp, o in bound.items() if tp[0] in topics} if bound is not None
                          else {tp: o for tp, o in ends.items() if tp[0] in topics})
            if self.partitions is not None:
                lane_until = {tp: o for tp, o in lane_until.items() if tp[1] in self.partitions}
            lanes.append(_Lane(p, topics, real_positions(p.positions(), topics), lane_until))
        start: dict[TopicPart, int] = {}
        stop: dict[TopicPart, int] = {}
        for lane in lanes:
            for tp, end in lane.until.items():
                s = lane.start.get(tp, 0)
                if s < end:
                    start[tp] = min(start.get(tp, s), s)
                    stop[tp] = max(stop.get(tp, end), end)
        return lanes, start, stop

    def remaining(self, projectors: list[Projector]) -> int:
        """Records a run over `projectors` would read (for a progress total)."""
        with reader(self.kafka) as r:
            _, start, stop = self.plan(r, projectors)
            return sum(stop[tp] - start[tp] for tp in start)

    def _read(self, m, stats: ReplayStats) -> tuple:
        """(tp, offset, item | None, watermark | None): decoded once for every projector."""
        tp = (m.topic(), m.partition())
        mark = watermarks.parse(m.headers())
        if mark is not None:
            return tp, m.offset(), None, mark
        try:
            # The live stages' decode path: a record they dead-lettered (a wrong key, a time past
            # the broker's) is skipped here too, so a rebuild equals the live read models.
            env = decode_confluent(m, self.keys, self.max_future_skew_s)
        except InvalidEvent:
            stats.undecodable += 1
            return tp, m.offset(), None, None
        if env.type == "user.erased" and hasattr(self.keys, "forget_cached"):
            self.keys.forget_cached(env.user)
        stats.count_profile(env)
        return tp, m.offset(), Item(tp[0], tp[1], m.offset(), env), None

    def _dispatch(self, pool, lanes: list[_Lane], records: list[tuple], stats: ReplayStats) -> None:
        for lane in lanes:
            items: list[Item] = []
            positions: dict[TopicPart, int] = {}
            for tp, offset, item, mark in records:
                if not lane.wants(tp, offset):
                    continue
                positions[tp] = offset + 1
                if mark is not None:
                    positions[watermarks.position_key(mark[0], mark[1])] = mark[2]
                elif item is not None:
                    items.append(item)
            if not positions:
                continue
            for tp in positions:
                if tp[0] in lane.topics:
                    lane.start[tp] = positions[tp]
            stats.applied[lane.projector.name] += len(items)
            if pool is None:
                lane.projector.apply(items, positions)
                continue
            if lane.pending is not None:
                lane.pending.result()     # in order, one batch in flight per projector
            lane.pending = pool.submit(lane.projector.apply, items, positions)

    @staticmethod
    def _drain(lanes: list[_Lane]) -> None:
        for lane in lanes:
            if lane.pending is not None:
                lane.pending.result()
                lane.pending = None


# -- sharded by partition over processes ---------------------------------------------------------

_COUNTER = None


def _init_shard(counter) -> None:
    global _COUNTER
    _COUNTER = counter


def _shard(args) -> ReplayStats:
    """One shard of a parallel load, in its own process (spawned: imports afresh)."""
    settings, names, generation, partitions, batch_size = args
    counter = _COUNTER
    keys = KeyStore(settings)
    decision_key.check_held(keys)
    projectors = [build_projector(n, settings, generation) for n in names]
    try:
        for p in projectors:
            p.setup()

        def report(n: int) -> None:
            with counter.get_lock():
                counter.value += n
        return Replayer(kafka_config(settings, ADMIN), keys, max_future_skew_s=settings.max_future_skew_s, batch_size=batch_size, progress=False,
                        partitions=partitions, on_records=report).run(projectors)
    finally:
        for p in projectors:
            p.close()
        keys.close()


def load_parallel(settings, names: list[str], generation: str | None, workers: int, total: int,
                  batch_size: int = 5000, progress: bool = True, label: str = "replay") -> ReplayStats:
    """Replay `names` (shadow settings) to the log end with `workers` processes, each taking the
    partitions p with p % workers == its index; returns the combined stats."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    shards = [(settings, names, generation, {p for p in range(settings.partitions) if p % workers == i}, batch_size)
              for i in range(workers)]
    bar = Progress(label, total, enabled=progress)
    began = time.monotonic()
    with ctx.Pool(workers, initializer=_init_shard, initargs=(counter,)) as pool:
        pending = pool.map_async(_shard, shards)
        shown = 0
        while not pending.ready():
            pending.wait(0.2)
            done = counter.value
            bar.update(done - shown)
            shown = done
        results = pending.get()
    bar.update(counter.value - shown)
    bar.close()
    out = ReplayStats(applied={n: sum(r.applied.get(n, 0) for r in results) for n in names},
                      records=sum(r.records for r in results), undecodable=sum(r.undecodable for r in results),
                      seconds=time.monotonic() - began)
    for r in results:
        for made_under, n in r.rules_profiles.items():
            out.rules_profiles[made_under] = out.rules_profiles.get(made_under, 0) + n
    return out
