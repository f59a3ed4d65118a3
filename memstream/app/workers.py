"""Process entry points: each processor and the projectors run in their own process.

`start_pipeline` launches them as child processes (what the demo and the tests use);
`Supervisor` (what `memstream run` uses) also restarts a worker that exits, with backoff, and says
which one and why. Each can be started alone with `memstream worker NAME`, which exits non-zero on
a fatal error. Every worker writes a heartbeat with per-component state
(`<stack_dir>/run/health/<ns>-<worker>.json`, adapters/resilience.py) that
`memstream pipeline status` reads (memstream/app/status.py).
"""
from __future__ import annotations

import logging
import re
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import orjson

from kernel.config import Settings
from adapters.resilience import Backoff, Health, health_file
from projections.registry import PROJECTORS, build_projector

log = logging.getLogger("memstream.supervisor")

WORKERS = ("extractor", "memory", "projectors")
# The LLM channel runs in its own process and consumer group, so the rule channel never waits for
# an LLM; start_pipeline starts it only when an endpoint is configured (MEMSTREAM_LLM_BASE_URL).
LLM_WORKER = "llm-extractor"
# The decay ticker (memstream/app/ticker.py): `memstream run` starts it; tests and benchmarks publish
# their own ticks at chosen event times instead.
TICKER = "ticker"


def _run_faust(app) -> None:
    from faust.worker import Worker
    worker = Worker(app, loglevel="WARNING", quiet=True, redirect_stdouts=False)
    if not sys.stdout.isatty():
        worker.spinner = None   # its cursor escapes ("\x1b[?25l") landed in every worker's log file
    worker.execute_from_commandline()


def run_worker(name: str, settings: Settings, projectors: tuple[str, ...] = PROJECTORS) -> None:
    from adapters.bus import ensure_topics
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    from adapters import resilience
    health = resilience.CURRENT = Health(settings, settings.worker_label(name)).start()
    health.set(name, "starting")
    from adapters.metrics import serve_worker
    serve_worker(settings, name, health)     # /metrics on MEMSTREAM_METRICS_PORT + this worker's offset
    # Every topic and changelog, with its partitions checked and its configs set, before faust
    # starts (adapters/topology.py: a changelog faust makes itself may be missing from its metadata).
    ensure_topics(settings, align=True)
    if name != "projectors":
        health.set(name, "running")
    if name == "extractor":
        from adapters.embedding import make_embedder
        from streams.extractor import build
        _run_faust(build(settings, make_embedder(settings)))
    elif name == LLM_WORKER:
        from adapters.embedding import make_embedder
        from streams.llm_extractor import build as build_llm
        _run_faust(build_llm(settings, make_embedder(settings)))
    elif name == "memory":
        from adapters.embedding import make_embedder
        from domain.rules_profile import ProfileMismatch
        from streams.memory_processor import build
        try:   # build() checks the rules profile against the memory topic's (streams/rules_gate.py)
            app = build(settings, make_embedder(settings))   # the embedder: session episodes
        except ProfileMismatch as exc:
            # "refused" tells the supervisor that a restart with this environment cannot help
            health.set(name, "refused", reason=str(exc))
            health.stop()
            raise
        _run_faust(app)
    elif name == TICKER:
        from memstream.app import ticker
        ticker.run(settings)
    elif name == "projectors":
        from adapters.privacy.keystore import KeyStore
        from projections.runner import ProjectorRunner, run_until_signalled
        from memstream.app.storage_scrub import ScrubRequests
        keys = KeyStore(settings)
        health.set(name, "running")
        scrubs = ScrubRequests(settings).start()   # the scrubs serving processes asked for after erasures
        try:
            rc = run_until_signalled([ProjectorRunner(build_projector(p, settings), settings, keys, health=health)
                                      for p in projectors], health)
        finally:
            scrubs.stop()
        if rc:
            raise SystemExit(rc)   # a projector failed fatally: exit non-zero, the supervisor restarts us
    else:
        raise SystemExit(f"unknown worker {name!r}; choose one of {', '.join(WORKERS + (LLM_WORKER, TICKER))}")


def worker_command(name: str) -> list[str]:
    """The command line that runs one worker in its own process."""
    return [sys.executable, "-m", "memstream.app.cli", "worker", name]


def split_label(label: str) -> tuple[str, int]:
    """`memory.2` → ("memory", 2); `memory` → ("memory", 1)."""
    base, _, k = label.rpartition(".")
    return (base, int(k)) if base and k.isdigit() else (label, 1)


