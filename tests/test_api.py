"""The HTTP API and the SDK over it, on the real stack (uvicorn in a subprocess)."""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time

import httpx
import pytest

from kernel.errors import MemstreamError
from memstream.http_client import AsyncMemoryApi, MemoryApi
from memstream.app.workers import worker_command
from tests.auth_helpers import bearer
from tests.helpers import unique_user


@pytest.fixture(scope="module")
def api_url(settings, pipeline, admin_key):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = worker_command("x")[:3] + ["api", "--port", str(port)]
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-api.log", "ab")
    # waits of up to 60 s below (a cold pipeline's first publish): above the default MEMSTREAM_MAX_WAIT_S
    proc = subprocess.Popen(cmd, env={**os.environ, "MEMSTREAM_MAX_WAIT_S": "120"}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    # a condition, not a time: on a loaded machine the API may need minutes to import and start
    deadline = time.monotonic() + 240
    while True:
        assert proc.poll() is None, "memstream api exited; see its log"
        try:
            if httpx.get(url + "/openapi.json", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "memstream api did not answer within 240 s"
        time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=15)


def test_publish_then_read_your_write_over_http(api_url):
    api = MemoryApi(api_url)
    user = unique_user("http")
    pos = api.record_turn(user, "s1", "user", "我叫李雷，我住在杭州")
    assert pos["topic"].endswith(".turns") and pos["token"].count(":") == 2
    # wait_s: on a freshly started stack the first publish may take the workers a while
    hits = api.recall(user, "我住在哪里", k=3, after=pos["token"], wait_s=60)
    assert hits[0]["content"] == "用户住在杭州" and "similarity" in hits[0]["why"]
    assert api.profile(user, after=pos["token"])["preferences"]["name"]["value"] == "李雷"
    step = api.record_step(user, "t1", "opened the editor", kind="tool")
    assert api.task_steps(user, "t1", k=5, after=step["token"], wait_s=60)["steps"][0]["content"] == "opened the editor"
    assert [m["content"] for m in api.session(user, "s1", after=pos["token"])["messages"]] == ["我叫李雷，我住在杭州"]
    ctx = api.context(user, "where do I live?", session="s1", after=pos["token"], budget=300)
    assert "用户住在杭州" in ctx["text"] and ctx["slots"]["total"]["budget"] == 300
    api.close()


def test_async_sdk(api_url):
    async def go():
        api = AsyncMemoryApi(api_url)
        user = unique_user("ahttp")
        pos = await api.record_turn(user, "s", "user", "I like sailing")
        hits = await api.recall(user, "hobbies", after=pos["token"], wait_s=60)
        await api.aclose()
        return hits
    assert [h["content"] for h in asyncio.run(go())] == ["User likes sailing"]


@pytest.mark.parametrize("path, body, problem", [
    ("/v1/recall", {"query": "x"}, "user: Field required"),
    ("/v1/recall", {"user": "u", "query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("/v1/turns", {"user": "u", "session": "s", "role": "robot", "content": "hi"}, "role: Input should be"),
    ("/v1/turns", {"user": "u", "session": "s", "role": "user", "content": "hi", "at": "2026-01-01T00:00:00"},
     "at: Input should have timezone info"),
])
def test_bad_requests_get_a_422_that_says_what_is_wrong(api_url, admin_key, path, body, problem):
    resp = httpx.post(api_url + path, json=body, headers=bearer(admin_key))
    assert resp.status_code == 422
    assert any(problem in p for p in resp.json()["problems"]), resp.json()


def test_other_4xx_and_the_openapi_document(api_url, admin_key):
    auth = bearer(admin_key)
    resp = httpx.post(api_url + "/v1/context", json={"user": "u", "query": "q", "slot_budgets": {"jokes": 5}}, headers=auth)
    assert resp.status_code == 422 and any("jokes" in p for p in resp.json()["problems"])
    resp = httpx.post(api_url + "/v1/recall", json={"user": "u", "query": "q", "after": "garbage"}, headers=auth)
    assert resp.status_code == 422 and resp.json()["problems"][0].startswith("after:")
    spec = httpx.get(api_url + "/openapi.json").json()
    assert {"/v1/recall", "/v1/context", "/v1/turns", "/v1/users/{user}/profile"} <= set(spec["paths"])
    with pytest.raises(MemstreamError, match="query is empty"):
        MemoryApi(api_url).recall("u", "")
    with pytest.raises(MemstreamError, match="HTTP 422"):
        MemoryApi(api_url).recall("u", "q", k=0)


def test_publishing_for_an_erased_user_is_a_410_not_a_500(settings, api_url, admin_key):
    """Erasure is final: the key store never creates a key for an erased user again, and the API
    says so (410, declared in the OpenAPI) instead of failing on the missing key."""
    from adapters.erasure import erase_user
    user = unique_user("gone")
    auth = bearer(admin_key)
    turn = {"user": user, "session": "s1", "role": "user", "content": "I like tea"}
    assert httpx.post(api_url + "/v1/turns", json=turn, headers=auth).status_code == 201
    erase_user(settings, user, requested_by="test")
    resp = httpx.post(api_url + "/v1/turns", json=turn, headers=auth)
    assert resp.status_code == 410 and "erased" in resp.json()["error"]
    step = {"user": user, "task": "t1", "content": "ran the tests"}
    assert httpx.post(api_url + "/v1/steps", json=step, headers=auth).status_code == 410
    spec = httpx.get(api_url + "/openapi.json").json()
    assert "410" in spec["paths"]["/v1/turns"]["post"]["responses"]


def test_context_reads_its_own_step_write(api_url):
    """A step's token is a tasks-topic position: context waits for the task buffer that holds it,
    not for the memory projectors (steps never reach the memory topic, so they would never apply it)."""
    api = MemoryApi(api_url)
    user = unique_user("ctxstep")
    step = api.record_step(user, "t9", "deployed build 42", kind="tool")
    ctx = api.context(user, "what happened?", task="t9", after=step["token"], wait_s=30)
    assert "deployed build 42" in ctx["text"]
    api.close()


def test_a_task_starts_and_finishes_over_http(api_url, admin_key):
    """task.started resets the step buffer and names the goal; task.finished records the outcome."""
    user = unique_user("task")
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=90) as http:
        old = http.post("/v1/steps", json={"user": user, "task": "t1", "content": "a step before the start"})
        started = http.post("/v1/tasks/start", json={"user": user, "task": "t1", "goal": "book a flight"})
        assert old.status_code == 201 and started.status_code == 201, started.text
        step = http.post("/v1/steps", json={"user": user, "task": "t1", "content": "searched flights", "kind": "tool"})
        done = http.post("/v1/tasks/finish", json={"user": user, "task": "t1", "status": "failed"})
        assert done.status_code == 201, done.text
        view = http.get(f"/v1/users/{user}/tasks/t1/steps", params={"after": done.json()["token"], "wait_s": 60}).json()
        assert [s["content"] for s in view["steps"]] == ["searched flights"] and step.status_code == 201
        assert (view["task"]["goal"], view["task"]["status"]) == ("book a flight", "failed")
        bad = http.post("/v1/tasks/finish", json={"user": user, "task": "t1", "status": "done"})
        assert bad.status_code == 422 and "status" in bad.text


def test_recall_and_context_filter_by_agent_run_and_metadata_in_sql(api_url, admin_key):
    """Two agents remember for one user; recall and context with filters see only the memories that
    match (agent_id, run_id, metadata comparisons, or): the rest never reach the ranking."""
    user = unique_user("filt")
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=90) as http:
        add = lambda text, **scope: http.post("/v1/memories", json={  # noqa: E731
            "user": user, "content": text, "infer": False, "category": "fact", **scope}).json()["token"]
        add("Prefers window seats on flights", agent_id="travel", run_id="r1", metadata={"topic": "travel", "v": 2})
        add("Prefers flights in the morning", agent_id="travel", run_id="r2", metadata={"topic": "travel", "v": 5})
        last = add("Prefers flights paid by the company card", agent_id="finance", metadata={"topic": "money"})
        recall = lambda **body: [h["content"] for h in http.post("/v1/recall", json={  # noqa: E731
            "user": user, "query": "what flights does the user prefer?", "after": last, "wait_s": 60, **body}).json()]
        assert len(recall()) == 3
        assert recall(filters={"agent_id": "finance"}) == ["Prefers flights paid by the company card"]
        assert sorted(recall(filters={"agent_id": "travel", "metadata": {"v": {"gt": 3}}})) == [
            "Prefers flights in the morning"]
        assert sorted(recall(filters={"or": [{"run_id": "r1"}, {"metadata": {"topic": "money"}}]})) == sorted([
            "Prefers window seats on flights", "Prefers flights paid by the company card"])
        bad = http.post("/v1/recall", json={"user": user, "query": "x", "filters": {"metadata": {"v": {"like": 1}}}})
        assert bad.status_code == 422 and "filters" in bad.text, bad.text
        # context: the recall slot reads through the filters (the profile slot is the user's, every agent's)
        ctx = http.post("/v1/context", json={"user": user, "query": "what flights does the user prefer?",
                                             "filters": {"agent_id": "finance"}}).json()
        assert "company card" in ctx["text"] and "window seats" not in ctx["text"], ctx["text"]
