"""The input contract (schemas/limits.py), everywhere: bad input gets a clear 4xx, never a 500.

The API runs in-process (FastAPI's TestClient over the real app and the real stack: no workers
needed, nothing bad reaches Kafka); the SDKs and the CLI refuse the same input with a one-line
error; a record that breaks the contract read straight from Kafka is dead-lettered by a projector
instead of failing its write. A bounded schemathesis run checks the routes answer what the
published OpenAPI document says (no 5xx, only declared status codes, bodies matching their schema).
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from fastapi.testclient import TestClient

from kernel.errors import InvalidInput
from memstream.http_client import MemoryApi
from adapters.kafka_auth import ADMIN
from tests.auth_helpers import bearer
from tests.helpers import unique_user

pytestmark = pytest.mark.timeout(300)

FUTURE = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()
MB = "x" * 1_000_000


@pytest.fixture(scope="module")
def app(settings):
    from memstream.app.api import create_app
    return create_app(settings)


@pytest.fixture(scope="module")
def api(app, admin_key):
    with TestClient(app, raise_server_exceptions=False, headers=bearer(admin_key)) as c:
        yield c


def problems(resp) -> str:
    body = resp.json()
    return " | ".join([body["error"], *(body.get("problems") or [])])


def turn(**over) -> dict:
    return {"user": "u", "session": "s", "role": "user", "content": "hi", **over}


# -- HTTP ------------------------------------------------------------------------------------

def test_a_1_mb_turn_is_413_naming_the_body_limit(api, settings):
    resp = api.post("/v1/turns", json=turn(content=MB))
    assert resp.status_code == 413 and "MEMSTREAM_MAX_BODY_BYTES" in problems(resp)
    assert str(settings.max_body_bytes) in problems(resp)


def test_a_body_streamed_without_length_is_bounded_too(api):
    resp = api.post("/v1/turns", content=(b"x" * 4096 for _ in range(100)), headers={"content-type": "application/json"})
    assert resp.status_code == 413


def test_content_over_the_setting_is_422_naming_it(api, settings):
    resp = api.post("/v1/turns", json=turn(content="y" * (settings.max_content_chars + 1)))
    assert resp.status_code == 422
    assert "content:" in problems(resp) and f"limit of {settings.max_content_chars}" in problems(resp)
    assert "MEMSTREAM_MAX_CONTENT_CHARS" in problems(resp)


def test_event_time_beyond_the_future_skew_is_422_and_the_past_is_fine(api, settings):
    resp = api.post("/v1/turns", json=turn(at="2099-01-01T00:00:00Z"))
    assert resp.status_code == 422 and "MEMSTREAM_MAX_FUTURE_SKEW_S" in problems(resp) and "at:" in problems(resp)
    resp = api.post("/v1/steps", json={"user": "u", "task": "t", "content": "c", "at": FUTURE})
    assert resp.status_code == 422 and "MEMSTREAM_MAX_FUTURE_SKEW_S" in problems(resp)
    user = unique_user("backfill")
    resp = api.post("/v1/turns", json=turn(user=user, at="2020-01-01T00:00:00Z"))
    assert resp.status_code == 201, resp.text


@pytest.mark.parametrize("field, value, says", [
    ("user", "a\u0000b", "user: user id contains control characters"),
    ("session", "s\u0000", "session: session id contains control characters"),
    ("task", "t\u0007", "task: task id contains control characters"),
    ("content", "nul\u0000here", "content: content contains control characters"),
    ("user", "u" * 201, "user: String should have at most 200 characters"),
    ("session", "s" * 201, "session: String should have at most 200 characters"),
    ("task", "t" * 201, "task: String should have at most 200 characters"),
    ("user", "", "user: String should have at least 1 character"),
])
def test_bad_ids_and_content_in_a_body_are_422_naming_the_field(api, field, value, says):
    resp = api.post("/v1/turns", json=turn(**{field: value}))
    assert resp.status_code == 422 and says in problems(resp), resp.text


def test_content_may_hold_newlines_and_tabs(api):
    resp = api.post("/v1/turns", json=turn(user=unique_user("nl"), content="line one\n\tline two\r\n"))
    assert resp.status_code == 201, resp.text


@pytest.mark.parametrize("path, says", [
    ("/v1/users/a%00b/preferences", "user: user id contains control characters"),
    ("/v1/users/a%00b/profile", "user: user id contains control characters"),
    ("/v1/users/" + "u" * 201 + "/profile", "user: String should have at most 200"),
    ("/v1/users/u/sessions/s%01", "session: session id contains control characters"),
    ("/v1/users/u/tasks/t%00/steps", "task: task id contains control characters"),
    ("/v1/users/u/tasks/" + "t" * 201 + "/steps", "task: String should have at most 200"),
    ("/v1/audit/users/a%00b", "user: user id contains control characters"),
])
def test_bad_ids_in_a_path_are_422(api, path, says):
    resp = api.get(path)
    assert resp.status_code == 422 and says in problems(resp), resp.text


@pytest.mark.parametrize("method, path, body, says", [
    ("GET", "/v1/users/u/preferences?after=x.turns:0:999999999&wait_s=1e9", None, "wait_s: Input should be less than or equal to 30"),
    ("GET", "/v1/users/u/profile?wait_s=-1", None, "wait_s:"),
    ("GET", "/v1/users/u/sessions/s?wait_s=31", None, "wait_s:"),
    ("GET", "/v1/users/u/tasks/t/steps?k=0", None, "k: Input should be greater than or equal to 1"),
    ("GET", "/v1/users/u/tasks/t/steps?k=21", None, "k: Input should be less than or equal to 20"),
    ("GET", "/v1/audit/users/u?limit=0", None, "limit:"),
    ("GET", "/v1/audit/users/u?limit=100001", None, "limit:"),
    ("GET", "/v1/users/u/profile?as_of=-240", None, "as_of: must be an ISO 8601 date-time"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "tags": ["a\u0000b"]}, "tags.0: tag contains control characters"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "categories": [""]}, "categories.0:"),
    ("GET", "/v1/users/u/preferences?as_of=2026-01-01T00:00:00", None, "as_of: Input should have timezone info"),
    ("GET", "/v1/audit/users/u?since=12", None, "since: must be an ISO 8601 date-time"),
    ("GET", "/v1/users/u/profile?after=garbage", None, "after: String should match pattern"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "k": 101}, "k: Input should be less than or equal to 100"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "wait_s": 1e9}, "wait_s: Input should be less than or equal to 30"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "as_of": -240}, "as_of: must be an ISO 8601 date-time"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "max_age_hours": 1e300}, "max_age_hours:"),
    ("POST", "/v1/context", {"user": "u", "query": "q", "k": 0}, "k:"),
    ("POST", "/v1/context", {"user": "u", "query": "q", "wait_s": 1e9}, "wait_s:"),
    ("POST", "/v1/context", {"user": "u", "query": "q", "slot_budgets": {"jokes": 1}}, "slot_budgets.jokes"),
    ("POST", "/v1/turns", {"user": "u", "session": "s", "role": "user", "content": "c", "at": 1700000000}, "at: must be an ISO 8601"),
    ("POST", "/v1/recall", {"user": "u", "query": "q", "wait": 3}, "wait: Extra inputs are not permitted"),
])
def test_bounds_are_422_naming_the_field(api, method, path, body, says):
    resp = api.request(method, path, json=body)
    assert resp.status_code == 422 and says in problems(resp), resp.text


def test_a_wait_is_bounded_and_holds_no_thread(api, settings):
    """Many requests waiting on a far position neither starve other requests nor outlive wait_s."""
    far = f"{settings.topic('turns')}:0:999999999"

    async def go():
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=api.headers) as c:
            waits = [asyncio.create_task(c.get(f"/v1/users/u/preferences?after={far}&wait_s=3")) for _ in range(60)]
            await asyncio.sleep(0.5)
            t0 = time.monotonic()
            other = await c.get("/v1/users/u/tasks/t/steps?k=0")     # answered while 60 wait
            other_s = time.monotonic() - t0
            done = await asyncio.gather(*waits)
            return other, other_s, done
    # the app's lifespan already ran (the TestClient fixture): its read models are open
    other, other_s, done = asyncio.run(go())
    assert other.status_code == 422 and other_s < 2.0
    # the tenant's quota of waits (#28) admits the first MEMSTREAM_MAX_WAITS_PER_TENANT; the rest are 429 at once
    quota = settings.max_waits_per_tenant
    waited = [r for r in done if r.status_code == 409]
    refused = [r for r in done if r.status_code == 429]
    assert len(waited) == min(quota, 60) and len(refused) == 60 - len(waited), sorted(r.status_code for r in done)
    assert all(r.headers.get("retry-after") for r in refused)
    # each admitted one waited out its wait_s, then the log's end said no publish returned that position
    assert "past the end of the log" in waited[0].json()["error"]


def test_a_position_outside_the_namespaces_log_is_422_at_once(api, settings):
    t0 = time.monotonic()
    for token in ("other.turns:0:1", f"{settings.topic('turns')}:{settings.partitions}:1", f"{settings.topic('deadletter')}:0:1"):
        resp = api.get(f"/v1/users/u/profile?after={token}&wait_s=3")
        assert resp.status_code == 422 and "after:" in problems(resp), resp.text
    assert time.monotonic() - t0 < 3.0


def test_errors_never_leak_internals(api, settings):
    resp = api.get(f"/v1/users/u/profile?after={settings.topic('turns')}:0:999999999&wait_s=0")
    assert resp.status_code == 409
    for r in (resp, api.post("/v1/turns", content=b"{not json", headers={"content-type": "application/json"})):
        text = r.text.lower()
        assert not any(s in text for s in ("traceback", "psycopg", "select ", "/work/", "kafka", ".py"))


def test_the_openapi_document_declares_the_4xx(app):
    spec = app.openapi()
    for path, ops in spec["paths"].items():
        if path in ("/healthz", "/readyz"):
            continue   # the orchestrator's probes take no input at all: nothing to refuse with a 422
        for op in ops.values():
            assert "422" in op["responses"], path
            assert op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")
    assert "413" in spec["paths"]["/v1/turns"]["post"]["responses"]
    turn_schema = spec["components"]["schemas"]["TurnIn"]["properties"]
    assert turn_schema["user"]["maxLength"] == 200 and "pattern" in turn_schema["user"]
    assert turn_schema["content"]["maxLength"] == 32_000


# -- SDKs: refused before anything is sent ----------------------------------------------------

def test_the_kafka_sdk_refuses_bad_input_before_sending(client):
    cases = [
        (lambda: client.record_turn("u", "s", "user", MB), "over the limit of 32000 (MEMSTREAM_MAX_CONTENT_CHARS)"),
        (lambda: client.record_turn("u", "s", "user", "hi", at=datetime(2099, 1, 1, tzinfo=timezone.utc)),
         "MEMSTREAM_MAX_FUTURE_SKEW_S"),
        (lambda: client.record_turn("a\x00b", "s", "user", "hi"), "user id contains control characters"),
        (lambda: client.record_turn("u", "s" * 201, "user", "hi"), "session: String should have at most 200"),
        (lambda: client.record_step("u", "t\x00", "hi"), "task: task id contains control characters"),
        (lambda: client.record_turn("u", "s", "user", "a\x00b"), "content contains control characters"),
        (lambda: client.start_task("u" * 201, "t"), "over the limit of 200"),
    ]
    for call, says in cases:
        with pytest.raises(InvalidInput, match=says.replace("(", r"\(").replace(")", r"\)")):
            call()


def test_the_http_sdk_refuses_bad_ids_before_sending_and_names_server_limits():
    api = MemoryApi("http://127.0.0.1:9")     # nothing listens: a request would fail differently
    for call, says in [(lambda: api.record_turn("a\x00b", "s", "user", "hi"), "user id contains control"),
                       (lambda: api.profile("u" * 201), "over the limit of 200"),
                       (lambda: api.session("u", "s\x01"), "session id contains control"),
                       (lambda: api.task_steps("u", "t\x00"), "task id contains control"),
                       (lambda: api.record_step("u", "t", "a\x00"), "content contains control")]:
        with pytest.raises(InvalidInput, match=says):
            call()
    api.close()


def test_the_http_sdk_raises_the_servers_422_and_413(app, admin_key, settings):
    with TestClient(app, raise_server_exceptions=False, headers=bearer(admin_key)) as c:
        api = MemoryApi("http://t")
        api._http = c                                  # the same SDK code over the in-process app
        with pytest.raises(InvalidInput, match="HTTP 413: request body over"):
            api.record_turn("u", "s", "user", MB)
        with pytest.raises(InvalidInput, match="HTTP 422.*MEMSTREAM_MAX_CONTENT_CHARS"):
            api.record_turn("u", "s", "user", "y" * 40_000)
        with pytest.raises(InvalidInput, match="HTTP 422.*MEMSTREAM_MAX_FUTURE_SKEW_S"):
            api.record_turn("u", "s", "user", "hi", at=datetime(2099, 1, 1, tzinfo=timezone.utc))
        with pytest.raises(InvalidInput, match="HTTP 422: invalid request: wait_s"):
            api.profile("u", after=f"{settings.topic('turns')}:0:1", wait_s=1e9)
        # other URL characters travel escaped as one path segment; a '/' is refused before sending
        assert isinstance(api.profile("a?b#c%d e"), dict)
        with pytest.raises(InvalidInput, match="contains '/'"):
            api.profile("team/alice")


# -- CLI: one line, exit 2, no traceback ------------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["publish", "turn", "--user", "u", "--text", "y" * 40_000], "MEMSTREAM_MAX_CONTENT_CHARS"),
    (["publish", "turn", "--user", "u", "--text", "hi", "--at", "2099-01-01T00:00:00+00:00"], "MEMSTREAM_MAX_FUTURE_SKEW_S"),
    (["publish", "turn", "--user", "u", "--text", "hi", "--at", "soon"], "not an ISO 8601 date or time"),
    (["publish", "turn", "--user", "u" * 201, "--text", "hi"], "user has 201 characters, over the limit of 200"),
    (["publish", "step", "--user", "u", "--task", "t\x01", "--text", "hi"], "task contains control characters"),
    (["publish", "turn", "--user", "u", "--text", "a\x01b"], "content contains control characters"),
    (["prefs", "--user", "a\x1bb"], "user contains control characters"),
    (["steps", "--user", "u", "--task", "t", "--k", "0"], "--k 0 is out of range"),
])
def test_the_cli_refuses_bad_input_with_one_line(settings, argv, says):
    proc = subprocess.run([sys.executable, "-m", "memstream.app.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


# -- consumers: a record that breaks the contract is poison, not a failed write ---------------

def test_an_over_long_session_id_from_kafka_is_dead_lettered_by_the_projector(settings, keys):
    from adapters.bus import EventProducer, ensure_topics
    from projections import pg
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from projections.queries import session_window
    from schemas.codec import encode, make_envelope
    from schemas.events import TurnRecorded
    from tests.kafka_helpers import dead_letters

    s = settings.model_copy(update={"namespace": f"{settings.namespace}_ic{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    user = unique_user("longsess")
    # model_construct skips validation: what an old or foreign producer might have written
    bad = TurnRecorded.model_construct(session="s" * 5000, task=None, role="user", content="too long a session")
    good = TurnRecorded(session="ok", role="user", content="fine")
    producer = EventProducer(s, ADMIN)
    for data in (bad, good):
        producer.send(s.topic("turns"), user, encode(make_envelope(data, user=user), keys)).result(30)
    producer.close()
    runner = ProjectorRunner(build_projector("session-windows", s), s, keys)
    runner.run(idle_exit_after=2.0)
    assert runner.error is None and runner.dead_lettered == 1
    assert [m["content"] for m in session_window(s, user, "ok")] == ["fine"]
    reasons = [d["reason"] for d in dead_letters(s)]
    assert len(reasons) == 1 and "session" in reasons[0] and "200" in reasons[0], reasons


# -- the published schema, checked by schemathesis --------------------------------------------

def test_schemathesis_no_5xx_and_conformance(settings):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, Phase, given, settings as hsettings

    from memstream.app.api import create_app
    from adapters.bus import ensure_topics
    from adapters.privacy.tenants import SCOPES
    from projections import pg
    from tests.auth_helpers import make_key
    # A namespace of its own: the fuzz erases and forgets whatever users it makes up, and must not
    # erase one another test writes as. Generated `after`s wait at most 0.3 s.
    fuzz = settings.model_copy(update={"namespace": settings.namespace + "_fuzz", "max_wait_s": 0.3})
    ensure_topics(fuzz)
    pg.ensure_schema(fuzz)
    admin_key = make_key(fuzz, "default", SCOPES, name="fuzz")
    app = create_app(fuzz)
    from schemathesis import checks as st
    # Every check schemathesis has, except its server-error check, which is ours below: 503 is a
    # declared answer (a projector has not applied `after` within wait_s: retry).
    checks = [st.status_code_conformance, st.content_type_conformance, st.response_schema_conformance,
              st.response_headers_conformance, st.negative_data_rejection, st.positive_data_acceptance,
              st.missing_required_header, st.unsupported_method, st.use_after_free, st.ensure_resource_availability,
              st.ignored_auth, st.max_response_time]

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures = []
    with TestClient(app, raise_server_exceptions=False):      # the lifespan opens the read models
        for op in schema.get_all_operations():
            operation = op.ok()
            if (operation.method.upper(), operation.path) in (("POST", "/v1/turns"), ("POST", "/v1/steps"),
                                                              ("POST", "/v1/turns/batch"), ("POST", "/v1/memories"),
                                                              ("POST", "/v1/tasks/start"), ("POST", "/v1/tasks/finish"),
                                                              ("DELETE", "/v1/users/{user}/memories")):
                continue  # publishing random events: covered by the tests above and tests/test_memories_api.py, kept off the log

            @hsettings(max_examples=15, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
                       suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy())
            def run(case):
                try:       # a generous limit: an as-of read replays a history, minutes on a loaded machine
                    response = case.call(headers=bearer(admin_key), timeout=180)
                except Exception as exc:  # noqa: BLE001 - named with its route, reported with the rest
                    failures.append(f"{operation.method} {operation.path}: no answer: {exc!r}"[:600])
                    return
                if response.status_code >= 500 and not (response.status_code == 503 and "has not applied" in response.text):
                    failures.append(f"{operation.method} {operation.path}: {response.status_code} {response.text[:300]}")
                try:
                    case.validate_response(response, checks=checks)
                except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - collected, reported together
                    failures.append(f"{operation.method} {operation.path}: {str(exc)[:600]}")
            run()
    assert not failures, "\n".join(failures[:10])
