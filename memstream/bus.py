"""Kafka adapters (confluent-kafka): topics, the idempotent producer, dead letters, positions.

Partitioning: every producer here uses librdkafka's `murmur2_random`, the Java client's
partitioner, which is also what faust/aiokafka use. Producers in different libraries must agree,
or one user's events would land in different partitions and lose their order (law 4).

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import orjson
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer
from confluent_kafka.admin import AdminClient

from memstream.config import Settings
from memstream import metrics
from memstream.errors import ClockAhead, InvalidEvent, MemstreamError, UserErased
from memstream.kafka_auth import ADMIN, PUBLISHER, Principal, ensure_namespace_acls, kafka_config
from memstream.topology import LOG_TOPICS as TOPICS  # noqa: F401 - re-exported: callers name the log topics through bus
from schemas.codec import KeyRing, check_user_id, seal_blob

PARTITIONER = "murmur2_random"


@dataclass(frozen=True, slots=True)
class Position:
    """Where a record landed: the token a query passes to read its own writes."""
    topic: str
    partition: int
    offset: int

    def token(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"

    @classmethod
    def parse(cls, token: str) -> "Position":
        try:
            topic, partition, offset = token.rsplit(":", 2)
            return cls(topic, int(partition), int(offset))
        except ValueError:
            raise MemstreamError(f"bad position token {token!r}: expected topic:partition:offset") from None

    def as_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "token": self.token()}


class LogEnds:
    """The end (high watermark) of topic partitions, asked of the broker only when a position is
    past the last end seen: a token a publish returned is below it, so the common case costs no
    round trip. One consumer, never subscribed, used under a lock (calls come from threads)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._ends: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._consumer = None

    def is_past_end(self, pos: Position, timeout: float = 5.0) -> bool:
        """True when `pos` is at or past the partition's end: no record is there (yet)."""
        key = (pos.topic, pos.partition)
        if pos.offset < self._ends.get(key, 0):
            return False
        from confluent_kafka import Consumer, TopicPartition
        with self._lock:
            if self._consumer is None:
                self._consumer = Consumer({**kafka_config(self.settings, PUBLISHER),   # the API's principal
                                           "group.id": f"{self.settings.namespace}.log-ends", "enable.auto.commit": False})
            _low, high = self._consumer.get_watermark_offsets(TopicPartition(pos.topic, pos.partition), timeout=timeout)
        self._ends[key] = high
        return pos.offset >= high

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None


def ensure_topics(settings: Settings, timeout: float = 30.0, align: bool = False) -> list[str]:
    """Create the namespace's topics if missing — the log (infinite retention, settings.partitions
    each) and the stream processors' state changelogs (memstream/topology.py: why both, and why
    before any worker starts) — and the ACLs that let the worker and publisher principals use the
    namespace (memstream/kafka_auth.py). A topic with another partition count is a TopologyMismatch
    naming it. `align` also sets the wanted configs on topics made before them (workers do, at start).
    Runs as the admin principal (the only one allowed to create topics and ACLs)."""
    from memstream import topology
    admin = AdminClient(kafka_config(settings, ADMIN))
    # Before the topics: a worker waiting for them must be able to use them the moment they exist.
    ensure_namespace_acls(admin, settings, timeout=timeout)
    created = topology.create_missing(admin, settings, timeout=timeout)
    if align:
        topology.align_configs(admin, settings, timeout=timeout)
    return created


def producer_config(settings: Settings, principal: Principal, **extra) -> dict:
    """An idempotent producer's config, connecting as `principal` (kafka_auth.py: who may write what)."""
    return {
        **kafka_config(settings, principal),
        "enable.idempotence": True,   # no duplicates or reordering on retry
        "acks": "all",
        "partitioner": PARTITIONER,
        "linger.ms": 5,
        # No compression: sealed fields are ciphertext (incompressible), and faust's aiokafka
        # consumers would need an extra codec library to read compressed batches.
        "compression.type": "none",
        **extra,
    }


