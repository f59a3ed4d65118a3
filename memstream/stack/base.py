"""What every local service looks like to `up`/`down`/`status` (see services.py)."""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

from kernel.config import Settings
from memstream.stack import process
from memstream.stack.process import Layout


class Service:
    name: str = ""
    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 30.0           # then SIGKILL

    def __init__(self, settings: Settings):
        self.settings = settings
        self.layout = Layout.of(settings)

    # -- identity ------------------------------------------------------------------------
    @property
    def pid_file(self) -> Path:
        return self.layout.run / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.layout.logs / f"{self.name}.log"

    @property
    def address(self) -> str:
        raise NotImplementedError

    def ports(self) -> list[tuple[str, int]]:
        """(host, port) pairs it listens on: checked free before start, probed by status."""
        raise NotImplementedError

    def markers(self) -> list[str]:
        """Strings its argv must contain: paths unique to this stack, so a reused pid or another
        instance of the same program (a system Postgres, say) is never mistaken for ours."""
        raise NotImplementedError

    # -- lifecycle hooks -------------------------------------------------------------------
    def prepare(self) -> None:
        """One-time, idempotent set-up before the first start (format, initdb, config files)."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def popen_kwargs(self) -> dict[str, Any]:
        return {}

    def probe(self) -> bool:
        """One quick health probe; must not raise for 'not ready yet'."""
        raise NotImplementedError

    def after_healthy(self) -> None:
        """Idempotent provisioning once it answers (roles, databases, extensions)."""

    def outdated(self) -> bool:
        """Running, but set up by an older version (its config or credentials changed): `up`
        stops it, then prepare() and start() bring it to the current set-up."""
        return False

    # -- shared behaviour ------------------------------------------------------------------
    def discover_pid(self) -> int | None:
        """A pid for a running instance when our pid file is missing (override if the service
        records its own, like Postgres' postmaster.pid)."""
        return None

    def pid(self) -> int | None:
        """pid of our running instance, or None; removes a stale pid file as a side effect."""
        pid = process.read_pid(self.pid_file)
        if pid is not None and process.alive(pid, self.markers()):
            return pid
        self.pid_file.unlink(missing_ok=True)
        pid = self.discover_pid()
        if pid is not None and process.alive(pid, self.markers()):
            self.write_pid(pid)                # adopt it, so `down` can stop it
            return pid
        return None

    def write_pid(self, pid: int) -> None:
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.write_text(f"{pid}\n")

    def start(self) -> subprocess.Popen:
        proc = process.spawn(self.name, self.argv(), self.log_file, **self.popen_kwargs())
        self.write_pid(proc.pid)
        return proc

    def stop(self) -> str:
        pid = self.pid()
        if pid is None:
            return "not running"
        killed = process.terminate(pid, self.markers(), self.stop_signal, self.stop_timeout)
        self.pid_file.unlink(missing_ok=True)
        return f"killed (no clean stop within {self.stop_timeout:.0f} s)" if killed else "stopped"
