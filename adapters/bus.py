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
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

import orjson
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kernel.config import Settings
from adapters import metrics
from kernel.errors import ClockAhead, InvalidEvent, MemstreamError, UserErased
from adapters.kafka_auth import ADMIN, PUBLISHER, Principal, ensure_namespace_acls, kafka_config
from adapters.resilience import Backoff
from adapters.topology import LOG_TOPICS as TOPICS  # noqa: F401 - re-exported: callers name the log topics through bus
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
    round trip. One reader (LogReader), never subscribed, used under a lock (calls come from threads)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._ends: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._reader: LogReader | None = None

    def is_past_end(self, pos: Position, timeout: float = 5.0) -> bool:
        """True when `pos` is at or past the partition's end: no record is there (yet)."""
        key = (pos.topic, pos.partition)
        if pos.offset < self._ends.get(key, 0):
            return False
        with self._lock:
            if self._reader is None:   # the API's principal, in the `<ns>.log-ends` group its ACLs allow
                self._reader = LogReader(kafka_config(self.settings, PUBLISHER), group_id=f"{self.settings.namespace}.log-ends")
            _low, high = self._reader.watermarks(key, timeout=timeout, wait_s=0)
        self._ends[key] = high
        return pos.offset >= high

    def close(self) -> None:
        with self._lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None


# -- reading the log back: the one bounded reader -------------------------------------------------

TopicPart = tuple[str, int]
Span = tuple[int, int]       # [start, end) offsets of one partition


class LogReadError(MemstreamError):
    """Reading the log failed for good (a fatal Kafka error: not allowed, no such topic, …); the
    message names the topic and partition."""


class LogReadTimeout(LogReadError):
    """The log gave nothing for too long while records below the end read at the start were still
    due (a broker gone or not answering): raised instead of waiting forever."""


# Errors a reader waits out, with the backoff, besides those librdkafka itself calls retriable: a
# broker away or moving, a just-created topic's partition without a leader yet.
_WAIT_OUT = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
                       KafkaError.REQUEST_TIMED_OUT, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART,
                       KafkaError._UNKNOWN_PARTITION, KafkaError._WAIT_COORD})


def transient_kafka_error(err: KafkaError) -> bool:
    """Whether a Kafka error is one to retry (the broker will come back) rather than report."""
    return not err.fatal() and (err.retriable() or err.code() in _WAIT_OUT)