def copies(names: tuple[str, ...], instances: int) -> tuple[str, ...]:
    """Each stage that scales out by consumer group `instances` times (the ticker stays one: it
    publishes on a clock, so two would tick twice)."""
    out: list[str] = []
    for name in names:
        n = 1 if name == TICKER else instances
        out += [name] + [f"{name}.{k}" for k in range(2, n + 1)]
    return tuple(out)


# glibc moves its mmap threshold up after a large block is freed, so the 50–180 KB sealed states
# the memory worker allocates and frees on every fact end up on the heap, where they fragment: in
# one run of two 8-minute soaks side by side (40 users, same state) the memory worker grew 191 →
# 199 MiB from minute 5 to 8 by default and 184 → 187 MiB with a fixed 64 KiB threshold (its state
# grew 1.8 MiB in both). A fixed threshold also returns those blocks to the OS when freed. The
# caller's environment wins if it sets one.
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def worker_env(settings: Settings, env: dict | None = None) -> dict:
    """The environment of a worker process: ours, the caller's, the namespace."""
    return {**ALLOCATOR_ENV, **os.environ, **(env or {}), "MEMSTREAM_NAMESPACE": settings.namespace}


def start_pipeline(settings: Settings, log_dir: Path | None = None, env: dict | None = None,
                   ticker: bool = False) -> dict[str, subprocess.Popen]:
    """Start every worker as a child process with the same settings (passed through the env)."""
    log_dir = log_dir or settings.stack_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    child_env = worker_env(settings, env)
    procs = {}
    names = WORKERS + ((LLM_WORKER,) if settings.llm_base_url else ()) + ((TICKER,) if ticker else ())
    for name in names:
        log = open(log_dir / f"{settings.namespace}-{name}.log", "ab")
        procs[name] = subprocess.Popen(worker_command(name),
                                       stdout=log, stderr=subprocess.STDOUT, env=child_env, start_new_session=True)
    return procs


