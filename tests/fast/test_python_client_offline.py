"""memstream_client (clients/python) without a server: retries honour Retry-After (a tiny local
stub server answers 503 once), errors map to one root with their subclasses, requests have the
shapes the API's routes take, and memstream.http_client still raises kernel.errors classes."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

import memstream_client as mc
from memstream_client import AsyncMemstreamClient, MemstreamClient

POSITION = {"topic": "ns.turns", "partition": 0, "offset": 7, "token": "ns.turns:0:7"}


class _Stub(BaseHTTPRequestHandler):
    """Answers each request with the next of `script` (status, headers, body); records what came."""
    script: list[tuple[int, dict, object]] = []
    seen: list[tuple[str, str, dict, float]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        type(self).seen.append((self.command, self.path, {"auth": self.headers.get("Authorization"), "body": body},
                                time.monotonic()))
        status, headers, payload = type(self).script.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, *args) -> None:   # quiet
        pass


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    _Stub.script, _Stub.seen = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Stub
    server.shutdown()
    server.server_close()


def test_a_503_is_retried_after_the_servers_retry_after(stub):
    url, s = stub
    s.script = [(503, {"Retry-After": "1"}, {"error": "not applied yet"}), (201, {}, POSITION)]
    with MemstreamClient(url, api_key="msk_test", retry_backoff_s=0.01) as mem:
        pos = mem.record_turn("alice", "s1", "user", "I like tea")
    assert pos == mc.Position(**POSITION) and pos.token == "ns.turns:0:7"
    (m1, p1, first, t1), (m2, p2, second, t2) = s.seen
    assert (m1, p1) == (m2, p2) == ("POST", "/v1/turns") and first == second     # the same request again
    assert first["auth"] == "Bearer msk_test"
    assert first["body"] == {"user": "alice", "session": "s1", "role": "user", "content": "I like tea"}
    assert t2 - t1 >= 0.95, "waited for Retry-After (1 s), not the 10 ms back-off"


def test_retries_are_bounded_capped_and_end_in_unavailable(stub):
    url, s = stub
    s.script = [(429, {"Retry-After": "3600"}, {"error": "slow down"})] * 3
    started = time.monotonic()
    with MemstreamClient(url, api_key="k", max_retries=2, max_retry_wait_s=0.05) as mem:
        with pytest.raises(mc.Unavailable, match="HTTP 429: slow down") as exc:
            mem.search("alice", "tea")
    assert time.monotonic() - started < 5, "Retry-After is capped by max_retry_wait_s"
    assert len(s.seen) == 3 and exc.value.status == 429 and exc.value.retry_after == 3600
    assert isinstance(exc.value, mc.MemstreamError)


def test_async_client_retries_too(stub):
    url, s = stub
    s.script = [(503, {"Retry-After": "0"}, {"error": "busy"}), (200, {}, {"text": "ctx", "slots": {"total": {}}})]

    async def go():
        async with AsyncMemstreamClient(url, api_key="k") as mem:
            return await mem.context("alice", "plan a dinner", budget=300)
    ctx = asyncio.run(go())
    assert ctx.text == "ctx" and len(s.seen) == 2 and s.seen[1][2]["body"]["budget"] == 300


def test_a_refused_connection_is_unavailable_after_the_retries():
    with MemstreamClient("http://127.0.0.1:9", api_key="k", max_retries=1, retry_backoff_s=0.01) as mem:
        with pytest.raises(mc.Unavailable, match="cannot reach the server"):
            mem.profile("alice")


def _mock(handler) -> MemstreamClient:
    return MemstreamClient("http://t", api_key="k", max_retries=0, transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("status, cls", [(401, mc.AccessDenied), (403, mc.AccessDenied), (404, mc.NotFound),
                                         (409, mc.Conflict), (410, mc.Gone), (413, mc.InvalidInput),
                                         (422, mc.InvalidInput), (503, mc.Unavailable), (500, mc.MemstreamError)])
def test_each_error_status_has_its_class_with_the_servers_words(status, cls):
    body = {"error": "invalid request", "problems": ["k: Input should be greater than or equal to 1"]}
    mem = _mock(lambda req: httpx.Response(status, json=body))
    with pytest.raises(cls) as exc:
        mem.get("alice", "m1")
    assert type(exc.value) is cls and exc.value.status == status
    assert str(exc.value) == "HTTP %d: invalid request: k: Input should be greater than or equal to 1" % status
    assert exc.value.problems == body["problems"]


def test_requests_have_the_routes_shapes(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_API_KEY", "msk_env")
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        path = req.url.path
        if path == "/v1/memories" and req.method == "POST":
            return httpx.Response(202, json={**POSITION, "positions": [POSITION]})
        if path.endswith("/memories") and req.method == "GET" or path == "/v1/memories/search":
            return httpx.Response(200, json={"user": "a b", "memories": [], "next_cursor": None})
        return httpx.Response(200, json={**POSITION, "memory_id": "m1", "memory_ids": ["m1"]})

    mem = MemstreamClient("http://t", transport=httpx.MockTransport(handler))
    added = mem.add([{"role": "user", "content": "I live in Porto"}], user="a b", agent_id="bot",
                    metadata={"source": "chat", "n": 2})
    assert added.positions[0].token == POSITION["token"]
    mem.get_all("a b", agent_id="bot", created_after="2026-01-01T00:00:00+00:00", after=added)
    mem.get_all("a b", agent_id="bot", filters={"metadata": {"n": {"gte": 2}}}, limit=10)
    mem.update("a b", "m1", importance=0.9)
    mem.delete("a b", "m1", reason="asked to forget")
    body = [json.loads(r.content) if r.content else None for r in seen]
    assert seen[0].headers["Authorization"] == "Bearer msk_env"      # MEMSTREAM_API_KEY by default
    assert body[0] == {"user": "a b", "infer": True, "agent_id": "bot", "metadata": {"source": "chat", "n": 2},
                       "messages": [{"role": "user", "content": "I live in Porto"}]}
    assert seen[1].url.path == "/v1/users/a b/memories" and seen[1].url.raw_path.startswith(b"/v1/users/a%20b/")
    assert dict(seen[1].url.params) == {"status": "active", "agent_id": "bot", "after": POSITION["token"],
                                        "created_after": "2026-01-01T00:00:00+00:00"}
    assert (seen[2].method, seen[2].url.path) == ("POST", "/v1/memories/search")
    assert body[2] == {"user": "a b", "status": "active", "limit": 10,
                       "filters": {"and": [{"metadata": {"n": {"gte": 2}}}, {"agent_id": "bot"}]}}
    assert (seen[3].method, body[3]) == ("PATCH", {"importance": 0.9})
    assert (seen[4].method, dict(seen[4].url.params)) == ("DELETE", {"reason": "asked to forget"})
    with pytest.raises(mc.InvalidInput, match="at least one"):
        mem.update("a b", "m1")
    with pytest.raises(mc.InvalidInput, match="exactly one"):
        mem.add(user="a b")
    with pytest.raises(mc.InvalidInput, match="contains '/'"):
        mem.get("team/alice", "m1")
    assert len(seen) == 5, "refused before sending"


def test_iter_all_follows_the_cursor_and_models_keep_added_fields():
    memory = {"memory_id": "m", "content": "c", "category": "fact", "importance": 0.5, "status": "active",
              "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "brand_new": 1}
    pages = {None: {"user": "u", "memories": [{**memory, "memory_id": "m1"}], "next_cursor": "c1"},
             "c1": {"user": "u", "memories": [{**memory, "memory_id": "m2"}], "next_cursor": None}}
    mem = _mock(lambda req: httpx.Response(200, json=pages[req.url.params.get("cursor")]))
    got = list(mem.iter_all("u", limit=1))
    assert [m.memory_id for m in got] == ["m1", "m2"]
    assert got[0].model_extra == {"brand_new": 1} and got[0].created_at.tzinfo is not None


def test_the_full_packages_http_client_keeps_memstream_errors():
    """memstream.http_client is a layer over memstream_client; its callers still catch kernel.errors."""
    from kernel.errors import AccessDenied, InvalidInput, MemstreamError, Timeout
    from memstream.http_client import MemoryApi

    for status, cls in ((422, InvalidInput), (403, AccessDenied), (503, Timeout), (404, MemstreamError)):
        api = MemoryApi("http://t", api_key="k", max_retries=0)
        api._http = httpx.Client(base_url="http://t", transport=httpx.MockTransport(
            lambda req, s=status: httpx.Response(s, json={"error": "nope", "problems": ["k: bad"]})))
        with pytest.raises(cls, match=f"HTTP {status}: nope: k: bad") as exc:
            api.recall("u", "q")
        assert type(exc.value) is cls and isinstance(exc.value.__cause__, mc.MemstreamError)
    ok = MemoryApi("http://t", api_key="k")
    ok._http = httpx.Client(base_url="http://t", transport=httpx.MockTransport(lambda req: httpx.Response(201, json=POSITION)))
    assert ok.record_turn("u", "s", "user", "hi") == POSITION          # plain dicts, as before


def test_dev_and_the_image_install_the_thin_client_before_memstream():
    """memstream depends on memstream-client, which is on no index: ./dev install (what the Dockerfile
    runs) installs ./clients/python, editable, in the same pip command as memstream."""
    import re
    import tomllib
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("memstream-client") for d in deps)
    client = tomllib.loads((root / "clients/python/pyproject.toml").read_text())["project"]
    assert client["name"] == "memstream-client"
    assert sorted(re.split(r"[<>=~!; ]", d)[0] for d in client["dependencies"]) == ["httpx", "pydantic"]
    dev = (root / "dev").read_text()
    assert re.search(r'pip install -q -e \./clients/python -e "\.\[\$extras\]"', dev), "./dev installs both"
    assert "clients/python/pyproject.toml" in dev, "a change to the client's pyproject reinstalls"
    docker = (root / "Dockerfile").read_text()
    assert docker.index("COPY clients/python ./clients/python") < docker.index("RUN MEMSTREAM_EXTRAS")
