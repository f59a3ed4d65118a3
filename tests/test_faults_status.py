"""The operator's view during a broker outage, on the private fault stack (tests/helpers.py).

kill -9 of the only broker: within 10 s `memstream status` names the outage (the broker's
address and what failed — not "TimeoutError: "), and `memstream pipeline status` shows a running
worker as degraded with the reason; once the broker is back, both say so again.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
import pytest

from tests.helpers import fault_env, fault_service, fault_stack_settings, fault_stack_up, restart_service, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

BASE = os.environ["MEMSTREAM_TEST_NAMESPACE"]


@pytest.fixture(scope="session")
def fault_base(request):
    s = fault_stack_settings(BASE + "_f")
    fault_stack_up(s, request)
    return s


def _cli(s, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memstream.app.cli", *args], env=fault_env(s),
                          capture_output=True, text=True, timeout=60)


def _ticker_state(s) -> dict:
    out = _cli(s, "pipeline", "status", "--json")
    assert out.returncode == 0, out.stderr
    return orjson.loads(out.stdout)["workers"].get("ticker", {})


def test_status_names_a_dead_broker_within_10s(fault_base):
    s = fault_base.model_copy(update={"namespace": f"{BASE}_fst"})
    address = f"{s.kafka_host}:{s.kafka_port}"
    # A real worker with a heartbeat: the ticker (`memstream worker ticker`), the lightest one.
    worker = subprocess.Popen([sys.executable, "-m", "memstream.app.cli", "worker", "ticker"], env=fault_env(s),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kafka = fault_service(s, "kafka")
    try:
        wait_for(lambda: _ticker_state(s).get("state") == "up"
                 and (_ticker_state(s).get("broker") or {}).get("state") == "connected",
                 timeout=60, what="the ticker up with its broker connected")
        healthy = _cli(s, "status")
        assert healthy.returncode == 0, healthy.stderr
        assert f"kafka: reachable at {address}" in healthy.stdout

        from memstream.stack.process import port_open
        os.kill(kafka.pid(), signal.SIGKILL)
        # Gone = no longer accepting connections: a killed JVM's /proc entry empties (its pid reads as gone)
        # before the kernel has closed its sockets, and unmapping a 512 MB heap takes a while on a loaded
        # machine — a fresh-clone run saw `status` connect in that window.
        wait_for(lambda: kafka.pid() is None and not port_open(s.kafka_host, s.kafka_port), timeout=30,
                 what="the broker gone")
        killed = time.monotonic()

        down = _cli(s, "status")
        took = time.monotonic() - killed
        assert down.returncode == 0, down.stderr
        assert took <= 10, f"memstream status took {took:.1f}s after the broker stopped accepting connections"
        assert f"kafka: DOWN: no Kafka broker reachable ({address}: connection refused)" in down.stdout, down.stdout
        assert f"consumer lag: not read (no Kafka broker reachable ({address}: connection refused))" in down.stdout
        assert "TimeoutError: \n" not in down.stdout + down.stderr

        wait_for(lambda: _ticker_state(s).get("state") == "degraded", timeout=10 - (time.monotonic() - killed),
                 interval=0.5, what="pipeline status showing the ticker degraded")
        ticker = _ticker_state(s)
        assert address in ticker["reason"] and "connection refused" in ticker["reason"], ticker
        text = _cli(s, "pipeline", "status").stdout
        assert "ticker        degraded" in text and "broker connection lost" in text, text
    finally:
        if kafka.pid() is None:
            restart_service(s, "kafka")
    try:
        wait_for(lambda: _ticker_state(s).get("state") == "up", timeout=30, what="the ticker up again")
        assert f"kafka: reachable at {address}" in _cli(s, "status").stdout
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
