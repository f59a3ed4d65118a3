"""Failure semantics shared by every consumer: what kind of error this is, how long to wait, health.

Three kinds (docs/operations.md#failure-semantics):

- **poison**: this record can never be decoded, validated or applied (malformed JSON or base64,
  a failed tag, a key that is not its envelope's user, a NUL in a user id, a row the database
  refuses as data). It goes to the dead-letter topic with its reason and source position, and
  the rest of the batch goes on. Poison is deterministic: the same bytes fail the same way.
- **transient**: the record is fine but something it needs is not there right now (Postgres,
  Neo4j, the key store, the broker, the network). Nothing is committed; the consumer waits
  with capped exponential backoff and jitter, reconnects and retries the same records. Its
  health says it is waiting, and on what.
- **fatal** (anything else: a bug, an impossible state): the worker process exits non-zero and
  its supervisor (`memstream run`) restarts it; it resumes from its stored positions.
"""
from __future__ import annotations

import functools
import os
import random
import socket
import threading
import time
from pathlib import Path

import orjson

from kernel.errors import InvalidEvent, MemstreamError, UserErased

POISON, TRANSIENT, FATAL = "poison", "transient", "fatal"
# An event of a user erased since it was read: its outputs cannot be sealed (no key is ever
# created again for an erased user), and nothing of it may be kept. Dropped and counted — not
# poison (the record is fine and must not be copied to the dead-letter topic), not fatal.
DROPPED = "dropped"


class Unavailable(MemstreamError):
    """A dependency (database, key store, broker) did not answer: retry later (transient)."""


class StalePosition(MemstreamError):
    """A projector's position moved under it (another writer after a rebalance): drop the batch, re-seek."""


@functools.cache   # first use, not import: psycopg and neo4j are ~0.3 s of CPU that `memstream status` never needs
def _transient_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [Unavailable, ConnectionError, TimeoutError, socket.timeout]
    try:
        import psycopg
        # OperationalError covers lost connections, admin shutdown, serialization failures and
        # deadlocks; InterfaceError a connection already closed under us.
        types += [psycopg.OperationalError, psycopg.InterfaceError]
    except ImportError:  # pragma: no cover
        pass
    try:
        from neo4j import exceptions as nx
        types += [nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError, nx.IncompleteCommit]
    except ImportError:  # pragma: no cover
        pass
    try:
        from psycopg_pool import PoolTimeout
        types.append(PoolTimeout)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


