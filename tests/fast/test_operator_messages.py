"""What an operator reads while something is down: one line per outage period, not one a second;
the supervisor quotes only what the dead process itself wrote, without terminal escapes."""
from __future__ import annotations

import logging

from memstream.app.workers import _tail
from adapters.resilience import Throttled


def test_a_repeating_warning_is_logged_once_per_period_with_a_count(caplog):
    now = [0.0]
    throttled = Throttled(logging.getLogger("t"), every_s=30.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t"):
        for _ in range(61):           # a minute of failures, one a second
            throttled.warning("listener lost its connection (%s)", "OperationalError")
            now[0] += 1.0
        throttled.recovered("listener reconnected")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["listener lost its connection (OperationalError)",
                     "listener lost its connection (OperationalError) (29 more like it in the last 30 s)",
                     "listener lost its connection (OperationalError) (29 more like it in the last 30 s)",
                     "listener reconnected after 61 failed attempts"]


def test_the_tail_of_a_worker_log_is_its_own_process_and_has_no_escapes(tmp_path):
    log = tmp_path / "w.log"
    log.write_bytes(b"old process: fatal KeyError in something else\n")
    since = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x1b[?25l\x1b[?25hnew process: starting\n\x1b[31mred\x1b[0m line\n")
    assert _tail(log, since=since) == "new process: starting\nred line"
    assert _tail(log, since=log.stat().st_size) == ""   # died without a word: nothing of the predecessor's
