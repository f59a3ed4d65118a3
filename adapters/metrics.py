"""Prometheus metrics: what every process counts, and where it serves them.

Each process has its own registry (prometheus_client's default): the API serves it at `/metrics`
(with the consumer lag of every group of the namespace, adapters/lag.py), and every worker
serves it on its own port, `MEMSTREAM_METRICS_PORT` + a fixed offset per worker (0: none).

Labels are bounded by construction, never free text or ids: a topic is its logical name (`turns`,
`facts`, …), an event type is one of the contract's types (anything else is `unknown`), a dead
letter's reason is reduced to a kind (`reason_kind`), consumers/components/projectors are names
from the code. So a scrape carries no personal data, and the API serves `/metrics` without auth.

Counting is cheap on purpose (bench: `python -m bench.metrics_overhead`): a child counter is
looked up once per label set and cached here, so a count is a dict lookup and a locked add.
"""
from __future__ import annotations

import logging
import threading
import time

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

from schemas import peek

log = logging.getLogger("memstream.metrics")

# Each worker's port is MEMSTREAM_METRICS_PORT + its offset (fixed, so scrape configs are static).
WORKER_PORT_OFFSETS = {"extractor": 1, "memory": 2, "projectors": 3, "llm-extractor": 4, "ticker": 5}

CONSUMED = Counter("memstream_events_consumed", "Records read by a consumer, by topic and event type.",
                   ["consumer", "topic", "type"])
PRODUCED = Counter("memstream_events_produced", "Records sent by a producer, by topic and event type "
                   "(a send retried after a transient failure counts again).", ["producer", "topic", "type"])
DEAD_LETTERS = Counter("memstream_dead_letters", "Records dead-lettered, by consumer and kind of reason.",
                       ["consumer", "kind"])
DECISIONS = Counter("memstream_memory_decisions", "Memory decisions the memory processor emitted, by event type.",
                    ["type"])
EDITS_IGNORED = Counter("memstream_memory_edits_ignored", "Edits (memory.stated with `edits`) the memory processor "
                        "decided nothing for: their memory was no longer active when decided (superseded, merged, "
                        "archived, forgotten) or was never the user's.")
