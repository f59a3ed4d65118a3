"""Failure semantics shared by every consumer: what kind of error this is, how long to wait, health.

Three kinds (README "Operations: failure semantics"):

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

import os
import random
import socket
import threading
import time
from pathlib import Path

import orjson

from memstream.errors import InvalidEvent, MemstreamError, UserErased

POISON, TRANSIENT, FATAL = "poison", "transient", "fatal"
# An event of a user erased since it was read: its outputs cannot be sealed (no key is ever
# created again for an erased user), and nothing of it may be kept. Dropped and counted — not
# poison (the record is fine and must not be copied to the dead-letter topic), not fatal.
DROPPED = "dropped"


class Unavailable(MemstreamError):
    """A dependency (database, key store, broker) did not answer: retry later (transient)."""


class StalePosition(MemstreamError):
    """A projector's position moved under it (another writer after a rebalance): drop the batch, re-seek."""


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


TRANSIENT_TYPES = _transient_types()
DATA_TYPES = _data_types()


def classify(exc: BaseException) -> str:
    if isinstance(exc, StalePosition):
        return TRANSIENT  # handled apart by the runner (re-seek), never poison
    if isinstance(exc, UserErased):
        return DROPPED
    if isinstance(exc, InvalidEvent) or isinstance(exc, DATA_TYPES):
        return POISON
    if isinstance(exc, TRANSIENT_TYPES):
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


class Backoff:
    """Capped exponential backoff with full jitter: 0.2 s, 0.4 s, … up to `cap`, each × U(0.5, 1]."""

    def __init__(self, base: float = 0.2, cap: float = 5.0):
        self.base, self.cap = base, cap
        self.attempt = 0

    def next(self) -> float:
        delay = min(self.cap, self.base * (2 ** self.attempt))
        self.attempt += 1
        return delay * (0.5 + random.random() / 2)

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
                    "components": {k: dict(v) for k, v in self._components.items()}, **self.extra}

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
                self.write()
        self.write()
        self._thread = threading.Thread(target=beat, name="health", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.write()


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
