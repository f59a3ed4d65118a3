"""Small helpers shared by the tests."""
from __future__ import annotations

import time
import uuid


# Worker processes the tests depend on: a wait fails at once if one of them died.
WATCHED: dict = {}


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        dead = [name for name, proc in WATCHED.items() if proc.poll() is not None]
        if dead:
            raise AssertionError(f"worker(s) {dead} exited while waiting for {what}; see .stack/logs")
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def unique_user(prefix: str = "u") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def assert_same_projections(left, right, what: str, catch_up_s: float = 60.0) -> None:
    """Every projector's content checksum under `left` (the live run) equals the one under `right`
    (a run that read the same log to its end). The live projectors are first given up to
    `catch_up_s` to reach the reference's position in every partition it read: "the memory topic's
    end" is not enough for a projector that also reads turns and facts (the audit index), and a
    live projector still moving to a new partition leader lags a little behind a fresh one."""
    from projections.registry import PROJECTORS, build_projector
    for name in PROJECTORS:
        a, b = build_projector(name, left), build_projector(name, right)
        a.setup()
        b.setup()
        try:
            deadline = time.monotonic() + catch_up_s
            reference = {tp: o for tp, o in b.positions().items() if not tp[0].startswith("watermark:")}
            while (behind := _behind(a, reference)) and time.monotonic() < deadline:
                time.sleep(0.25)
            left_sum, right_sum = a.checksum(), b.checksum()
            assert left_sum == right_sum, f"{name}: {what}\n{_row_diff(a, left, right)}" + (
                f"\nstill behind the reference after {catch_up_s:.0f} s (partition: live, reference): {behind}" if behind else "")
        finally:
            a.close()
            b.close()


def _behind(live, reference: dict) -> dict:
    """The partitions where the live projector's stored position is short of `reference`'s."""
    got = live.positions()
    return {tp: (got.get(tp), o) for tp, o in reference.items() if got.get(tp, -1) < o}


def _row_diff(projector, left, right, limit: int = 5) -> str:
    """For a Postgres projection: each table's row counts and a few rows only one side holds, so a
    failed comparison in CI says what differs (the graph's checksum has no rows to show)."""
    tables = getattr(projector, "CHECKSUM", None)
    if not tables:
        return ""
    import psycopg
    from psycopg import sql
    out = []
    with psycopg.connect(left.pg_dsn()) as conn:
        for table, (columns, _order) in sorted(tables.items()):
            cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
            def rows(a, b):
                return conn.execute(sql.SQL("SELECT {c} FROM {a}.{t} EXCEPT SELECT {c} FROM {b}.{t} LIMIT %s").format(
                    c=cols, a=sql.Identifier(a.namespace), b=sql.Identifier(b.namespace), t=sql.Identifier(table)),
                    (limit,)).fetchall()
            counts = [conn.execute(sql.SQL("SELECT count(*) FROM {s}.{t}").format(
                s=sql.Identifier(x.namespace), t=sql.Identifier(table))).fetchone()[0] for x in (left, right)]
            out.append(f"{table}: {counts[0]} rows vs {counts[1]}; only left {rows(left, right)}; "
                       f"only right {rows(right, left)}")
    return "\n".join(out)


# -- a private stack for fault injection (tests/test_faults_*.py) --------------------------------
# Faults stop Postgres/Neo4j and kill workers: never on the shared stack. This one has its own
# directory and ports (override with MEMSTREAM_FAULT_*), reuses the shared stack's jars, and is
# stopped at the end of the session unless MEMSTREAM_FAULT_KEEP_STACK=1 (faster reruns).
import os as _os
import shutil as _shutil
import tempfile as _tempfile
from pathlib import Path as _Path

