"""Process plumbing shared by the local services: pid files, liveness, spawn, stop, memory.

A service counts as running only when its pid file names a live process whose command line
still carries the service's marker (a path unique to this stack). A stale pid file, or one
whose pid the kernel has since reused for something else, never fools `up`/`status`/`down`.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kernel.config import Settings
from kernel.errors import StackError


@dataclass(frozen=True)
class Layout:
    """Every path under <stack_dir>; one place so the services agree on where things live."""

    root: Path

    @property
    def lib(self) -> Path: return self.root / "lib"
    @property
    def data(self) -> Path: return self.root / "data"
    @property
    def logs(self) -> Path: return self.root / "logs"
    @property
    def run(self) -> Path: return self.root / "run"
    @property
    def secrets(self) -> Path: return self.root / "secrets"

    @classmethod
    def of(cls, settings: Settings) -> "Layout":
        return cls(Path(settings.stack_dir).resolve())


# -- liveness ------------------------------------------------------------------------------

def cmdline(pid: int) -> list[str]:
    """argv of a process ([] if it is gone, a zombie, or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _reap_if_zombie(pid: int) -> bool:
    """True if pid is a zombie. A child we spawned in this very process (up, then down, in
    one Python session) stays a zombie until waited for, and os.kill(pid, 0) still succeeds."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state != "Z":
        return False
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass                                  # not our child: init will reap it
    return True


def alive(pid: int, markers: list[str]) -> bool:
    """pid exists, is not a zombie, and its argv contains every marker (e.g. our data dir)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                                  # exists, owned by another user (postgres when not root)
    if _reap_if_zombie(pid):
        return False
    argv = cmdline(pid)
    return bool(argv) and all(any(m in a for a in argv) for m in markers)


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    """Something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# -- spawn / stop ----------------------------------------------------------------------------

def open_log(path: Path, header: str) -> IO[bytes]:
    """Append-mode log with a banner, so each start is easy to find in a long log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "ab", buffering=0)
    f.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} memstream stack: {header} =====\n".encode())
    return f


def spawn(name: str, argv: list[str], log: Path, **kwargs: Any) -> subprocess.Popen:
    """Start a detached service: own session (so Ctrl-C in the shell that ran `up` does not
    reach it and it outlives the CLI), stdin closed, stdout+stderr appended to its log."""
    with open_log(log, f"starting {name}") as out:
        out.write(("argv: " + " ".join(argv) + "\n").encode())
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, **kwargs)


def run_logged(argv: list[str], log: Path, what: str, **kwargs: Any) -> None:
    """Run a one-shot setup command (format, initdb, ...) with its output in the service log."""
    with open_log(log, what) as out:
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            **kwargs).returncode
    if rc != 0:
        raise StackError(f"{what} failed (exit {rc}); see {log}")


def terminate(pid: int, markers: list[str], sig: int, timeout: float) -> bool:
    """Send `sig`, wait up to `timeout` s, then SIGKILL the process group. True if it had to kill."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid, markers):
            return False
        time.sleep(0.1)
    try:
        # Services run in their own session (pgid == pid): take any children down with them.
        os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    for _ in range(50):
        if not alive(pid, markers):
            break
        time.sleep(0.1)
    return True


# -- memory ----------------------------------------------------------------------------------

def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _kib(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_mib(pid: int) -> dict[str, float]:
    """RSS and PSS of a service's process tree, in MiB. PSS splits shared pages fairly, so for
    Postgres (shared_buffers mapped by every backend) it is the honest "what it costs" number."""
    pids = [pid] + _children(pid)
    rss = sum(_kib(Path(f"/proc/{p}/status"), "VmRSS:") for p in pids)
    pss = sum(_kib(Path(f"/proc/{p}/smaps_rollup"), "Pss:") for p in pids)
    return {"rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1)}


# -- CPU -----------------------------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process tree so far, in seconds: the process, the children
    it has reaped (Postgres' exited backends), and its live children. Two readings bracket a run;
    their difference is what that service spent on it, whatever the machine's other load."""
    def fields(p: int) -> list[str]:
        try:
            return Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return []
    own = fields(pid)
    # after the command: state ppid … utime(11) stime(12) cutime(13) cstime(14)
    ticks = sum(int(v) for v in own[11:15]) if own else 0
    ticks += sum(sum(int(v) for v in f[11:13]) for c in _children(pid) if (f := fields(c)))
    return ticks / _TICKS