def _where(tps: Iterable[TopicPart]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return "; ".join(f"{t} partition{'s' if len(ps) > 1 else ''} {', '.join(map(str, sorted(ps)))}"
                     for t, ps in sorted(by_topic.items())) or "(nothing)"


class LogReader:
    """Reads fixed stretches of the log and stops: every "read these partitions from here to their
    end" in memstream (replay, rebuild, re-extraction, what-if, audit fetches, the dead-letter view,
    the rules gate) goes through this one.

    One group-less consumer (assign() only, never committed), connecting with `kafka` (a principal's
    kafka_config: each caller keeps its own) and `group_id` (default `memstream-<purpose>-<random>`;
    a principal whose ACLs name its group passes that group). `read(spans)` yields each partition's
    records from its start up to its end, in batches as the broker hands them out (in offset order
    within a partition), and returns once every partition is done: at its end, or at the end of the
    partition (an EOF) when that comes first. `spans()` makes spans that end at the high watermark
    read when it is called, so a read is bounded and never waits for records appended after it.

    Failures: a fatal Kafka error raises LogReadError naming topic and partition; a transient one
    (transient_kafka_error) is waited out with the one backoff policy (adapters.resilience.Backoff);
    `idle_timeout_s` seconds spent consuming without any progress raise LogReadTimeout, and so
    does a read lasting past its `timeout_s`. The consumer is closed by close() (or the `with` block).
    """

    def __init__(self, kafka: Mapping, purpose: str = "read", *, group_id: str | None = None, poll_s: float = 0.5,
                 idle_timeout_s: float = 60.0, backoff: tuple[float, float] = (0.2, 5.0), **extra):
        self.poll_s, self.idle_timeout_s, self.backoff = poll_s, idle_timeout_s, backoff
        self.unfinished: dict[TopicPart, Span] = {}   # the current read's partitions not done yet: [next, end)
        self._consumer = Consumer({**kafka, "group.id": group_id or f"memstream-{purpose}-{uuid.uuid4().hex[:8]}",
                                   "enable.auto.commit": False, "enable.partition.eof": True,
                                   "auto.offset.reset": "earliest", **extra})

    def __enter__(self) -> "LogReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    # -- where the log is ----------------------------------------------------------------------
    def partitions(self, topic: str, timeout: float = 10.0) -> list[int]:
        """The partitions of `topic`, sorted; none when it does not exist."""
        meta = self._consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        return sorted(meta.partitions) if meta is not None and meta.error is None else []

    def watermarks(self, tp: TopicPart, timeout: float = 10.0, wait_s: float = 30.0) -> tuple[int, int]:
        """(low, high) of a partition; a transient error (a just-created partition without a leader
        yet, a broker away) is retried with the backoff for up to `wait_s` seconds."""
        deadline = time.monotonic() + wait_s
        backoff = Backoff(*self.backoff)
        while True:
            try:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(tp[0], tp[1]), timeout=timeout)
                return low, high
            except KafkaException as exc:
                err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if err is not None and not transient_kafka_error(err):
                    raise LogReadError(f"cannot read the end of {_where([tp])}: {err.str()}") from exc
                if time.monotonic() >= deadline:
                    raise
                backoff.sleep()

    def ends(self, topics: Iterable[str], timeout: float = 10.0) -> dict[TopicPart, int]:
        """The current end (high watermark) of every partition of `topics` that exists."""
        return {tp: high for tp, (_low, high) in self._marks(topics, timeout).items()}

    def _marks(self, topics: Iterable[str], timeout: float) -> dict[TopicPart, tuple[int, int]]:
        return {(t, p): self.watermarks((t, p), timeout) for t in sorted(set(topics)) for p in self.partitions(t, timeout)}

    def offsets_at(self, ends: Mapping[TopicPart, int], since_ms: int, timeout: float = 30.0) -> dict[TopicPart, int]:
        """Per partition of `ends`, the first offset appended at or after `since_ms` (epoch ms, log
        time), or its end when nothing was."""
        if not ends:
            return {}
        found = self._consumer.offsets_for_times([TopicPartition(t, p, since_ms) for t, p in ends], timeout=timeout)
        return {(f.topic, f.partition): (f.offset if f.offset >= 0 else ends[(f.topic, f.partition)]) for f in found}

    def spans(self, topics: Iterable[str], *, since_ms: int | None = None, last: int | None = None,
              timeout: float = 10.0) -> dict[TopicPart, Span]:
        """The non-empty spans of every partition of `topics` up to its end now: from the start (the
        default), from the first record appended at or after `since_ms`, or the `last` records."""
        marks = self._marks(topics, timeout)
        ends = {tp: high for tp, (_low, high) in marks.items() if high > 0}
        if since_ms is not None:
            starts = self.offsets_at(ends, since_ms)
        elif last is not None:
            starts = {tp: max(marks[tp][0], end - last) for tp, end in ends.items()}
        else:
            starts = dict.fromkeys(ends, 0)
        return {tp: (starts[tp], end) for tp, end in ends.items() if starts[tp] < end}

    # -- reading ---------------------------------------------------------------------------------
    def read(self, spans: Mapping[TopicPart, Span], *, batch_size: int = 1000,
             timeout_s: float | None = None) -> Iterator[list[Message]]:
        """The records of each partition's span [start, end), in batches of at most `batch_size`.
        `unfinished` names the partitions not done yet from this call on."""
        todo = {tp: (start, end) for tp, (start, end) in spans.items() if start < end}
        self.unfinished = todo
        return self._read(todo, batch_size, timeout_s)

    def _read(self, todo: dict[TopicPart, Span], batch_size: int, timeout_s: float | None) -> Iterator[list[Message]]:
        if not todo:
            return
        c = self._consumer
        assigned = [TopicPartition(t, p, start) for (t, p), (start, _) in todo.items()]
        c.assign(assigned)
        c.resume(assigned)   # a pause (a partition done in an earlier read) outlives unassign()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        backoff = Backoff(*self.backoff)
        idle = 0.0

        def finish(tp: TopicPart) -> None:
            del todo[tp]
            c.pause([TopicPartition(tp[0], tp[1])])

        try:
            while todo:
                # consume() waits for num_messages or its time-out: never ask for more than is due
                want = max(1, min(batch_size, sum(end - start for start, end in todo.values())))
                began = time.monotonic()
                batch: list[Message] = []
                progress, waiting = False, None
                for m in c.consume(num_messages=want, timeout=self.poll_s):
                    tp = (m.topic(), m.partition())
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            if tp in todo:
                                finish(tp)      # the partition ends before the span did
                                progress = True
                        elif not transient_kafka_error(err):
                            raise LogReadError(f"reading {_where([tp] if tp[0] else todo)}: {err.str()}")
                        else:
                            waiting = err
                        continue
                    span = todo.get(tp)
                    if span is None or m.offset() < span[0]:
                        continue                # done already, or left over from an earlier read
                    progress = True
                    if m.offset() >= span[1]:
                        finish(tp)              # past the end (the last offsets were not records)
                        continue
                    batch.append(m)
                    if m.offset() + 1 >= span[1]:
                        finish(tp)
                    else:
                        todo[tp] = (m.offset() + 1, span[1])
                if batch:
                    yield batch
                if progress:
                    idle = 0.0
                    backoff.reset()
                else:
                    if waiting is not None:
                        backoff.sleep()
                    idle += time.monotonic() - began
                    if idle > self.idle_timeout_s:
                        raise LogReadTimeout(f"reading {_where(todo)}: nothing for {idle:.0f} s with records still due"
                                             + (f" (last error: {waiting.str()})" if waiting is not None else "")
                                             + "; is the broker up?")
                if deadline is not None and todo and time.monotonic() > deadline:
                    raise LogReadTimeout(f"reading {_where(todo)}: not done after {timeout_s:g} s")
        finally:
            try:
                c.unassign()
            except (KafkaException, RuntimeError):
                pass                            # closed under us: nothing is assigned any more

    def records(self, spans: Mapping[TopicPart, Span], **kw) -> Iterator[Message]:
        """read(), one record at a time."""
        for batch in self.read(spans, **kw):
            yield from batch