FAULT_STACK_ENV = {
    "MEMSTREAM_STACK_DIR": _os.environ.get("MEMSTREAM_FAULT_STACK_DIR",
                                           str(_Path(_tempfile.gettempdir()) / "memstream-faultstack")),
    "MEMSTREAM_KAFKA_PORT": _os.environ.get("MEMSTREAM_FAULT_KAFKA_PORT", "31092"),
    "MEMSTREAM_KAFKA_CONTROLLER_PORT": _os.environ.get("MEMSTREAM_FAULT_KAFKA_CONTROLLER_PORT", "31093"),
    "MEMSTREAM_PG_PORT": _os.environ.get("MEMSTREAM_FAULT_PG_PORT", "31432"),
    "MEMSTREAM_NEO4J_BOLT_PORT": _os.environ.get("MEMSTREAM_FAULT_NEO4J_BOLT_PORT", "31687"),
    "MEMSTREAM_API_PORT": _os.environ.get("MEMSTREAM_FAULT_API_PORT", "31080"),
}
_FAULT_STACK_STARTED: list = []


def fault_stack_settings(namespace: str):
    """Settings of the private fault stack for `namespace` (its children get FAULT_STACK_ENV)."""
    from kernel.config import Settings
    return Settings(namespace=namespace, stack_dir=_Path(FAULT_STACK_ENV["MEMSTREAM_STACK_DIR"]),
                    kafka_port=int(FAULT_STACK_ENV["MEMSTREAM_KAFKA_PORT"]),
                    kafka_controller_port=int(FAULT_STACK_ENV["MEMSTREAM_KAFKA_CONTROLLER_PORT"]),
                    pg_port=int(FAULT_STACK_ENV["MEMSTREAM_PG_PORT"]),
                    neo4j_bolt_port=int(FAULT_STACK_ENV["MEMSTREAM_NEO4J_BOLT_PORT"]),
                    api_port=int(FAULT_STACK_ENV["MEMSTREAM_API_PORT"]))


def fault_stack_up(settings, request=None) -> None:
    """Start the private stack (idempotent); stop it when the pytest session ends (`request`: a
    session-scoped fixture's)."""
    import time as _time

    from kernel.config import get_settings
    from memstream.stack import services
    from memstream.stack.process import Layout
    layout = Layout.of(settings)
    layout.root.mkdir(parents=True, exist_ok=True)
    shared_lib = Layout.of(get_settings()).lib   # the shared stack's jars: no second download
    if not layout.lib.exists():
        layout.lib.symlink_to(shared_lib, target_is_directory=True)
    with services._exclusive(layout):
        kafka = next(svc for svc in services._services(settings) if svc.name == "kafka")
        if kafka.pid() is None and kafka.data_dir.exists():
            # A throw-away stack starts with an empty log: each session leaves ~600 partitions, and
            # after the broker kill -9 test Kafka recovers every one of them (a CI run on a machine
            # with a few sessions' leftovers took over 120 s to come back and failed what followed).
            _shutil.rmtree(kafka.data_dir)
        services._up(settings, _time.monotonic())
    if request is not None and not _FAULT_STACK_STARTED and _os.environ.get("MEMSTREAM_FAULT_KEEP_STACK") != "1":
        _FAULT_STACK_STARTED.append(1)
        # the session fixture's finalizer, not config cleanup: an xdist worker reports itself done
        # before its config cleanup runs, and the controller then ends it, leaving the stack running
        request.addfinalizer(lambda: [svc.stop() for svc in services._services(settings)])


def fault_service(settings, name: str):
    from memstream.stack import services
    return next(svc for svc in services._services(settings) if svc.name == name)


def restart_service(settings, name: str, timeout: float | None = None) -> None:
    """Start a stopped service of the private stack again and wait until it answers, as long as
    `stack up` would (MEMSTREAM_STACK_START_TIMEOUT_S): a broker killed under load took over 120 s."""
    from memstream.stack import services
    svc = fault_service(settings, name)
    svc.prepare()
    proc = svc.start()
    timeout = settings.stack_start_timeout_s if timeout is None else timeout
    services._wait_healthy(svc, proc, time.monotonic() + timeout, timeout)
    svc.after_healthy()


