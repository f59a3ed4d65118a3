"""The projector loop: read a batch, apply it and the new positions in one transaction.

Exactly-once in effect (law 3): the store's own position table is the truth; Kafka's committed
offsets are only a hint for tools. On (re)assignment the runner seeks every partition to the
stored next offset, so a projector killed at any instant resumes exactly where its last
committed transaction ended. Every record advances the position, including ones the projector
ignores and ones it dead-letters.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from memstream.bus import EventProducer, dead_letter_record
from memstream import watermarks
from memstream.config import Settings
from memstream.errors import InvalidEvent
from schemas.codec import KeyRing, decode
from schemas.envelope import Envelope

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
    """A read model. `apply` must write `positions` in the same transaction as the data."""

    name: str
    topics: tuple[str, ...]  # logical names: "memory", "turns", …

    @abstractmethod
    def setup(self) -> None: ...

    @abstractmethod
    def positions(self) -> dict[TopicPart, int]: ...

    @abstractmethod
    def apply(self, items: list[Item], positions: dict[TopicPart, int]) -> None: ...

    def checksum(self) -> str:
        """A digest of the read model's content (not its positions): equal digests, equal content."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class ProjectorRunner:
    def __init__(self, projector: Projector, settings: Settings, keys: KeyRing,
                 batch_size: int = 2000, group_suffix: str = ""):
        self.projector = projector
        self.settings = settings
        self.keys = keys
        self.batch_size = batch_size
        self.stop_event = threading.Event()
        self.applied = 0
        self.dead_lettered = 0
        self._next: dict[TopicPart, int] = {}
        self._consumer = Consumer({
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"{settings.namespace}.projector.{projector.name}{group_suffix}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,          # freshness: do not sit on a small fetch
            "partition.assignment.strategy": "cooperative-sticky",
        })
        self._dlq: EventProducer | None = None

    # -- assignment -------------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        stored = self.projector.positions()
        for tp in parts:
            nxt = stored.get((tp.topic, tp.partition))
            tp.offset = nxt if nxt is not None else OFFSET_BEGINNING
            if nxt is not None:
                self._next[(tp.topic, tp.partition)] = nxt
        consumer.incremental_assign(parts)

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        consumer.incremental_unassign(parts)
        for tp in parts:
            self._next.pop((tp.topic, tp.partition), None)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, idle_exit_after: float | None = None) -> None:
        self.projector.setup()
        topics = [self.settings.topic(t) for t in self.projector.topics]
        self._consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        idle_since = time.monotonic()
        try:
            while not self.stop_event.is_set():
                # consume() returns when the batch is full or the timeout ends: a short timeout bounds the
                # latency a quiet stream adds (freshness), a large batch keeps replays fast.
                msgs = self._consumer.consume(num_messages=self.batch_size, timeout=0.01)
                if not msgs:
                    if idle_exit_after is not None and time.monotonic() - idle_since > idle_exit_after:
                        return
                    continue
                idle_since = time.monotonic()
                self._handle(msgs)
        finally:
            self._consumer.close()
            if self._dlq is not None:
                self._dlq.close()
            self.projector.close()

    def _handle(self, msgs) -> None:
        items: list[Item] = []
        positions: dict[TopicPart, int] = {}
        dead = []
        for m in msgs:
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("%s: consumer error %s", self.projector.name, m.error())
                continue
            tp = (m.topic(), m.partition())
            # Defensive: never re-apply below the stored position (e.g. a fetch that raced a seek).
            if m.offset() < self._next.get(tp, 0):
                continue
            positions[tp] = m.offset() + 1
            mark = watermarks.parse(m.headers())
            if mark is not None:
                positions[watermarks.position_key(mark[0], mark[1])] = mark[2]
                continue
            try:
                env = decode(m.value(), self.keys)
            except InvalidEvent as exc:
                dead.append((m, exc))
                continue
            if env.type == "user.erased" and hasattr(self.keys, "forget_cached"):
                self.keys.forget_cached(env.user)
            items.append(Item(m.topic(), m.partition(), m.offset(), env))
        if not positions:
            return
        # 1. dead letters first, delivered: a crash before step 2 re-sends them (at-least-once,
        #    identifiable by source position) rather than losing them.
        if dead:
            self._dead_letter(dead)
        # 2. data + positions, one transaction
        self.projector.apply(items, positions)
        self._next.update(positions)
        self.applied += len(items)
        # 3. Kafka offsets: a hint for lag tools only
        self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()], asynchronous=True)

    def _dead_letter(self, dead) -> None:
        if self._dlq is None:
            self._dlq = EventProducer(self.settings)
        topic = self.settings.topic("deadletter")
        for m, exc in dead:
            log.warning("dead-letter %s:%s:%s (%s): %s", m.topic(), m.partition(), m.offset(), self.projector.name, exc.reason)
            self._dlq.send(topic, (m.key() or b"").decode("utf-8", "replace"), dead_letter_record(
                self.keys, reason=exc.reason, topic=m.topic(), partition=m.partition(), offset=m.offset(),
                consumer=f"projector.{self.projector.name}", key=m.key(), raw=m.value()))
            self.dead_lettered += 1
        self._dlq.flush()


def run_until_signalled(runners: list[ProjectorRunner]) -> None:
    """Run several projectors, one thread each, until SIGTERM/SIGINT."""
    threads = [threading.Thread(target=r.run, name=r.projector.name, daemon=True) for r in runners]

    def stop(*_):
        for r in runners:
            r.stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=0.5)
