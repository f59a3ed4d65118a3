"""SIGTERM of `memstream run` under load: every worker drains, commits and exits within the grace
period (none SIGKILLed), and a restart finishes the burst with nothing lost or applied twice
(real stack, a namespace of its own)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from adapters.bus import ensure_topics
from adapters.sdk import MemoryClient
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(1200)


def _wait_progressing(count, target: int, what: str, stall_s: float = 180.0) -> None:
    """Wait until count() reaches target, for as long as it keeps moving: on a loaded machine the
    burst takes minutes, and only a stall (no progress for stall_s) says something is lost."""
    last, since = -1, time.monotonic()
    while True:
        n = count()
        if n >= target:
            return
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > stall_s:
            raise AssertionError(f"{what}: stuck at {n} of {target} for {stall_s:.0f} s")
        time.sleep(1.0)


def _run(ns: str, out):
    return subprocess.Popen([sys.executable, "-m", "memstream.app.cli", "run"], stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "MEMSTREAM_NAMESPACE": ns, "MEMSTREAM_METRICS_PORT": "0"},
                            start_new_session=True)


def test_sigterm_under_load_stops_every_worker_without_sigkill_and_loses_nothing(settings, tmp_path):
    from projections import pg
    from projections.queries import _read, preferences, session_window
    ns = f"{settings.namespace}_term{uuid.uuid4().hex[:4]}"
    s = settings.model_copy(update={"namespace": ns})
    ensure_topics(s)
    pg.ensure_schema(s)
    user, n = "term-user", 300
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        run = _run(ns, out)
        with MemoryClient(s) as client:
            client.record_turn(user, "s", "user", "turn 0: I live in Lisbon")
            wait_for(lambda: session_window(s, user, "s"), timeout=240, what="the pipeline to apply a first turn")
            for i in range(1, n):   # a burst; SIGTERM lands while it is being processed
                client.record_turn_nowait(user, "s", "user", f"turn {i}: I like item {i}")
            client.flush()
        os.kill(run.pid, signal.SIGTERM)
        t = time.monotonic()
        code = run.wait(timeout=120)
        took = time.monotonic() - t
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert "SIGKILL" not in text, text[-3000:]
    assert took < s.stop_grace_s + 5, f"stopping took {took:.1f} s"
    # A restart finishes the burst from the committed positions: every turn's fact decided once.
    def turns_seen() -> int:
        return _read(s, "SELECT count(*) AS n FROM {s}.audit_events WHERE user_id = %s AND type = 'turn.recorded'",
                     (user,))[0]["n"]
    with open(log, "ab") as out:
        run = _run(ns, out)
        try:
            _wait_progressing(turns_seen, n, "turns the restarted pipeline applied")
            _wait_progressing(lambda: len(preferences(s, user)), n, "preferences the restarted pipeline decided")
            time.sleep(3)   # a decision applied twice would show up now
            prefs = preferences(s, user)
        finally:
            os.kill(run.pid, signal.SIGTERM)
            run.wait(timeout=120)
    assert turns_seen() == n
    assert len(prefs) == n and {p["key"] for p in prefs} == {"location"} | {f"likes:item {i}" for i in range(1, n)}
    assert all(p["version"] == 1 for p in prefs), [p for p in prefs if p["version"] != 1][:3]