def ensure_topics(settings: Settings, timeout: float = 30.0, align: bool = False) -> list[str]:
    """Create the namespace's topics if missing — the log (infinite retention, settings.partitions
    each) and the stream processors' state changelogs (adapters/topology.py: why both, and why
    before any worker starts) — and the ACLs that let the worker and publisher principals use the
    namespace (adapters/kafka_auth.py). A topic with another partition count is a TopologyMismatch
    naming it. `align` also sets the wanted configs on topics made before them (workers do, at start).
    Runs as the admin principal (the only one allowed to create topics and ACLs)."""
    from adapters import topology
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


def dead_letter_body(raw: bytes | None) -> dict:
    """A dead letter's body as dead_letter_record wrote it; a record that is not one reads as
    {"reason": "(not a dead-letter body)"}."""
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        body = None
    return body if isinstance(body, dict) else {"reason": "(not a dead-letter body)"}


def read_dead_letters(settings: Settings, principal: Principal, *, last: int | None = None,
                      group_id: str | None = None, idle_timeout_s: float = 30.0, timeout_s: float | None = None,
                      **extra) -> Iterator[tuple[Message, dict]]:
    """The one dead-letter reader (the operator view, the console, the tests): (record, body) for
    the dead letters in the namespace's dead-letter topic up to its end now — every one, or each
    partition's `last` newest — in offset order within a partition. Bodies: dead_letter_body."""
    with LogReader(kafka_config(settings, principal), "deadletters", group_id=group_id,
                   idle_timeout_s=idle_timeout_s, **extra) as reader:
        for m in reader.records(reader.spans([settings.topic("deadletter")], last=last), timeout_s=timeout_s):
            yield m, dead_letter_body(m.value())