@functools.cache
def _data_types() -> tuple[type[BaseException], ...]:
    """Errors a database raises about the *values* it was given: deterministic, so poison."""
    types: list[type[BaseException]] = []
    try:
        import psycopg
        types += [psycopg.DataError, psycopg.IntegrityError]
    except ImportError:  # pragma: no cover
        pass
    try:
        from neo4j import exceptions as nx
        types += [nx.CypherTypeError, nx.ConstraintError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


def classify(exc: BaseException) -> str:
    if isinstance(exc, StalePosition):
        return TRANSIENT  # handled apart by the runner (re-seek), never poison
    if isinstance(exc, UserErased):
        return DROPPED
    if isinstance(exc, InvalidEvent) or isinstance(exc, _data_types()):
        return POISON
    if isinstance(exc, _transient_types()):
        return TRANSIENT
    try:
        from confluent_kafka import KafkaError, KafkaException
        if isinstance(exc, KafkaException):
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and (err.retriable() or err.code() in (
                    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT)):
                return TRANSIENT
            if isinstance(err, KafkaError) and err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                return POISON
    except ImportError:  # pragma: no cover
        pass
    try:
        # faust's client (aiokafka): a broker away or moving shows up as a retriable error or a
        # timeout while it is gone; the guard waits it out rather than restarting the worker.
        from aiokafka import errors as ak
        if isinstance(exc, ak.KafkaError) and (exc.retriable or isinstance(exc, ak.KafkaTimeoutError)):
            return TRANSIENT
    except ImportError:  # pragma: no cover
        pass
    try:
        # A table's changelog that faust has just created may be missing from the metadata for a
        # moment ("… changelog topic has 0 partitions"): retry once the metadata has caught up.
        from faust.exceptions import PartitionsMismatch
        if isinstance(exc, PartitionsMismatch) and "has 0 partitions" in str(exc):
            return TRANSIENT
    except ImportError:  # pragma: no cover
        pass
    # The publish helpers wrap a failed delivery in a MemstreamError naming it.
    if isinstance(exc, MemstreamError) and ("undelivered" in str(exc) or "publish to" in str(exc)):
        return POISON if "MSG_SIZE_TOO_LARGE" in str(exc) else TRANSIENT
    return FATAL


def one_line(exc: BaseException) -> str:
    """An error as one log line, whole: its type and its message with line breaks folded (never
    an empty "TimeoutError: ")."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else f"{type(exc).__name__} (no message)"


class Throttled:
    """A warning that repeats while an outage lasts, logged at most once per `every_s` seconds:
    the first at once, later ones with how many were held back, and one line on recovery. (A
    listener reconnecting each second printed a line a second into every CLI command's output
    while Postgres was down.)"""

    def __init__(self, logger, every_s: float = 30.0, clock=time.monotonic):
        self.log, self.every_s, self.clock = logger, every_s, clock
        self.held = 0
        self.failures = 0
        self._last = float("-inf")

    def warning(self, msg: str, *args) -> None:
        self.failures += 1
        now = self.clock()
        if now - self._last < self.every_s:
            self.held += 1
            return
        more = f" ({self.held} more like it in the last {self.every_s:.0f} s)" if self.held else ""
        self.log.warning(msg + more, *args)
        self._last, self.held = now, 0

    def recovered(self, msg: str) -> None:
        if self.failures:
            self.log.warning("%s after %d failed attempts", msg, self.failures)
        self.failures, self.held, self._last = 0, 0, float("-inf")


class Backoff:
    """The one retry policy: capped exponential backoff with jitter — 0.2 s, 0.4 s, … up to `cap`,
    each × U(0.5, 1] (half of the delay fixed, half random: retries from many callers spread out,
    and none comes back at once). Callers choose `base` and `cap`; every retry loop in memstream
    waits through one of these (the workers' supervisor, the projectors, the log reader in
    adapters/bus.py, the LLM channel)."""

    def __init__(self, base: float = 0.2, cap: float = 5.0):
        self.base, self.cap = base, cap
        self.attempt = 0

    def delay(self, attempt: int) -> float:
        """The wait before retry number `attempt` + 1 (0: the first retry), jittered."""
        return min(self.cap, self.base * (2 ** attempt)) * (0.5 + random.random() / 2)

    def next(self) -> float:
        delay = self.delay(self.attempt)
        self.attempt += 1
        return delay

    def sleep(self) -> float:
        """Wait the next delay (blocking); returns it."""
        delay = self.next()
        time.sleep(delay)
        return delay

    def reset(self) -> None:
        self.attempt = 0


# -- health -------------------------------------------------------------------------------------

# The worker process's Health, set by memstream/app/workers.py (faust agents report through it).
CURRENT: "Health | None" = None

def health_dir(settings) -> Path:
    return Path(settings.stack_dir) / "run" / "health"


def health_file(settings, worker: str) -> Path:
    return health_dir(settings) / f"{settings.namespace}-{worker}.json"


class Health:
    """Per-component state of one worker process, written to a small JSON file every second.

    `memstream pipeline status` reads these files: a heartbeat older than a few seconds means the
    process is stuck or gone; a component in state `waiting` says what it waits for.
    """

    def __init__(self, settings, worker: str, interval: float = 1.0):
        self.path = health_file(settings, worker)
        # The heartbeat thread also checks that a broker answers: a worker's Kafka client retries
        # quietly inside faust/librdkafka while every broker is gone, and a fresh heartbeat alone
        # showed such a worker "up" for minutes (`memstream pipeline status` shows it degraded).
        self.brokers: list[str] = list(getattr(settings, "kafka_addresses", []) or [])
        self.broker: dict | None = None   # {"state": "connected"|"lost", "since", "reason"?}; None: not probed yet
        self.worker = worker
        self.interval = interval
        self._lock = threading.Lock()
        self._components: dict[str, dict] = {}
        self.extra: dict = {}   # about the process, not a component (e.g. its metrics endpoint)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.time()

    def set(self, component: str, state: str, **info) -> None:
        with self._lock:
            old = self._components.get(component, {})
            since = old.get("since") if old.get("state") == state else time.time()
            self._components[component] = {"state": state, "since": since, **info}

    def update(self, component: str, **info) -> None:
        with self._lock:
            self._components.setdefault(component, {"state": "running", "since": time.time()}).update(info)

    def snapshot(self) -> dict:
        with self._lock:
            return {"worker": self.worker, "pid": os.getpid(), "started": self.started, "heartbeat": time.time(),
                    "components": {k: dict(v) for k, v in self._components.items()}, "broker": self.broker,
                    **self.extra}

    def check_broker(self) -> None:
        """Record whether any broker accepts a connection (state, since when, and why not)."""
        if not self.brokers:
            return
        reason = unreachable(self.brokers)
        state = "lost" if reason else "connected"
        since = self.broker["since"] if self.broker and self.broker["state"] == state else time.time()
        self.broker = {"state": state, "since": since, **({"reason": reason} if reason else {})}

    def write(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(orjson.dumps(self.snapshot()))
            os.replace(tmp, self.path)
        except OSError:
            pass

    def start(self) -> "Health":
        def beat():
            while not self._stop.wait(self.interval):
                self.check_broker()
                self.write()
        self.check_broker()
        self.write()
        self._thread = threading.Thread(target=beat, name="health", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.write()


def unreachable(addresses: list[str], timeout: float = 0.5) -> str | None:
    """None when at least one of the brokers (host:port) accepts a TCP connection; else why each did
    not, e.g. "127.0.0.1:29092: connection refused". A connect, not a Kafka request: cheap enough
    for a heartbeat, and a dead or unreachable broker is exactly what it tells apart."""
    problems = []
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
            return None
        except TimeoutError:
            problems.append(f"{address}: no answer in {timeout:g} s")
        except OSError as exc:
            problems.append(f"{address}: {describe(exc)}")
    return "; ".join(problems)


def describe(exc: BaseException) -> str:
    """An error as one line that always says something: `TimeoutError()` has an empty str(), and
    "TimeoutError: " told an operator nothing. OSErrors say their strerror, lower-cased like a clause."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if text:
        return f"{type(exc).__name__}: {text}"
    fallback = {"TimeoutError": "no answer before the time-out", "CancelledError": "cancelled"}
    return f"{type(exc).__name__}: {fallback.get(type(exc).__name__, 'no message (' + repr(exc) + ')')}"


def read_health(settings) -> dict[str, dict]:
    out = {}
    d = health_dir(settings)
    if d.is_dir():
        for f in sorted(d.glob(f"{settings.namespace}-*.json")):
            try:
                out[f.stem[len(settings.namespace) + 1:]] = orjson.loads(f.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
    return out


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True