def fault_env(settings) -> dict:
    """Environment for worker processes on the private stack `settings` names (the fault stack, or
    the broker cluster beside it)."""
    s = settings
    return {**_os.environ, "MEMSTREAM_STACK_DIR": str(s.stack_dir), "MEMSTREAM_KAFKA_PORT": str(s.kafka_port),
            "MEMSTREAM_KAFKA_CONTROLLER_PORT": str(s.kafka_controller_port),
            "MEMSTREAM_KAFKA_BROKERS": str(s.kafka_cluster_size), "MEMSTREAM_PG_PORT": str(s.pg_port),
            "MEMSTREAM_NEO4J_BOLT_PORT": str(s.neo4j_bolt_port), "MEMSTREAM_API_PORT": str(s.api_port),
            "MEMSTREAM_NAMESPACE": s.namespace, "MEMSTREAM_PARTITIONS": str(s.partitions),
            # no metrics ports: the shared stack's pipeline (tests/test_metrics.py) owns this session's
            # block, and the fault tests run beside it in the other pytest process (conftest.py)
            "MEMSTREAM_METRICS_PORT": "0"}


# -- a 3-broker Kafka cluster beside the fault stack (the broker-kill test) ----------------------
# Only its Kafka is its own: it shares the fault stack's Postgres and Neo4j (and so its secrets),
# which saves a second Postgres and Neo4j start in every CI run.
CLUSTER_STACK_ENV = {
    "MEMSTREAM_STACK_DIR": _os.environ.get("MEMSTREAM_CLUSTER_STACK_DIR",
                                           str(_Path(_tempfile.gettempdir()) / "memstream-clusterstack")),
    "MEMSTREAM_KAFKA_PORT": _os.environ.get("MEMSTREAM_CLUSTER_KAFKA_PORT", "32092"),
    "MEMSTREAM_KAFKA_CONTROLLER_PORT": _os.environ.get("MEMSTREAM_CLUSTER_KAFKA_CONTROLLER_PORT", "32093"),
}
_CLUSTER_STARTED: list = []


def cluster_stack_settings(fault_settings, brokers: int = 3):
    """The fault stack's settings with the cluster's Kafka instead of its single broker."""
    return fault_settings.model_copy(update={
        "stack_dir": _Path(CLUSTER_STACK_ENV["MEMSTREAM_STACK_DIR"]), "kafka_brokers": brokers,
        "kafka_port": int(CLUSTER_STACK_ENV["MEMSTREAM_KAFKA_PORT"]),
        "kafka_controller_port": int(CLUSTER_STACK_ENV["MEMSTREAM_KAFKA_CONTROLLER_PORT"])})


def cluster_nodes(settings) -> list:
    from memstream.stack import services
    from memstream.stack.kafka import Kafka
    return [svc for svc in services._services(settings) if isinstance(svc, Kafka)]


def cluster_stack_up(settings, fault_settings, request=None) -> None:
    """Start the cluster's Kafka nodes (idempotent); stop them when the pytest session ends.
    1. jars and secrets are the fault stack's (symlinks): the same SCRAM users, key store and roles;
    2. a cluster none of whose nodes runs starts from an empty log (as the fault stack does), so
       leftover partitions of earlier sessions never slow its start;
    3. every node is launched before any is waited for: a node is healthy only once the quorum
       (2 of 3 controllers) has registered it."""
    from memstream.stack import services
    from memstream.stack.process import Layout
    layout, fault_layout = Layout.of(settings), Layout.of(fault_settings)
    layout.root.mkdir(parents=True, exist_ok=True)
    for name, target in (("lib", fault_layout.lib.resolve()), ("secrets", fault_layout.root / "secrets")):
        link = layout.root / name
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
    nodes = cluster_nodes(settings)
    with services._exclusive(layout):
        if all(n.pid() is None for n in nodes):
            for n in nodes:
                _shutil.rmtree(n.data_dir, ignore_errors=True)
            (layout.root / "kafka" / "cluster.id").unlink(missing_ok=True)
        procs = {}
        for n in nodes:
            if n.pid() is None:
                n.prepare()
                procs[n.name] = n.start()
        limit = settings.stack_start_timeout_s
        deadline = time.monotonic() + limit
        for n in nodes:
            services._wait_healthy(n, procs.get(n.name), deadline, limit)
    if request is not None and not _CLUSTER_STARTED and _os.environ.get("MEMSTREAM_FAULT_KEEP_STACK") != "1":
        _CLUSTER_STARTED.append(1)
        request.addfinalizer(lambda: [n.stop() for n in cluster_nodes(settings)])   # as fault_stack_up


