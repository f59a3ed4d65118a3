"""`memstream stack install | up | down | status`: the local Kafka + Postgres + Neo4j stack.

No Docker here: each service runs as a plain process from packages (Maven Central jars,
Debian's postgresql-15 + pgvector built from source), with its data, logs and pid files under
<stack_dir>. docker-compose.yml at the repo root describes the same stack for Docker users.

Every function reads get_settings(); failures raise PrerequisiteMissing / StackError with a
one-line message (the CLI prints it without a stack trace).
"""
from __future__ import annotations

import fcntl
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator

from kernel.config import Settings, get_settings
from kernel.errors import MemstreamError, StackError
from memstream.stack import prereqs, process
from memstream.stack.base import Service
from memstream.stack.kafka import Kafka
from adapters.neo4j_auth import ensure_password as ensure_neo4j_password
from adapters.privacy.masterkeys import ensure_master_keys
from memstream.stack.neo4j import Neo4j
from memstream.stack.postgres import Postgres
from memstream.stack.process import Layout



def _services(settings: Settings) -> list[Service]:
    kafka = [Kafka(settings, node) for node in range(1, settings.kafka_cluster_size + 1)]
    return [*kafka, Postgres(settings), Neo4j(settings)]


def _line(name: str, state: str, pid: int | None, address: str, log: Any, note: str = "") -> str:
    pid_s = f"pid {pid}" if pid else "-"
    return f"{name:<9}{state:<9}{pid_s:<12}{address:<24}log {log}" + (f"  ({note})" if note else "")


