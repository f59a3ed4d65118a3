"""Kafka adapters (confluent-kafka): topics, the idempotent producer, dead letters, positions.

Partitioning: every producer here uses librdkafka's `murmur2_random`, the Java client's
partitioner, which is also what faust/aiokafka use. Producers in different libraries must agree,
or one user's events would land in different partitions and lose their order (law 4).
"""
from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import orjson
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from memstream.config import Settings
from memstream.errors import InvalidEvent, MemstreamError, UserErased
from memstream.kafka_auth import ADMIN, PUBLISHER, Principal, ensure_namespace_acls, kafka_config
from schemas.codec import KeyRing, check_user_id, seal_blob

TOPICS = ("turns", "tasks", "facts", "memory", "deadletter")
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


def ensure_topics(settings: Settings, timeout: float = 30.0) -> list[str]:
    """Create the namespace's topics if missing: infinite retention, settings.partitions each;
    and the ACLs that let the worker and publisher principals use the namespace (memstream/kafka_auth.py).
    Runs as the admin principal (the only one allowed to create topics and ACLs)."""
    admin = AdminClient(kafka_config(settings, ADMIN))
    # Before the topics: a worker waiting for them must be able to use them the moment they exist.
    ensure_namespace_acls(admin, settings, timeout=timeout)
    existing = set(admin.list_topics(timeout=timeout).topics)
    wanted = [settings.topic(name) for name in TOPICS]
    # Infinite retention: the log is the truth (law 1) and is never trimmed by time or size.
    # On a cluster: 3 replicas, and an acks=all write needs 2 of them (Settings.kafka_min_insync).
    config = {"retention.ms": "-1", "retention.bytes": "-1", "min.insync.replicas": str(settings.kafka_min_insync)}
    new = [NewTopic(t, num_partitions=settings.partitions, replication_factor=settings.kafka_replication_factor,
                    config=config)
           for t in wanted if t not in existing]
    if new:
        for topic, fut in admin.create_topics(new, operation_timeout=timeout).items():
            try:
                fut.result()
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        # A created topic's partitions get their leader a moment later; callers that read
        # offsets at once would see NOT_LEADER_FOR_PARTITION, so return only when they have one.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(timeout=timeout).topics
            if all(t.topic in md and md[t.topic].partitions and
                   all(p.leader >= 0 for p in md[t.topic].partitions.values()) for t in new):
                break
            time.sleep(0.1)
    return [t.topic for t in new]


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
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kafka-delivery", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    def send(self, topic: str, key: str, value: bytes, headers: dict[str, bytes] | None = None) -> Future:
        fut: Future = Future()

        def delivered(err, msg) -> None:
            if err is not None:
                fut.set_exception(MemstreamError(f"publish to {topic} failed: {err}"))
            else:
                fut.set_result(Position(msg.topic(), msg.partition(), msg.offset()))

        while True:
            try:
                self._producer.produce(topic, value=value, key=key.encode(), headers=headers, on_delivery=delivered)
                return fut
            except BufferError:
                # Local queue full: let deliveries drain, then retry (back-pressure, not loss).
                self._producer.poll(0.05)

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


def check_record_key(key: bytes | None, user: str) -> None:
    """Law 4 at the consumer: a record's key must be its envelope's user, or it sits in the wrong
    partition (another processor instance decides for that user). Such a record is poison."""
    if key is None:
        raise InvalidEvent(f"record has no key (expected the user id {user!r}): it may sit in another partition than the user's events")
    if key != user.encode():
        raise InvalidEvent(f"record key {key[:64]!r} is not its envelope's user {user[:64]!r}")


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
