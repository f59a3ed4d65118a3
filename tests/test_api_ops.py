"""`memstream api` as an operator runs it, on the real stack: it logs its URL at start and one
access line per request (request id, route template, status, latency; no user ids, no query
strings), serves /healthz and /readyz without an API key, and /readyz names the check that fails."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import pytest

from memstream.app.probes import READY_CACHE_S
from tests.auth_helpers import bearer
from tests.helpers import wait_for

pytestmark = [pytest.mark.stack]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_api(settings, tmp_path, **env):
    port, log = _port(), tmp_path / "api.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "memstream.app.cli", "api", "--port", str(port)],
                                env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("the API did not start:\n" + log.read_text())
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_api_logs_its_url_and_one_access_line_per_request(settings, admin_key, tmp_path):
    with running_api(settings, tmp_path, MEMSTREAM_READY_MAX_LAG="1000000000") as (url, log):
        assert f"serving the HTTP API on {url}" in log.read_text()
        assert httpx.get(url + "/healthz").json() == {"status": "ok"}

        ready = httpx.get(url + "/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["status"] == "ready"
        assert {name: c["ok"] for name, c in body["checks"].items()} == {"postgres": True, "kafka": True,
                                                                          "projector_lag": True}

        r = httpx.get(url + "/v1/users/secret-user-417/tasks/t-9/steps?k=3", headers={
            **bearer(admin_key), "X-Request-ID": "probe-req-1"}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.headers["x-request-id"] == "probe-req-1"
        missing = httpx.get(url + "/no/such/secret-user-417")
        assert missing.status_code == 404 and len(missing.headers["x-request-id"]) == 16
        # the lines are written as the responses finish: waited for, not slept on
        def written():
            t = log.read_text()
            return t if "probe-req-1" in t and "(unmatched) 404" in t else None
        text = wait_for(written, timeout=30, what="the access log lines")
    line = next(ln for ln in text.splitlines() if "probe-req-1" in ln)
    assert "memstream.api.access" in line and " GET /v1/users/{user}/tasks/{task}/steps 200 " in line and " ms" in line
    assert "(unmatched) 404" in text and "/healthz 200" in text and "/readyz 200" in text
    assert "secret-user-417" not in text and "k=3" not in text   # no user ids, no query strings


def test_readyz_names_the_failing_check(settings, tmp_path):
    """A projector behind by more than MEMSTREAM_READY_MAX_LAG: 503 naming it and its lag. (The API
    needs Postgres and Kafka to start at all; the lag is the check an operator sees fail.) In a
    namespace of its own, so the session pipeline reads none of the records made here."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from adapters.kafka_auth import ADMIN, kafka_config
    s = settings.model_copy(update={"namespace": settings.namespace + "_ready"})
    try:
        with running_api(s, tmp_path, MEMSTREAM_NAMESPACE=s.namespace, MEMSTREAM_READY_MAX_LAG="1") as (url, _):
            topic = s.topic("memory")   # the API's start created the namespace's topics
            group = Consumer({**kafka_config(s, ADMIN), "group.id": f"{s.namespace}.projector.probe"})
            group.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
            group.close()
            producer = Producer(kafka_config(s, ADMIN))
            for _ in range(3):
                producer.produce(topic, value=b"x", key=b"k", partition=0)
            assert producer.flush(30) == 0
            # the cached answer of the start-up probe (READY_CACHE_S) expires: then the lag shows
            def unready():
                answer = httpx.get(url + "/readyz", timeout=10)
                return answer if answer.status_code == 503 else None
            r = wait_for(unready, timeout=10 + 2 * READY_CACHE_S, what="/readyz to answer 503")
            body = r.json()
            assert body["checks"]["postgres"] == {"ok": True} and body["checks"]["kafka"] == {"ok": True}
            assert body["checks"]["projector_lag"]["lag"] == {"probe": 3}
            assert body["error"] == "projector_lag: projectors behind by more than MEMSTREAM_READY_MAX_LAG=1: probe 3"
            assert httpx.get(url + "/healthz").status_code == 200   # alive all the same
    finally:
        subprocess.run([sys.executable, "-m", "memstream.app.cli", "namespace", "drop", s.namespace, "--yes", "--force"],
                       capture_output=True, timeout=120)