def stored_positions(settings, projector_name: str) -> dict:
    """A projector's stored positions, read without its setup: a probe polled while the projector
    runs must not run DDL beside it (CREATE … IF NOT EXISTS against a live writer deadlocked in
    test_kill_9_projectors_mid_burst_supervisor_restarts). Empty before the projector made its tables."""
    import psycopg

    from adapters import neo4j_auth
    from projections.postgres_projectors import _PostgresProjector
    from projections.registry import build_projector
    proj = build_projector(projector_name, settings)
    try:
        if not isinstance(proj, _PostgresProjector):
            proj.driver = neo4j_auth.driver(settings)
        return proj.positions()
    except psycopg.errors.UndefinedTable:
        return {}
    finally:
        proj.close()


def stored_total(settings, projector_name: str) -> int:
    """Sum of a projector's stored next offsets over real topics (watermarks excluded)."""
    return sum(o for (t, _p), o in stored_positions(settings, projector_name).items() if not t.startswith("watermark:"))


def projectors_behind(settings) -> dict[str, dict[str, tuple[int, int]]]:
    """Every projector short of the log's end on a topic it reads: {name: {topic: (stored, end)}}.
    Per topic, not against the memory topic alone: the audit index, the session windows and the
    task buffers also read turns, facts or tasks (the producers are idempotent, not
    transactional, so a topic's high watermarks are where its readers end)."""
    from projections.registry import PROJECTOR_TYPES
    behind: dict[str, dict[str, tuple[int, int]]] = {}
    ends: dict[str, int] = {}          # per topic: several projectors read the memory topic
    for name, projector_type in PROJECTOR_TYPES.items():
        stored = stored_positions(settings, name)
        for topic in projector_type.topics:
            if topic not in ends:
                ends[topic] = end_offsets(settings, [topic])
            got = sum(o for (t, _p), o in stored.items() if t == settings.topic(topic))
            if got < ends[topic]:
                behind.setdefault(name, {})[topic] = (got, ends[topic])
    return behind


def end_offsets(settings, topics: list[str]) -> int:
    """Sum of the high watermarks of the namespace's `topics` (logical names)."""
    from confluent_kafka import Consumer, TopicPartition

    from adapters.kafka_auth import ADMIN, kafka_config
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": "memstream-faults-probe"})
    try:
        total = 0
        for t in topics:
            for p in range(settings.partitions):
                total += c.get_watermark_offsets(TopicPartition(settings.topic(t), p), timeout=10)[1]
        return total
    finally:
        c.close()


class KeepsPublishing:
    """A user who keeps publishing turns (through a client of its own, with its own key cache, as
    another process would) until the block ends: `published` and `refused` (UserErased) count them.

        with KeepsPublishing(settings, user, "s1", "I live in Town{i}") as p: ...
    """

    def __init__(self, settings, user: str, session: str, text: str, every: float = 0.02):
        import threading
        self.settings, self.user, self.session, self.text, self.every = settings, user, session, text, every
        self.published: list[int] = []
        self.refused: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from kernel.errors import UserErased
        from adapters.sdk import MemoryClient
        with MemoryClient(self.settings) as own:
            i = 0
            while not self._stop.is_set():
                try:
                    own.record_turn(self.user, self.session, "user", self.text.format(i=i))
                    self.published.append(i)
                except UserErased:
                    self.refused.append(i)
                i += 1
                time.sleep(self.every)

    def __enter__(self) -> "KeepsPublishing":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
