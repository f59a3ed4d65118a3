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


def assert_same_projections(left, right, what: str) -> None:
    """Every projector's content checksum under `left` equals the one under `right` settings."""
    from projections.registry import PROJECTORS, build_projector
    for name in PROJECTORS:
        a, b = build_projector(name, left), build_projector(name, right)
        a.setup()
        b.setup()
        try:
            assert a.checksum() == b.checksum(), f"{name}: {what}"
        finally:
            a.close()
            b.close()