@contextmanager
def _exclusive(layout: Layout) -> Iterator[None]:
    """Serialise up/down across processes: a test session and the CLI may both call up() at
    once, and two racing starts would fight over ports and store locks. (Services are spawned
    with close_fds, so they never inherit this lock.)"""
    layout.run.mkdir(parents=True, exist_ok=True)
    with open(layout.run / "stack.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


# -- install -------------------------------------------------------------------------------------

def installed() -> bool:
    """Everything `install` fetches is there (so a caller can skip printing its steps again)."""
    s = get_settings()
    lib = Layout.of(s).lib
    try:
        prereqs.require_installed(lib / "kafka", lib / "neo4j")
    except MemstreamError:
        return False
    return Neo4j(s).classes.exists()


def install() -> dict[str, str]:
    """Idempotent: fetch what is missing (jars, postgresql-15 + pgvector), compile the launcher."""
    s = get_settings()
    lib = Layout.of(s).lib
    steps: dict[str, str] = {}
    # 1. Java first: everything else (mvn, javac, both brokers) needs it.
    steps["java"] = f"{prereqs.java()} (javac {prereqs.javac()})"
    print(f"java      {steps['java']}")
    # 2. Jars, each from its own pom (separate classpaths: different slf4j and Scala versions).
    for component in ("kafka", "neo4j"):
        print(f"{component:<10}", end="", flush=True)
        steps[component] = prereqs.fetch_jars(component, lib / component)
        print(steps[component])
    # 3. Postgres + pgvector (apt-get; the script is a no-op when both are present).
    print(f"{'postgres':<10}", end="", flush=True)
    steps["postgres"] = prereqs.install_postgres()
    print(steps["postgres"])
    # 4. The Neo4j launcher, compiled once so `up` does not pay javac every time.
    steps["launcher"] = Neo4j(s).compile_launcher()
    print(f"launcher  {steps['launcher']} ({Neo4j(s).classes})")
    # 5. The headless browser of the web console's tests (apt-get; a no-op when present).
    from memstream.stack import browser
    print(f"{'browser':<10}", end="", flush=True)
    steps["browser"] = browser.install()
    print(steps["browser"])
    return steps


# -- up ------------------------------------------------------------------------------------------

# What a server writes when its port is held by someone else's socket. The check before the start
# (port_open) sees listeners only: a client socket the kernel gave the same port as its ephemeral
# source port (55432 lies in Linux's default 32768-60999) is invisible to it, and it is gone a
# moment later. Seen on a busy machine as "postgres exited during start-up (code 1)".
_BIND_CONFLICT = ("Address already in use", "could not bind", "BindException")
_BIND_RETRIES = 5


class _PortRaced(StackError):
    """The service exited because its port was briefly taken: start it again."""


def _lost_a_bind_race(svc: Service) -> bool:
    try:
        with open(svc.log_file, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return False
    last_start = tail.rfind("=====")       # only what this start wrote (process.spawn heads each start)
    return any(sign in tail[last_start:] for sign in _BIND_CONFLICT)


def _wait_started(svc: Service, proc: Any, deadline: float, limit: float) -> None:
    """_wait_healthy, starting `svc` again when it lost its port to a passing client socket."""
    for attempt in range(1, _BIND_RETRIES + 1):
        try:
            return _wait_healthy(svc, proc, deadline, limit)
        except _PortRaced:
            # A client socket's ephemeral port lives for one connection: wait a moment and start
            # again, unless a real listener took the port meanwhile (then it is not ours to wait for).
            if attempt == _BIND_RETRIES or any(process.port_open(h, p) for h, p in svc.ports()):
                raise
            print(f"{svc.name:<9}port taken during start-up (a passing client socket): starting again")
            time.sleep(attempt)
            proc = svc.start()


def _wait_healthy(svc: Service, proc: Any, deadline: float, limit: float) -> None:
    """Wait until `svc` answers. Past `deadline` it is left running, never stopped: a JVM still
    starting on a loaded machine (Neo4j once needed 275.6 s) would only start over from nothing on
    the next try, while left alone it finishes, and `stack up` again waits for it ("already running")."""
    while True:
        if proc is not None and proc.poll() is not None:
            svc.pid_file.unlink(missing_ok=True)
            if _lost_a_bind_race(svc):
                raise _PortRaced(f"{svc.name}: its port was taken while it started; see {svc.log_file}")
            raise StackError(f"{svc.name} exited during start-up (code {proc.returncode}); see {svc.log_file}")
        if svc.probe():
            return
        if time.monotonic() > deadline:
            pid = svc.pid()
            still = (f"it is still starting (pid {pid}) and is left running: run `memstream stack up` again to wait "
                     f"for it, or raise MEMSTREAM_STACK_START_TIMEOUT_S" if pid is not None else "it is not running")
            raise StackError(f"{svc.name} not healthy after {limit:.0f} s; {still}; see {svc.log_file}")
        time.sleep(0.25)


def up() -> dict[str, dict[str, Any]]:
    """Start whatever is not running, wait until all answer, provision Postgres. Idempotent."""
    s = get_settings()
    layout = Layout.of(s)
    prereqs.require_installed(layout.lib / "kafka", layout.lib / "neo4j")
    with _exclusive(layout):
        return _up(s, time.monotonic())


def _up(s: Settings, t0: float) -> dict[str, dict[str, Any]]:
    print(f"neo4j password: {ensure_neo4j_password(s)}")     # before Neo4j starts: its launcher sets it
    print(f"master keys: {ensure_master_keys(s)}")
    from adapters.privacy import decision_key
    print(f"decision key: {decision_key.ensure(s)}")
    from adapters.kafka_auth import ensure_passwords as ensure_kafka_passwords
    print(f"kafka passwords: {ensure_kafka_passwords(s)}")
    services = _services(s)
    procs: dict[str, Any] = {}
    started_at: dict[str, float] = {}
    notes: dict[str, str] = {}
    errors: list[str] = []

    # 1. Launch everything that is down, all at once: the JVMs start in parallel.
    for svc in services:
        try:
            if svc.pid() is not None:
                if not svc.outdated():
                    notes[svc.name] = "already running"
                    continue
                print(f"{svc.name:<9}restarting: started by an older version (its set-up changed)")
                svc.stop()
            busy = [p for h, p in svc.ports() if process.port_open(h, p)]
            if busy:
                raise StackError(f"{svc.name}: port {busy[0]} is taken by another process "
                                 f"(stop it, or pick another port via MEMSTREAM_* settings)")
            svc.prepare()
            started_at[svc.name] = time.monotonic()
            procs[svc.name] = svc.start()
        except (MemstreamError, OSError) as e:     # OSError: permissions, disk full, ... in set-up
            errors.append(str(e) if isinstance(e, MemstreamError) else f"{svc.name}: {e}")
            notes[svc.name] = "failed"

    # 2. Wait for each to answer a real request, then provision (idempotent, also when it was
    #    already running). In parallel, so each "healthy in" time is its own.
    limit = s.stack_start_timeout_s
    deadline = t0 + limit

    def settle(svc: Service) -> None:
        try:
            # Counted from its own start: a slow prepare() (a data migration) does not eat into it.
            _wait_started(svc, procs.get(svc.name), max(deadline, started_at.get(svc.name, 0.0) + limit), limit)
            svc.after_healthy()
            if svc.name in started_at:
                notes[svc.name] = f"started, healthy in {time.monotonic() - started_at[svc.name]:.1f} s"
        except MemstreamError as e:
            errors.append(str(e))
            notes[svc.name] = "failed"

    pending = [svc for svc in services if notes.get(svc.name) != "failed"]
    if pending:
        with ThreadPoolExecutor(len(pending)) as pool:
            list(pool.map(settle, pending))    # list(): re-raise anything unexpected (a bug)

    # 3. Report.
    result = {}
    for svc in services:
        pid = svc.pid()
        result[svc.name] = {"state": "running" if pid else "stopped", "pid": pid, "address": svc.address,
                            "log": str(svc.log_file), "note": notes.get(svc.name, "")}
        print(_line(svc.name, result[svc.name]["state"], pid, svc.address, svc.log_file, notes.get(svc.name, "")))
    if errors:
        raise StackError("; ".join(errors))
    # The local admin key (tenant default, every scope) for the CLI, demo, HTTP SDK and tests: never printed.
    from adapters.privacy.apikeys import ensure_local_admin_key
    print(f"api key: {ensure_local_admin_key(s)}")
    print(f"stack up in {time.monotonic() - t0:.1f} s")
    return result


# -- down ----------------------------------------------------------------------------------------

def down() -> dict[str, str]:
    """Stop each service gracefully (SIGTERM, or SIGINT for Postgres), SIGKILL after a timeout.
    All three stop in parallel; fine if some or all are not running."""
    s = get_settings()
    services = _services(s)
    with _exclusive(Layout.of(s)):
        pids = {svc.name: svc.pid() for svc in services}
        with ThreadPoolExecutor(len(services)) as pool:
            outcomes = dict(zip([svc.name for svc in services], pool.map(lambda svc: svc.stop(), services)))
    for svc in services:
        pid = pids[svc.name]
        print(f"{svc.name:<9}{outcomes[svc.name]}" + (f" (pid {pid})" if pid else ""))
    return outcomes


# -- status --------------------------------------------------------------------------------------

def status(quiet: bool = False) -> dict[str, dict[str, Any]]:
    """Per service: running/stopped, pid, address, log path, whether its ports answer, and
    memory (RSS and PSS of its process tree, MiB). quiet=True skips printing (for --json)."""
    out: dict[str, dict[str, Any]] = {}
    for svc in _services(get_settings()):
        pid = svc.pid()
        info: dict[str, Any] = {"state": "running" if pid else "stopped", "pid": pid, "address": svc.address,
                                "log": str(svc.log_file),
                                "listening": all(process.port_open(h, p) for h, p in svc.ports())}
        note = ""
        if pid:
            info.update(process.memory_mib(pid))
            note = f"rss {info['rss_mib']:.0f} MiB" + ("" if info["listening"] else ", NOT listening")
        out[svc.name] = info
        if not quiet:
            print(_line(svc.name, info["state"], pid, svc.address, svc.log_file, note))
    return out