PROJECTOR_BATCH = Histogram("memstream_projector_batch_seconds", "One projector batch: rows and positions in one "
                            "transaction.", ["projector"],
                            buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
PROJECTOR_BATCH_EVENTS = Counter("memstream_projector_applied_events", "Events a projector applied.", ["projector"])
QUERY_SECONDS = Histogram("memstream_query_seconds", "Query latency (recall, context), from the query layer.",
                          ["query"], buckets=(.005, .01, .02, .03, .05, .075, .1, .15, .25, .5, 1, 2.5, 5))
RATE_LIMITED = Counter("memstream_rate_limited", "Requests refused with a 429 by a rate limit (services/rate_limits.py): "
                       "key, tenant or lookup (unknown keys per client).", ["limit"])
LLM_CALLS = Counter("memstream_llm_calls", "LLM call attempts by purpose and outcome "
                    "(ok, timeout, error, invalid_output).", ["what", "outcome"])
EMBED_CALLS = Counter("memstream_embedder_calls", "Embedder calls by kind (passage, query) and outcome (ok, error).",
                      ["kind", "outcome"])
EMBED_SECONDS = Histogram("memstream_embedder_seconds", "Embedder call latency (cache misses only).", ["kind"],
                          buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
RETRIES = Counter("memstream_transient_retries", "Retries after a transient failure (a service away), by component.",
                  ["component"])
WAITING = Gauge("memstream_waiting", "1 while a component waits out a transient failure, else 0.", ["component"])
CLOCK_AHEAD = Gauge("memstream_clock_ahead_seconds", "How far this host's clock ran ahead of the Kafka broker's at "
                    "the last delivery (negative: behind; includes the delivery delay). Past MEMSTREAM_MAX_FUTURE_SKEW_S "
                    "the SDK refuses to stamp event times.")
WORKER = Gauge("memstream_worker_info", "1 for the worker this process is (its namespace and name).",
               ["namespace", "worker"])

_KNOWN_TYPES: frozenset[str] | None = None
_children: dict = {}
_lock = threading.Lock()


def known_types() -> frozenset[str]:
    global _KNOWN_TYPES
    if _KNOWN_TYPES is None:
        from schemas.events import REGISTRY as EVENTS
        _KNOWN_TYPES = frozenset(t for t, _ in EVENTS) | {"watermark"}
    return _KNOWN_TYPES


def topic_label(topic: str | None) -> str:
    """`<namespace>.turns` → `turns`: one label value per logical topic, whatever the namespace."""
    return topic.rsplit(".", 1)[-1] if topic else "unknown"


def type_label(event_type: str | None) -> str:
    """An event type from the contract, else `unknown` (a poison record's type is attacker text)."""
    return event_type if event_type in known_types() else "unknown"


def peek_type(raw: bytes | None) -> str:
    """A record's type as a metric label, without decoding (or unsealing) it: schemas/peek.py."""
    return type_label(peek.peek_type(raw)) if raw else "empty"


def _child(metric, labels: tuple):
    """metric.labels(*labels), looked up once: the hot path is then one dict lookup."""
    key = (id(metric), labels)
    child = _children.get(key)
    if child is None:
        with _lock:
            child = _children.get(key) or metric.labels(*labels)
            _children[key] = child
    return child


def consumed(consumer: str, topic: str | None, raw: bytes | None = None, event_type: str | None = None, n: int = 1) -> None:
    kind = type_label(event_type) if event_type is not None else peek_type(raw)
    _child(CONSUMED, (consumer, topic_label(topic), kind)).inc(n)


def produced(producer: str, topic: str | None, event_type: str, n: int = 1) -> None:
    _child(PRODUCED, (producer, topic_label(topic), type_label(event_type))).inc(n)


def decision(event_type: str) -> None:
    _child(DECISIONS, (type_label(event_type),)).inc()


def edit_ignored() -> None:
    EDITS_IGNORED.inc()


# Dead-letter reasons are free text (they name fields, sizes, ids): the label is a kind of them.
# Ordered: the first match wins. The texts come from adapters/bus.py, schemas/codec.py, schemas/records.py,
# adapters/crash_ledger.py, streams/app.py and projections/runner.py.
_REASON_KINDS = (
    ("times with this record in flight", "crash_loop"),
    ("record has no key", "bad_key"),
    ("record key ", "bad_key"),
    ("unknown event ", "unknown_version"),
    ("unknown key id", "unknown_key"),   # schemas/records.py and the key store: not sealed by us
    ("is before 1970-01-01", "bad_time"),
    ("after the broker appended", "bad_time"),
    ("sealed", "unsealable"),            # malformed base64, short ciphertext, failed authentication
    ("not valid base64", "unsealable"),
    ("empty record", "empty"),
    ("user id", "bad_user_id"),
    ("cannot apply it", "store_rejected"),
    ("cannot process it", "unprocessable"),
)


def reason_kind(reason: str) -> str:
    for needle, kind in _REASON_KINDS:
        if needle in reason:
            return kind
    return "invalid"   # the envelope or its data breaks the contract (JSON, schema, limits)


def dead_lettered(consumer: str, reason: str) -> None:
    _child(DEAD_LETTERS, (consumer, reason_kind(reason))).inc()


def dead_letters_total(consumer: str) -> int:
    """This process's dead letters for `consumer`, over every reason kind: what its health file
    reports (streams/app.py DeadLetters.count), read from the metric itself."""
    return int(sum(sample.value for family in DEAD_LETTERS.collect() for sample in family.samples
                   if sample.name.endswith("_total") and sample.labels.get("consumer") == consumer))


def projector_batch(projector: str, seconds: float, applied: int) -> None:
    _child(PROJECTOR_BATCH, (projector,)).observe(seconds)
    _child(PROJECTOR_BATCH_EVENTS, (projector,)).inc(applied)


def llm_call(what: str, outcome: str) -> None:
    _child(LLM_CALLS, (what, outcome)).inc()


def embedder_call(kind: str, outcome: str, seconds: float) -> None:
    _child(EMBED_CALLS, (kind, outcome)).inc()
    if outcome == "ok":
        _child(EMBED_SECONDS, (kind,)).observe(seconds)


def clock_ahead(seconds: float) -> None:
    CLOCK_AHEAD.set(seconds)


def retry(component: str) -> None:
    _child(RETRIES, (component,)).inc()


def waiting(component: str, is_waiting: bool) -> None:
    _child(WAITING, (component,)).set(1 if is_waiting else 0)


def health_state(component: str, state: str) -> None:
    """Mirror a component's health: each `waiting` is one retry after a transient failure."""
    if state == "waiting":
        retry(component)
    waiting(component, state == "waiting")


def timed_query(name: str):
    """Decorator: the call's latency into memstream_query_seconds{query=name} (sync or async)."""
    def wrap(fn):
        import functools
        import inspect
        child = QUERY_SECONDS.labels(name)
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    child.observe(time.perf_counter() - started)
            return run_async

        @functools.wraps(fn)
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                child.observe(time.perf_counter() - started)
        return run
    return wrap


# -- serving --------------------------------------------------------------------------------------

def worker_port(settings, worker: str) -> int | None:
    base = settings.metrics_port
    # copy k of a stage (MEMSTREAM_INSTANCE) serves 10·(k-1) ports above the first copy
    return base + WORKER_PORT_OFFSETS.get(worker, 9) + 10 * (settings.instance - 1) if base else None


def serve_worker(settings, worker: str, health=None) -> int | None:
    """Serve this process's metrics on its worker port (a daemon thread); the port, or None.

    A port that is taken (another pipeline on this machine) is logged and skipped: metrics never
    stop a worker. The port goes into the worker's health file, so `memstream status` and tests
    find the process they mean.
    """
    _child(WORKER, (settings.namespace, settings.worker_label(worker))).set(1)
    port = worker_port(settings, worker)
    if port is None:
        return None
    from prometheus_client import start_http_server
    try:
        start_http_server(port, addr=settings.metrics_host)
    except OSError as exc:
        log.warning("metrics: cannot serve on %s:%d (%s); this worker runs without an endpoint",
                    settings.metrics_host, port, exc)
        if health is not None:
            health.extra = {"metrics": {"port": None, "error": f"port {port}: {exc}"[:200]}}   # rebound, never mutated:
            # the heartbeat thread reads it without a lock
        return None
    if health is not None:
        health.extra = {"metrics": {"port": port}}
    return port


_lag_collector = None


def mount(app, settings) -> None:
    """GET /metrics on the API: this process's metrics plus every consumer group's lag.

    Unauthenticated on purpose: no label carries a user id or content (see the module doc).
    The route is a plain `def`, so the lag's Kafka calls run in the thread pool, never on the loop.
    """
    global _lag_collector
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.responses import Response

    from adapters.lag import LagCollector
    if _lag_collector is None:
        _lag_collector = LagCollector(settings)
        REGISTRY.register(_lag_collector)
    else:                       # create_app called again in this process (tests): follow its settings
        _lag_collector.settings = settings

    @app.get("/metrics", include_in_schema=False)
    def metrics_route() -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