def stop_pipeline(procs: dict[str, subprocess.Popen], timeout: float = 30.0) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# Terminal control sequences (CSI and OSC), as a spinner or a colouring library writes them.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def _tail(path: Path, lines: int = 5, since: int = 0) -> str:
    """The last `lines` non-blank lines of `path` written at or after byte `since` (where this
    process's output began: a process that died silently must not be quoted with its
    predecessor's last words), terminal escapes removed."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(since, f.tell() - 8192))
            text = _ESCAPES.sub("", f.read().decode("utf-8", "replace"))
    except OSError:
        return ""
    return "\n".join(deque((ln for ln in text.splitlines() if ln.strip()), maxlen=lines))


def refusal(settings: Settings, label: str, pid: int) -> str | None:
    """Why the worker process `pid` refused to start (a component of its health file in state
    `refused`, e.g. the memory worker's rules-profile check), or None: it failed otherwise."""
    try:
        health = orjson.loads(health_file(settings, label).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if health.get("pid") != pid:
        return None
    for component in (health.get("components") or {}).values():
        if component.get("state") == "refused":
            return str(component.get("reason") or "refused")
    return None


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """Runs the pipeline's workers and keeps them running.

    A worker that exits (crash, kill -9, a fatal error) is restarted after a capped exponential
    backoff (1 s, 2 s, … 30 s; back to 1 s once it has stayed up for a minute); each restart is
    logged with the worker's name, how it ended and the last lines its own process wrote to the log.
    SIGINT/SIGTERM stop everything: SIGTERM to every worker (each drains and commits: faust's
    shutdown takes ~6 s), SIGKILL to any still running after `grace` seconds (MEMSTREAM_STOP_GRACE_S;
    a second Ctrl-C kills at once). Its own heartbeat file lists the workers, their pids and restarts.
    """

    def __init__(self, settings: Settings, names: tuple[str, ...] | None = None, env: dict | None = None,
                 log_dir: Path | None = None, grace: float | None = None, out=None, instances: int = 1):
        self.settings = settings
        self.names = copies(names or (WORKERS + ((LLM_WORKER,) if settings.llm_base_url else ()) + (TICKER,)),
                            instances)
        self.log_dir = log_dir or settings.stack_dir / "logs"
        self.env = worker_env(settings, env)
        self.grace = settings.stop_grace_s if grace is None else grace
        self.out = out or sys.stderr
        self.procs: dict[str, subprocess.Popen] = {}
        self.restarts: dict[str, int] = {n: 0 for n in self.names}
        self.last_exit: dict[str, str] = {}
        self._started: dict[str, float] = {}
        self._log_start: dict[str, int] = {}   # where each worker's current process began writing its log
        self._due: dict[str, float] = {}
        self.held: dict[str, str] = {}   # workers that refused their configuration: not restarted (why)
        self._backoff = {n: Backoff(base=1.0, cap=30.0) for n in self.names}
        self.stopping = 0

    def say(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=self.out, flush=True)

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{self.settings.namespace}-{name}.log"

    def start(self, name: str) -> None:
        """Start worker `name` (a copy is `memory.2`: the same stage, its own MEMSTREAM_INSTANCE)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        base, k = split_label(name)
        env = {**self.env, "MEMSTREAM_INSTANCE": str(k)}
        with open(self.log_path(name), "ab") as logf:
            self._log_start[name] = logf.tell()
            self.procs[name] = subprocess.Popen(worker_command(base), stdout=logf, stderr=subprocess.STDOUT,
                                                env=env, start_new_session=True)
        self._started[name] = time.monotonic()
        self.held.pop(name, None)   # started on purpose again (e.g. `add`): a new chance

    def add(self, name: str) -> None:
        """One more worker while the others run (scale out: it joins its stage's consumer group)."""
        if name not in self.names:
            self.names += (name,)
            self.restarts[name] = 0
            self._backoff[name] = Backoff(base=1.0, cap=30.0)
        self.start(name)

    def retire(self, *names: str, timeout: float = 15.0) -> None:
        """Stop these workers for good (scale in): SIGTERM, so each leaves its group and the others
        take its partitions; not restarted. SIGKILL after `timeout`."""
        procs = [self.procs.pop(name) for name in names]
        for name in names:
            self._due.pop(name, None)
        self.names = tuple(n for n in self.names if n not in names)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def check(self) -> None:
        """One round: notice exits, schedule and perform restarts, write the heartbeat."""
        now = time.monotonic()
        for name, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None or name in self._due or name in self.held:
                continue
            reason = refusal(self.settings, name, proc.pid) if code == 2 else None
            if reason is not None:
                # Restarting with the same environment would refuse again, every few seconds, forever.
                self.held[name] = reason
                self.last_exit[name] = f"refused to start: {reason}"
                self.say(f"worker {name} (pid {proc.pid}) refused to start; not restarted: {reason}")
                continue
            if now - self._started[name] > 60.0:
                self._backoff[name].reset()
            delay = self._backoff[name].next()
            self.last_exit[name] = _exit_reason(code)
            tail = _tail(self.log_path(name), since=self._log_start.get(name, 0))
            self.say(f"worker {name} (pid {proc.pid}) exited: {self.last_exit[name]}; restarting in {delay:.1f} s"
                     + ("; last log lines:\n    " + tail.replace("\n", "\n    ") if tail else ""))
            self._due[name] = now + delay
        for name, due in list(self._due.items()):
            if now >= due:
                del self._due[name]
                self.restarts[name] += 1
                self.start(name)
                self.say(f"worker {name} restarted (pid {self.procs[name].pid}, restart #{self.restarts[name]})")
        self.write_health()

    def write_health(self) -> None:
        path = health_file(self.settings, "supervisor")
        body = {"worker": "supervisor", "pid": os.getpid(), "heartbeat": time.time(), "workers": {
            n: {"pid": p.pid, "alive": p.poll() is None, "restarts": self.restarts[n],
                "last_exit": self.last_exit.get(n), "restart_due_in_s": round(self._due[n] - time.monotonic(), 1)
                if n in self._due else None} for n, p in self.procs.items()}}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(orjson.dumps(body))
            os.replace(tmp, path)
        except OSError:
            pass

    def _signal(self, *_):
        self.stopping += 1
        if self.stopping > 1:   # second Ctrl-C: no more waiting
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()

    def run(self) -> int:
        for name in self.names:
            self.start(name)
        self.say("pipeline running: " + ", ".join(f"{n} (pid {p.pid})" for n, p in self.procs.items())
                 + "; Ctrl-C stops it")
        old = {sig: signal.signal(sig, self._signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not self.stopping:
                self.check()
                time.sleep(0.2)
        finally:
            self.stop()
            for sig, handler in old.items():
                signal.signal(sig, handler)
        return 0

    def stop(self) -> None:
        self.say("stopping: " + ", ".join(self.procs))
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs.values()):
            time.sleep(0.05)
        for name, p in self.procs.items():
            if p.poll() is None:
                self.say(f"worker {name} did not stop within {self.grace:.0f} s: SIGKILL")
                p.kill()
                p.wait()
        self._due.clear()
        self.write_health()

