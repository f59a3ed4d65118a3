"""The projector loop: read a batch, apply it and the new positions in one transaction.

Exactly-once in effect (law 3): the store's own position table is the truth; Kafka's committed
offsets are only a hint for tools. On (re)assignment the runner seeks every partition to the
stored next offset, so a projector killed at any instant resumes exactly where its last
committed transaction ended. Every record advances the position, including ones the projector
ignores and ones it dead-letters.

Failures (adapters/resilience.py): a record that cannot be decoded, whose key is not its
envelope's user, or that the store refuses as data is **poison** — dead-lettered with its reason
and position, and the rest of the batch goes on (a batch the store refuses is bisected down to
the one record). A **transient** error (Postgres, Neo4j, the key store, the broker) commits
nothing: the runner pauses its partitions, waits with capped exponential backoff and jitter
(health `waiting`, with the reason), re-seeks to its last committed positions and reads the same
records again. Anything else is **fatal**: the thread stops every other one and the worker exits
non-zero, for its supervisor to restart it.

Fencing: the position update is a compare-and-set on the positions the runner believed stored
when it read the batch (`expected`). A writer that lost its partitions in a rebalance but still
commits (a zombie) fails that check: its whole transaction rolls back, the batch is dropped and
the runner re-seeks from the stored positions.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from adapters.crash_ledger import CrashLedger, ledger_path
from adapters.bus import EventProducer, dead_letter_key, dead_letter_record
from adapters import metrics
from adapters.privacy import decision_key
from kernel import watermarks
from kernel.config import Settings
from kernel.errors import InvalidEvent
from adapters.kafka_auth import WORKER, Principal, kafka_config
from adapters.resilience import POISON, TRANSIENT, Backoff, Health, StalePosition, Unavailable, classify
from schemas.codec import KeyRing
from schemas.envelope import Envelope
from schemas.records import decode_confluent

log = logging.getLogger("memstream.projector")

TopicPart = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Item:
    topic: str
    partition: int
    offset: int
    event: Envelope


def runs_by_kind(items: list[Item], kind_of):
    """Consecutive items grouped by kind_of(event) (None = ignored), in log order.

    Batching whole runs keeps the order that matters (an erasure falls between the rows before
    it and the rows after it) while still writing each run with one executemany/UNWIND.
    """
    run: list[Item] = []
    current = None
    for item in items:
        kind = kind_of(item.event)
        if kind is None:
            continue
        if kind != current and run:
            yield current, run
            run = []
        current = kind
        run.append(item)
    if run:
        yield current, run


def kind_by_type(kinds: dict[str, str]):
    """kind_of for runs_by_kind from an event-type → kind table.

    Events of erased users (their sealed content unreadable) are skipped, except the erasure
    itself, which every projector applies.
    """
    def kind_of(e: Envelope):
        if e.erased and e.type != "user.erased":
            return None
        return kinds.get(e.type)
    return kind_of


class Projector(ABC):
    """A read model. `apply` must write `positions` in the same transaction as the data.

    With `expected` (the runner's fence), the position write is a compare-and-set: each
    (topic, partition) in `expected` must still hold that next offset (None: no row yet), else
    `apply` raises StalePosition and nothing of the batch is written. Positions absent from
    `expected` (watermarks) only move forward.
    """

    name: str
    topics: tuple[str, ...]  # logical names: "memory", "turns", …

    @abstractmethod
    def setup(self) -> None: ...

    @abstractmethod
    def positions(self) -> dict[TopicPart, int]: ...

    @abstractmethod
    def apply(self, items: list[Item], positions: dict[TopicPart, int],
              expected: dict[TopicPart, int | None] | None = None) -> None: ...

    def checksum(self) -> str:
        """A digest of the read model's content (not its positions): equal digests, equal content."""
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - an optional hook: most projectors hold nothing to close
        pass


@dataclass(slots=True)
class _Rec:
    """One consumed record of a batch, in log order: its item (None: ignored or dead) and positions."""
    msg: object
    tp: TopicPart
    item: Item | None
    extra: dict  # further positions it advances (a watermark)


class ProjectorRunner:
    POLL_S = 0.2   # how long a quiet projector waits for a record before it checks stop and idle-exit

    def __init__(self, projector: Projector, settings: Settings, keys: KeyRing,
                 batch_size: int = 2000, group_suffix: str = "", health: Health | None = None,
                 principal: Principal = WORKER):
        self.projector = projector
        self.settings = settings
        self.linger_s = settings.projector_linger_ms / 1000.0
        self.principal = principal
        decision_key.check_held(keys)   # every decision it applies must be the pipeline's own (#28)
        self.keys = keys
        self.batch_size = batch_size
        self.stop_event = threading.Event()
        self.health = health
        self.applied = 0
        self.dead_lettered = 0
        self.retries = 0
        self.stale_batches = 0
        self.error: BaseException | None = None
        self._next: dict[TopicPart, int] = {}
        self._assigned: set[TopicPart] = set()
        self._dead_sent: set[tuple[str, int, int]] = set()
        self._backoff = Backoff()
        self._consumer = Consumer({
            **kafka_config(settings, principal),   # the pipeline's (kafka_auth.py); in-process test runs: admin
            "group.id": f"{settings.namespace}.projector.{projector.name}{group_suffix}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # How long the broker holds a fetch that finds nothing new. A new record completes it at
            # once (fetch.min.bytes 1), so this adds no latency; 10 ms made each of the seven
            # projectors' consumers ask 100 times a second on a quiet stream: 29% of a core of
            # Kafka with the pipeline idle (9% at 500 ms, librdkafka's default).
            "fetch.wait.max.ms": 500,
            "partition.assignment.strategy": "cooperative-sticky",
            # A projector killed with SIGKILL holds its partitions until its session times out
            # (45 s by default): the restarted one waits that long. Heartbeats run on
            # librdkafka's own thread, so a long batch never misses one.
            "session.timeout.ms": 15000,
            "heartbeat.interval.ms": 3000,
        })
        self._dlq: EventProducer | None = None
        self._consumer_name = f"projector.{projector.name}"   # its label in memstream_events_consumed
        # What was in flight when an earlier process died (crash loops: adapters/crash_ledger.py)
        self.ledger = CrashLedger(ledger_path(settings, f"projector.{projector.name}{group_suffix}"),
                                  settings.crash_loop_limit).load()
        self._set_health("starting")

    # -- health ----------------------------------------------------------------------------------
    def _set_health(self, state: str, **info) -> None:
        metrics.health_state(self.projector.name, state)
        if self.health is not None:
            self.health.set(self.projector.name, state, applied=self.applied, dead_lettered=self.dead_lettered,
                            retries=self.retries, stale_batches=self.stale_batches, **info)

    def _retrying(self, what: str, fn):
        """fn() until it succeeds, waiting out transient errors (until stopped: then None)."""
        backoff = Backoff()
        while True:
            try:
                result = fn()
                if backoff.attempt:
                    log.info("%s: %s succeeded after %d retries", self.projector.name, what, backoff.attempt)
                    self._set_health("running")
                return result
            except Exception as exc:  # noqa: BLE001 - classified below
                if classify(exc) != TRANSIENT or self.stop_event.is_set():
                    raise
                self.retries += 1
                delay = backoff.next()
                log.warning("%s: %s waits %.1fs: %s", self.projector.name, what, delay, _short(exc))
                self._set_health("waiting", reason=f"{what}: {_short(exc)}")
                if self.stop_event.wait(delay):
                    return None

    # -- assignment -------------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        stored = self._retrying("reading positions", self.projector.positions) or {}
        for tp in parts:
            nxt = stored.get((tp.topic, tp.partition))
            tp.offset = nxt if nxt is not None else OFFSET_BEGINNING
            if nxt is not None:
                self._next[(tp.topic, tp.partition)] = nxt
            else:
                self._next.pop((tp.topic, tp.partition), None)
            self._assigned.add((tp.topic, tp.partition))
        consumer.incremental_assign(parts)

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        consumer.incremental_unassign(parts)
        for tp in parts:
            self._next.pop((tp.topic, tp.partition), None)
            self._assigned.discard((tp.topic, tp.partition))

    def _reseek(self, from_store: bool) -> None:
        """Point every assigned partition back at its committed position (re-read from the store
        when a fence failed: another writer moved it)."""
        if not self._assigned:
            return
        if from_store:
            stored = self._retrying("reading positions", self.projector.positions)
            if stored is None:
                return
            for tp in self._assigned:
                if tp in stored:
                    self._next[tp] = stored[tp]
                else:
                    self._next.pop(tp, None)
        parts = [TopicPartition(t, p) for t, p in sorted(self._assigned)]
        self._consumer.incremental_unassign(parts)
        for tp in parts:
            tp.offset = self._next.get((tp.topic, tp.partition), OFFSET_BEGINNING)
        self._consumer.incremental_assign(parts)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, idle_exit_after: float | None = None) -> None:
        """Apply records until stopped; with `idle_exit_after`, return once nothing has come for
        that long *and* every partition is applied up to where the log ended when the run began
        (a slow group join or fetch on a loaded machine must not end a catch-up run early)."""
        try:
            self._retrying("setting up", self.projector.setup)
            if self.stop_event.is_set():
                return
            topics = [self.settings.topic(t) for t in self.projector.topics]
            ends = self._log_ends(topics) if idle_exit_after is not None else {}
            self._consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                     on_lost=self._on_revoke)
            self._set_health("running")
            idle_since = time.monotonic()
            while not self.stop_event.is_set():
                msgs = self._next_batch()
                if not msgs:
                    if idle_exit_after is not None and self._may_exit(ends, idle_since, idle_exit_after):
                        return
                    continue
                idle_since = time.monotonic()
                try:
                    # one unit, or one per record where an earlier process died with them in flight
                    for unit in self.ledger.units(msgs, _position):
                        self._handle(unit)
                except StalePosition as exc:
                    self.stale_batches += 1
                    log.warning("%s: batch dropped, position moved under it (%s); re-seeking", self.projector.name, exc)
                    self._reseek(from_store=True)
                    continue
                except Exception as exc:  # noqa: BLE001 - classified
                    if classify(exc) != TRANSIENT:
                        raise
                    self._wait_out(exc)
                    continue
                if self._backoff.attempt:
                    log.info("%s: recovered after %d retries", self.projector.name, self._backoff.attempt)
                    self._backoff.reset()
                    self._set_health("running")
                elif self.health is not None:
                    self.health.update(self.projector.name, applied=self.applied, dead_lettered=self.dead_lettered,
                                       refused_erased=getattr(self.projector, "refused_erased", 0))
        except BaseException as exc:
            self.error = exc
            self._set_health("failed", reason=_short(exc))
            raise
        finally:
            self._close()

    def _next_batch(self) -> list:
        """The next batch: waits (up to POLL_S) for one record, then for more, up to batch_size,
        for at most `linger_s` (MEMSTREAM_PROJECTOR_LINGER_MS). A backlog (a replay) fills whole
        batches without waiting; a trickle is written a few records a transaction instead of one;
        a quiet stream wakes this thread POLL_S apart (consume(batch_size, timeout=0.01) woke
        seven projector threads 100 times a second each, with nothing to do)."""
        first = self._consumer.poll(self.POLL_S)
        if first is None:
            return []
        more = self.batch_size - 1   # consume() refuses to be asked for 0 records
        return [first, *self._consumer.consume(num_messages=more, timeout=self.linger_s)] if more else [first]

    # -- catch-up runs (idle_exit_after) -----------------------------------------------------
    IDLE_EXIT_CAP_S = 120.0   # idle this long, a catch-up run ends even short of the log's end (partitions another member holds)

    def _log_ends(self, topics: list[str]) -> dict[TopicPart, tuple[int, int]]:
        """(low, high) watermark of every partition of `topics` now: what a catch-up run must reach."""
        ends = {}
        meta = self._consumer.list_topics(timeout=10)
        for topic in topics:
            for p in (meta.topics[topic].partitions if topic in meta.topics else {}):
                ends[(topic, p)] = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        return ends

    def _may_exit(self, ends: dict[TopicPart, tuple[int, int]], idle_since: float, idle_exit_after: float) -> bool:
        now = time.monotonic()
        if now - idle_since <= idle_exit_after:
            return False
        behind = {tp: (self._next.get(tp), high) for tp, (low, high) in ends.items()
                  if high > low and (tp in self._assigned or not self._assigned) and self._next.get(tp, low) < high}
        if behind and self._assigned:
            # the fetch position also moves past records that never reach the loop (control records)
            fetched = {(t.topic, t.partition): t.offset for t in
                       self._consumer.position([TopicPartition(t, p) for t, p in behind])}
            behind = {tp: v for tp, v in behind.items() if fetched.get(tp, -1) < v[1]}
        if not behind:
            return True
        if now - idle_since > self.IDLE_EXIT_CAP_S:
            log.warning("%s: idle exit before reaching the log's end (next, end): %s", self.projector.name, behind)
            return True
        return False

    def _close(self) -> None:
        for closer in (self.ledger.close, self._consumer.close, (self._dlq.close if self._dlq is not None else None), self.projector.close):
            if closer is None:
                continue
            try:
                closer()
            except Exception as exc:  # noqa: BLE001 - closing after a failure must not hide it
                log.warning("%s: close: %s", self.projector.name, _short(exc))
        if self.error is None:
            self._set_health("stopped")

    def _wait_out(self, exc: BaseException) -> None:
        """A transient failure: nothing was committed. Pause, back off (serving the group), re-seek, resume."""
        self.retries += 1
        delay = self._backoff.next()
        log.warning("%s: transient failure, retrying the batch in %.1fs (attempt %d): %s",
                    self.projector.name, delay, self._backoff.attempt, _short(exc))
        self._set_health("waiting", reason=_short(exc), attempt=self._backoff.attempt)
        parts = [TopicPartition(t, p) for t, p in sorted(self._assigned)]
        if parts:
            self._consumer.pause(parts)
        deadline = time.monotonic() + delay
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            self._consumer.consume(num_messages=self.batch_size, timeout=min(0.2, max(0.0, deadline - time.monotonic())))
        self._reseek(from_store=False)
        parts = [TopicPartition(t, p) for t, p in sorted(self._assigned)]
        if parts:
            self._consumer.resume(parts)

    def _handle(self, msgs) -> None:
        recs: list[_Rec] = []
        positions: dict[TopicPart, int] = {}
        dead = []
        for m in msgs:
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("%s: consumer error %s", self.projector.name, m.error())
                continue
            tp = (m.topic(), m.partition())
            # Never re-apply below the stored position (a fetch that raced a seek), nor a partition
            # no longer ours (revoked while the batch was being read).
            if tp not in self._assigned or m.offset() < self._next.get(tp, 0):
                continue
            positions[tp] = m.offset() + 1
            mark = watermarks.parse(m.headers())
            metrics.consumed(self._consumer_name, m.topic(), m.value(), "watermark" if mark is not None else None)
            if mark is not None:
                key = watermarks.position_key(mark[0], mark[1])
                positions[key] = mark[2]
                recs.append(_Rec(m, tp, None, {key: mark[2]}))
                continue
            reason = self.ledger.give_up(_position(m), f"projector {self.projector.name}") if len(msgs) == 1 else None
            if reason is not None:
                # This record was in flight at the last crash_loop_limit deaths of this projector.
                log.error("%s: %s:%s:%s %s; dead-lettering it", self.projector.name, *_position(m), reason)
                dead.append((m, reason))
                recs.append(_Rec(m, tp, None, {}))
                continue
            try:
                env = decode_confluent(m, self.keys, self.settings.max_future_skew_s)
            except InvalidEvent as exc:
                dead.append((m, exc.reason))
                recs.append(_Rec(m, tp, None, {}))
                continue
            if env.type == "user.erased" and hasattr(self.keys, "forget_cached"):
                self.keys.forget_cached(env.user)
            recs.append(_Rec(m, tp, Item(m.topic(), m.partition(), m.offset(), env), {}))
        if not positions:
            return
        # 0. mark the batch in flight: if it kills the process, the next one takes it apart
        self.ledger.begin([_position(r.msg) for r in recs])
        # 1. dead letters first, delivered: a crash before step 2 re-sends them (at-least-once,
        #    identifiable by source position) rather than losing them.
        if dead:
            self._dead_letter(dead)
        # 2. data + positions, one transaction, fenced on the positions we started from
        items = [r.item for r in recs if r.item is not None]
        started = time.perf_counter()
        try:
            self.projector.apply(items, positions, expected=self._expected(positions))
        except Exception as exc:  # noqa: BLE001 - classified
            if classify(exc) != POISON:
                raise
            # The store refused some record as data: find it (bisect), dead-letter it, apply the rest.
            log.warning("%s: batch of %d refused (%s); isolating the record", self.projector.name, len(recs), _short(exc))
            self._apply_isolating(recs)
            self.ledger.done()
            return
        metrics.projector_batch(self.projector.name, time.perf_counter() - started, len(items))
        self._committed(positions, len(items))
        self.ledger.done()

    def _expected(self, positions: dict[TopicPart, int]) -> dict[TopicPart, int | None]:
        return {tp: self._next.get(tp) for tp in positions if not tp[0].startswith(watermarks.PREFIX)}

    def _committed(self, positions: dict[TopicPart, int], n: int) -> None:
        self._next.update(positions)
        self.applied += n
        # 3. Kafka offsets: a hint for lag tools only
        try:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()
                                           if not t.startswith(watermarks.PREFIX)], asynchronous=True)
        except KafkaException as exc:
            log.debug("%s: offset hint not committed: %s", self.projector.name, exc)

    def _apply_isolating(self, recs: list[_Rec]) -> None:
        def positions_of(part: list[_Rec]) -> dict[TopicPart, int]:
            pos: dict[TopicPart, int] = {}
            for r in part:
                pos[r.tp] = r.msg.offset() + 1
                pos.update(r.extra)
            return pos

        def apply(part: list[_Rec]) -> None:
            items = [r.item for r in part if r.item is not None]
            pos = positions_of(part)
            try:
                self.projector.apply(items, pos, expected=self._expected(pos))
            except Exception as exc:  # noqa: BLE001 - classified
                if classify(exc) != POISON:
                    raise
                if len(items) <= 1:
                    bad = [r for r in part if r.item is not None]
                    if not bad:
                        raise  # positions alone refused: not a record's fault
                    m = bad[0].msg
                    self._dead_letter([(m, f"{self.projector.name} cannot apply it: {_short(exc)}")])
                    for r in part:
                        r.item = None
                    self.projector.apply([], pos, expected=self._expected(pos))
                    self._committed(pos, 0)
                    return
                half = len(part) // 2
                apply(part[:half])
                apply(part[half:])
                return
            self._committed(pos, len(items))

        apply(recs)

    def _dead_letter(self, dead) -> None:
        if self._dlq is None:
            self._dlq = EventProducer(self.settings, self.principal)
        topic = self.settings.topic("deadletter")
        futures = []
        for m, reason in dead:
            where = (m.topic(), m.partition(), m.offset())
            if where in self._dead_sent:   # already sent by an earlier try of this batch
                continue
            log.warning("dead-letter %s:%s:%s (%s): %s", *where, self.projector.name, reason[:300])
            futures.append((where, reason, self._dlq.send(topic, dead_letter_key(m.key()), dead_letter_record(
                self.keys, reason=reason, topic=m.topic(), partition=m.partition(), offset=m.offset(),
                consumer=f"projector.{self.projector.name}", key=m.key(), raw=m.value()))))
        if not futures:
            return
        self._dlq.flush()
        for where, reason, fut in futures:
            exc = fut.exception(timeout=0)
            if exc is not None:
                raise Unavailable(f"dead letter for {where} not delivered: {exc}")
            self._dead_sent.add(where)
            self.dead_lettered += 1
            metrics.dead_lettered(self._consumer_name, reason)
        if len(self._dead_sent) > 100_000:
            self._dead_sent.clear()


def _position(m) -> tuple[str, int, int]:
    return m.topic() or "", m.partition() if m.partition() is not None else -1, m.offset() if m.offset() is not None else -1


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300]


def run_until_signalled(runners: list[ProjectorRunner], health: Health | None = None) -> int:
    """Run several projectors, one thread each, until SIGTERM/SIGINT (exit status 0) or until one
    of them fails with a fatal error: then every other one stops too and the status is 1, so the
    worker exits non-zero and its supervisor restarts it. No thread dies alone."""
    failed: list[ProjectorRunner] = []

    def stop(*_):
        for r in runners:
            r.stop_event.set()

    def body(r: ProjectorRunner) -> None:
        try:
            r.run()
        except BaseException as exc:  # noqa: BLE001 - reported, then the whole worker stops
            log.error("%s failed: %s", r.projector.name, _short(exc), exc_info=exc)
            failed.append(r)
            stop()

    threads = [threading.Thread(target=body, args=(r,), name=r.projector.name, daemon=True) for r in runners]
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if health is not None:
        health.stop()
    return 1 if failed else 0
