"""Process entry points: each processor and the projectors run in their own process.

`start_pipeline` launches them as child processes (what `memstream run`, the demo and the
tests use); each can also be started alone with `memstream worker NAME`.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from memstream.config import Settings
from projections.registry import PROJECTORS, build_projector

WORKERS = ("extractor", "memory", "projectors")
# The LLM channel runs in its own process and consumer group, so the rule channel never waits for
# an LLM; start_pipeline starts it only when an endpoint is configured (MEMSTREAM_LLM_BASE_URL).
LLM_WORKER = "llm-extractor"
# The decay ticker (memstream/app/ticker.py): `memstream run` starts it; tests and benchmarks publish
# their own ticks at chosen event times instead.
TICKER = "ticker"


def _run_faust(app) -> None:
    from faust.worker import Worker
    Worker(app, loglevel="WARNING", quiet=True, redirect_stdouts=False).execute_from_commandline()


def run_worker(name: str, settings: Settings, projectors: tuple[str, ...] = PROJECTORS) -> None:
    from memstream.bus import ensure_topics
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    ensure_topics(settings)
    if name == "extractor":
        from memstream.embedding import make_embedder
        from streams.extractor import build
        _run_faust(build(settings, make_embedder(settings)))
    elif name == LLM_WORKER:
        from memstream.embedding import make_embedder
        from streams.llm_extractor import build as build_llm
        _run_faust(build_llm(settings, make_embedder(settings)))
    elif name == "memory":
        from memstream.embedding import make_embedder
        from streams.memory_processor import build
        _run_faust(build(settings, make_embedder(settings)))   # the embedder: session episodes
    elif name == TICKER:
        from memstream.app import ticker
        ticker.run(settings)
    elif name == "projectors":
        from memstream.privacy.keystore import KeyStore
        from projections.runner import ProjectorRunner, run_until_signalled
        keys = KeyStore(settings)
        run_until_signalled([ProjectorRunner(build_projector(p, settings), settings, keys) for p in projectors])
    else:
        raise SystemExit(f"unknown worker {name!r}; choose one of {', '.join(WORKERS + (LLM_WORKER, TICKER))}")


def worker_command(name: str) -> list[str]:
    """The command line that runs one worker in its own process."""
    return [sys.executable, "-m", "memstream.app.cli", "worker", name]


def start_pipeline(settings: Settings, log_dir: Path | None = None, env: dict | None = None,
                   ticker: bool = False) -> dict[str, subprocess.Popen]:
    """Start every worker as a child process with the same settings (passed through the env)."""
    log_dir = log_dir or settings.stack_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, **(env or {}), "MEMSTREAM_NAMESPACE": settings.namespace}
    procs = {}
    names = WORKERS + ((LLM_WORKER,) if settings.llm_base_url else ()) + ((TICKER,) if ticker else ())
    for name in names:
        log = open(log_dir / f"{settings.namespace}-{name}.log", "ab")
        procs[name] = subprocess.Popen(worker_command(name),
                                       stdout=log, stderr=subprocess.STDOUT, env=child_env, start_new_session=True)
    return procs


def stop_pipeline(procs: dict[str, subprocess.Popen], timeout: float = 15.0) -> None:
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