class EventProducer:
    """An idempotent acks=all producer whose sends resolve to Positions.

    A daemon thread serves delivery callbacks, so `send` can be fire-and-forget (bulk) or
    awaited through the returned Future (one record's position).
    """

    def __init__(self, settings: Settings, principal: Principal, **extra):
        self._producer = Producer(producer_config(settings, principal, **extra))
        # How far this host's clock ran ahead of the broker's at the last delivery (seconds;
        # negative: behind): the topics use LogAppendTime, so each delivery report carries the
        # broker's clock. Publishers stamping event times from the host clock check it
        # (check_clock): a host whose clock runs ahead would date every user's events in the future.
        self.clock_ahead_s = 0.0
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kafka-delivery", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    def send(self, topic: str, key: str, value: bytes, headers: dict[str, bytes] | None = None) -> Future:
        fut: Future = Future()

        sent_at = time.time()

        def delivered(err, msg) -> None:
            if err is not None:
                fut.set_exception(MemstreamError(f"publish to {topic} failed: {err}"))
            else:
                kind, broker_ms = msg.timestamp()
                if kind == TIMESTAMP_LOG_APPEND_TIME:
                    # The host's clock when it sent vs the broker's when it appended: the delay in
                    # between only makes the host look behind, never ahead.
                    self.clock_ahead_s = sent_at - broker_ms / 1000
                    metrics.clock_ahead(self.clock_ahead_s)
                fut.set_result(Position(msg.topic(), msg.partition(), msg.offset()))

        while True:
            try:
                self._producer.produce(topic, value=value, key=key.encode(), headers=headers, on_delivery=delivered)
                return fut
            except BufferError:
                # Local queue full: let deliveries drain, then retry (back-pressure, not loss).
                self._producer.poll(0.05)

    def check_clock(self, max_ahead_s: float) -> None:
        """Refuse to stamp event times with a clock that ran ahead of the broker's at the last
        delivery (ClockAhead): consumers would dead-letter those events (schemas/records.py)."""
        if self.clock_ahead_s > max_ahead_s:
            raise ClockAhead(f"this host's clock is {self.clock_ahead_s:.0f} s ahead of the Kafka broker's (more than "
                             f"MEMSTREAM_MAX_FUTURE_SKEW_S={max_ahead_s:g}): events stamped with it would be dated in the "
                             "future and refused downstream; fix the host's time (NTP) and retry")

    def flush(self, timeout: float = 30.0) -> None:
        left = self._producer.flush(timeout)
        if left:
            raise MemstreamError(f"{left} records still undelivered after {timeout}s")

    def close(self) -> None:
        self.flush()
        self._stop.set()
        self._poller.join(timeout=1)


# A dead-letter copy is the original sealed (base64, +33%) inside a JSON body: above this size only
# its digest is kept, so the dead letter itself always fits a Kafka request (1 MiB by default).
DEAD_LETTER_RAW_LIMIT = 256 * 1024


def dead_letter_record(keys: KeyRing, *, reason: str, topic: str, partition: int, offset: int,
                       consumer: str, key: bytes | None, raw: bytes | None) -> bytes:
    """A dead-letter record: why, where from, and the original bytes only in sealed form.

    The original may hold personal text in the clear; copying it to another topic in the clear
    would survive erasure. So the copy is sealed with the key's user's data key, and a record
    without a usable key (none, not UTF-8, control characters), or one larger than
    DEAD_LETTER_RAW_LIMIT, keeps only its digest and size — the source position still leads to
    the original. Raises only transient errors (the key store unreachable).
    """
    sealed = None
    omitted = None
    user = None
    if key:
        try:
            user = key.decode()
            check_user_id(user)
        except (UnicodeDecodeError, InvalidEvent):
            user, omitted = None, "key is not a usable user id"
    else:
        omitted = "no key"
    if user is not None and raw is not None and len(raw) > DEAD_LETTER_RAW_LIMIT:
        user, omitted = None, f"larger than {DEAD_LETTER_RAW_LIMIT} bytes"
    if user is not None:
        try:
            sealed = seal_blob(keys, user, f"deadletter:{topic}:{partition}:{offset}", raw or b"")
        except UserErased:   # the user was erased: nothing of theirs may be kept, the digest will do
            omitted = "the key's user was erased"
    body = {
        "reason": reason[:2000],
        "source": {"topic": topic, "partition": partition, "offset": offset},
        "consumer": consumer,
        "key": key[:512].decode("utf-8", "replace") if key is not None else None,
        "size": len(raw) if raw is not None else 0,
        "sha256": hashlib.sha256(raw).hexdigest() if raw is not None else None,
        "sealed_raw": sealed,
    }
    if omitted:
        body["raw_omitted"] = omitted
    return orjson.dumps(body)


def dead_letter_key(key: bytes | None) -> str:
    """The dead letter's own key: the source key when it is a usable user id, else empty."""
    try:
        user = (key or b"").decode()
        check_user_id(user)
        return user
    except (UnicodeDecodeError, InvalidEvent):
        return ""
