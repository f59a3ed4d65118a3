"""Rate limits through a real `memstream api` process (services/rate_limits.py, #28 item 4), started
with low limits: a key over its rate gets 429 with Retry-After and another tenant's key is still
served; a flood of random keys from one client is refused with 429 after its lookups, before the
key store, each refusal held back for the refusal delay, while known keys go on at once; the refusals are counted in /metrics; a second later the key
is served again."""
from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time

import httpx
import pytest

from memstream.app.workers import worker_command
from tests.auth_helpers import bearer, make_key
from tests.helpers import unique_user

LIMITS = {"MEMSTREAM_RATE_LIMIT_PER_KEY": "5", "MEMSTREAM_RATE_LIMIT_PER_TENANT": "1000",
          "MEMSTREAM_KEY_LOOKUPS_PER_CLIENT": "5", "MEMSTREAM_RATE_LIMIT_BURST_S": "2",   # bursts of 10
          "MEMSTREAM_UNKNOWN_KEY_REFUSAL_DELAY_S": "0.5"}


@pytest.fixture(scope="module")
def limited_api(settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-api-limits.log", "ab")
    proc = subprocess.Popen(worker_command("x")[:3] + ["api", "--port", str(port)], env={**os.environ, **LIMITS},
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(url + "/openapi.json", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=15)
    log.close()


def _statuses(http: httpx.Client, path: str, n: int, **kw) -> list[int]:
    return [http.get(path, **kw).status_code for _ in range(n)]


def test_a_key_over_its_rate_gets_429_and_other_tenants_and_keys_are_served(settings, limited_api):
    flooder = make_key(settings, tenant="rl-acme", scopes=("memory:read",), name="tests-rl-flooder")
    other = make_key(settings, tenant="rl-globex", scopes=("memory:read",), name="tests-rl-other")
    user = unique_user("rl")
    with httpx.Client(base_url=limited_api, timeout=30) as http:
        got = _statuses(http, f"/v1/users/{user}/preferences", 30, headers=bearer(flooder))
        assert got.count(200) >= 10 and 429 in got, got         # the burst, then refusals
        refused = http.get(f"/v1/users/{user}/preferences", headers=bearer(flooder))
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1, refused.text
        assert "this API key" in refused.json()["error"]
        assert http.get(f"/v1/users/{user}/preferences", headers=bearer(other)).status_code == 200, \
            "another tenant's key is served meanwhile"
        time.sleep(1.2)
        assert http.get(f"/v1/users/{user}/preferences", headers=bearer(flooder)).status_code == 200, \
            "a second later the key has its rate back"


def test_a_flood_of_random_keys_is_refused_before_the_key_store_and_known_keys_go_on(settings, limited_api):
    known = make_key(settings, tenant="rl-known", scopes=("memory:read",), name="tests-rl-known")
    user = unique_user("rlk")
    from concurrent.futures import ThreadPoolExecutor

    def timed(http: httpx.Client, token: str) -> tuple[int, float]:
        t0 = time.monotonic()
        return http.get(f"/v1/users/{user}/preferences", headers=bearer(token)).status_code, time.monotonic() - t0

    limits = httpx.Limits(max_connections=48, max_keepalive_connections=48)
    with httpx.Client(base_url=limited_api, timeout=30, limits=limits) as http, ThreadPoolExecutor(40) as pool:
        assert http.get(f"/v1/users/{user}/preferences", headers=bearer(known)).status_code == 200   # now cached
        # 40 random keys at once: the bucket's 10 lookups are answered 401, the rest 429 after the
        # refusal delay (the tarpit), while a known key is served at once meanwhile
        flood = [pool.submit(timed, http, f"msk_{secrets.token_urlsafe(24)}") for _ in range(40)]
        time.sleep(0.2)
        status, took = timed(http, known)
        assert status == 200 and took < 0.5, ("a known key (from the cache) is served during the flood", took)
        answers = [f.result() for f in flood]
        got = [s for s, _ in answers]
        assert set(got) == {401, 429} and got.count(401) <= 15, got
        assert all(t >= 0.45 for s, t in answers if s == 429), sorted(t for s, t in answers if s == 429)
        metrics = http.get("/metrics").text
        counted = {line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith("memstream_rate_limited_total{")}
        assert counted.get('limit="lookup"', 0) >= got.count(429), counted
