"""`memstream ticker --once --at T` on the real stack: it publishes one decay.ticked per memory
partition at event time T, says so in one line (or prints their ids with --json), exits 0.
It used to publish and then crash in the CLI's printer (issue 27)."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime

import orjson
import pytest

from adapters.privacy.keystore import KeyStore
from schemas.codec import decode
from tests.kafka_helpers import read_all

pytestmark = [pytest.mark.stack]
AT = "2026-03-01T12:00:00+00:00"


@pytest.fixture()
def tick_settings(settings):
    # A namespace of its own: ticks at a chosen time must not age the session pipeline's users.
    s = settings.model_copy(update={"namespace": settings.namespace + "_tick"})
    yield s
    subprocess.run([sys.executable, "-m", "memstream.app.cli", "namespace", "drop", s.namespace, "--yes", "--force"],
                   capture_output=True, timeout=120)


def _ticker(s, *args):
    env = {**os.environ, "MEMSTREAM_NAMESPACE": s.namespace}
    return subprocess.run([sys.executable, "-m", "memstream.app.cli", "ticker", "--once", "--at", AT, *args],
                          env=env, capture_output=True, text=True, timeout=120)


def _ticks(s) -> list:
    keys = KeyStore(s)
    try:
        return [decode(m.value(), keys) for m in read_all(s, s.topic("memory"))]
    finally:
        keys.close()


def test_ticker_once_publishes_and_says_so(tick_settings):
    s = tick_settings
    out = _ticker(s)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"published {s.partitions} decay ticks at {AT} (one per memory partition)"
    assert "Traceback" not in out.stderr
    ticks = _ticks(s)
    assert sorted(t.data.partition for t in ticks) == list(range(s.partitions))
    assert {t.type for t in ticks} == {"decay.ticked"}
    assert {t.time for t in ticks} == {datetime.fromisoformat(AT)}

    as_json = _ticker(s, "--json")
    assert as_json.returncode == 0, as_json.stderr
    ids = orjson.loads(as_json.stdout)
    assert len(ids) == s.partitions and set(ids) <= {t.id for t in _ticks(s)}


def test_ticker_at_that_is_not_a_time_is_a_one_line_error(settings):
    # a time without a timezone reads as UTC (as every CLI time does); one that is no ISO 8601 time is refused
    out = subprocess.run([sys.executable, "-m", "memstream.app.cli", "ticker", "--once", "--at", "noon"],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace})
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().startswith("memstream: 'noon' is not an ISO 8601 date or time") and out.stderr.count("\n") == 1
