"""The MCP server (memstream/app/mcp_server.py) end to end, with the `mcp` SDK's own client, on the real
stack and pipeline: `memstream mcp` as a stdio subprocess (the way an MCP host starts it) and as a
streamable HTTP server.

What is checked: the tools are listed with descriptions; a remembered turn that states a preference
becomes a memory that recall finds, the profile resource shows and the audit resource traces back to
the turn; a step shows up in build_context; forget_memory deletes. The trust boundary is the HTTP
API's: no key or a bad key is refused (stdio: the process will not start; HTTP: a 401), a missing
scope is an MCP error naming it, and another tenant's key sees neither the user's memory nor its audit.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP server is the optional extra .[mcp] (in .[test])")

import httpx2  # noqa: E402  (the mcp SDK's HTTP client)
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from memstream.app.mcp_server import FORBIDDEN, NOT_FOUND  # noqa: E402
from memstream.app.workers import worker_command  # noqa: E402
from kernel.config import REPO_ROOT  # noqa: E402
from kernel.errors import MemstreamError  # noqa: E402
from tests.auth_helpers import bearer, make_key  # noqa: E402
from tests.helpers import unique_user  # noqa: E402

pytestmark = pytest.mark.timeout(300)

TOOLS = {"remember", "remember_step", "recall", "build_context", "get_profile", "forget_memory", "add_memories",
         "list_memories", "update_memory", "get_memory", "memory_history", "delete_all_memories", "list_entities",
         "get_entity", "query_relations", "relation_path"}
MCP_CMD = worker_command("x")[:3] + ["mcp"]          # python -m memstream.app.cli mcp


def _env(**extra: str) -> dict:
    """The server's environment: this test session's namespace and stack, never an inherited key."""
    env = {k: v for k, v in os.environ.items() if k.startswith("MEMSTREAM_") and k != "MEMSTREAM_API_KEY"}
    return {**env, **extra}


@asynccontextmanager
async def stdio_session(settings, **env: str):
    """`memstream mcp` over stdio, as an MCP host runs it; its stderr goes to a log under .stack/logs."""
    params = StdioServerParameters(command=MCP_CMD[0], args=MCP_CMD[1:], env=_env(**env), cwd=str(REPO_ROOT))
    with open(settings.stack_dir / "logs" / f"{settings.namespace}-mcp-stdio.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, key: str):
    async with httpx2.AsyncClient(headers=bearer(key), timeout=60) as client, \
            streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(30):
            await session.initialize()
        yield session


async def call(client: ClientSession, tool: str, /, **args) -> dict:
    """A tool's answer, asserting it is not an error result and that its structured content and its
    text (compact JSON, one line) say the same."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    assert "\n" not in text and json.loads(text) == result.structured_content
    return result.structured_content


async def resource(client: ClientSession, uri: str) -> dict:
    result = await client.read_resource(uri)
    assert result.contents[0].mime_type == "application/json"
    return json.loads(result.contents[0].text)


async def eventually(probe, what: str, timeout: float = 60.0):
    """Poll an async probe until it returns something truthy (the pipeline works in the background)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await anyio.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


async def refused(awaitable, code: int, words: str) -> None:
    with pytest.raises(MCPError) as exc:
        await awaitable
    assert exc.value.code == code and words in exc.value.message, exc.value.error


# -- stdio -------------------------------------------------------------------------------------

def test_stdio_remember_recall_profile_audit_forget(settings, pipeline, admin_key):
    """The local admin key (the file `stack up` wrote; no MEMSTREAM_API_KEY): the whole round trip."""
    user = unique_user("mcp")
    place = f"Mcpville{uuid.uuid4().hex[:6]}"

    async def go():
        async with stdio_session(settings) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == TOOLS
            assert all(len(t.description) > 80 for t in tools.values())   # descriptions a model can act on
            assert "memory:write" in tools["remember"].description and tools["recall"].annotations.read_only_hint
            templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
            assert templates == {"memstream://users/{user}/profile", "memstream://memories/{memory_id}/audit{?content}"}

            pos = await call(s, "remember", user=user, session="s1", content=f"I like kayaking and I live in {place}")
            assert pos["topic"].endswith(".turns") and pos["token"].count(":") == 2

            async def kayaking():
                hits = (await call(s, "recall", user=user, query="what do I like doing?", after=pos["token"],
                                   wait_s=20))["hits"]
                return [h for h in hits if h["content"] == "User likes kayaking"]
            hit = (await eventually(kayaking, "the preference to be recalled"))[0]
            assert hit["category"] == "preference"

            async def profile():
                p = await resource(s, f"memstream://users/{user}/profile")
                return p if "likes:kayaking" in p["preferences"] and p["preference"] else None
            p = await eventually(profile, "the profile resource to show the preference")
            assert p["preferences"]["likes:kayaking"]["value"] == "true"
            assert p["preferences"]["location"]["value"] == place
            assert [m["memory_id"] for m in p["preference"]] == [hit["memory_id"]]
            assert (await call(s, "get_profile", user=user))["preferences"] == p["preferences"]

            async def audit():
                try:
                    return await resource(s, f"memstream://memories/{hit['memory_id']}/audit")
                except MCPError:          # the audit index has not caught up yet
                    return None
            a = await eventually(audit, "the memory's audit")
            assert a["memory_id"] == hit["memory_id"] and a["user"] == user and a["status"] == "active"
            assert [e["type"] for e in a["origin"]] == ["memory.created", "fact.extracted", "turn.recorded"]
            assert "kayaking" in json.dumps(a["origin"][-1])               # down to the turn, decrypted
            clear = await resource(s, f"memstream://memories/{hit['memory_id']}/audit?content=false")
            assert "kayaking" not in json.dumps(clear) and clear["memory_id"] == hit["memory_id"]

            await call(s, "remember_step", user=user, task="t1", content="booked the kayak", status="ok")

            async def context():     # `after` takes a turn's token (as on the API): the step is polled for
                ctx = await call(s, "build_context", user=user, query="what should I do next?", task="t1", budget=400)
                return ctx if "booked the kayak" in ctx["text"] else None
            assert "User likes kayaking" in (await eventually(context, "the step in the context"))["text"]

            gone = await call(s, "forget_memory", user=user, memory_id=hit["memory_id"], reason="user asked")
            assert gone["memory_ids"] == [hit["memory_id"]]

            async def forgotten():
                hits = (await call(s, "recall", user=user, query="what do I like doing?"))["hits"]
                return all(h["memory_id"] != hit["memory_id"] for h in hits)
            await eventually(forgotten, "the forgotten memory to leave recall")
    anyio.run(go)


def test_stdio_refuses_to_start_without_a_valid_key(settings):
    """Over stdio the key is the process's (MEMSTREAM_API_KEY, else the local key file); the scope
    checks are the same code as over HTTP (test_http_tenants_and_scopes), where a key per session is cheap."""
    # An unknown key: `memstream mcp` does not start (one line on stderr, exit 2, nothing on stdout).
    proc = subprocess.run(MCP_CMD, env={**os.environ, **_env(MEMSTREAM_API_KEY="msk_nothere_nope")},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert "unknown or revoked" in proc.stderr
    # No key at all (no MEMSTREAM_API_KEY, and a stack dir without the local key file): the same
    # check, in process (a second subprocess would only pay the imports again).
    from memstream.app.mcp_server import serve
    with pytest.raises(MemstreamError, match="no API key"):
        serve(settings.model_copy(update={"api_key": None, "stack_dir": Path(tempfile.mkdtemp())}), "stdio")


# -- streamable HTTP -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mcp_url(settings, pipeline):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-mcp-http.log", "ab")
    proc = subprocess.Popen(MCP_CMD + ["--transport", "http", "--port", str(port)], env={**os.environ, **_env()},
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    # a condition, not a time: on a loaded machine the server may need minutes to import and start
    deadline = time.monotonic() + 240
    while True:
        assert proc.poll() is None, "memstream mcp --transport http exited; see its log"
        try:
            httpx.post(url, timeout=5)
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline, "memstream mcp --transport http did not answer within 240 s"
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=15)
    log.close()


def test_http_needs_a_key(mcp_url):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers, words in (({}, "no API key"), (bearer("msk_nothere_nope"), "unknown or revoked"),
                           ({"X-API-Key": "not-a-key"}, "unknown or revoked")):
        resp = httpx.post(mcp_url, json=hello, headers=headers, timeout=10)
        assert resp.status_code == 401 and words in resp.json()["error"], resp.text
        assert resp.headers["WWW-Authenticate"] == "Bearer"

    async def go():       # the SDK's client cannot get a session without one either
        with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in whatever its transport raises
            with anyio.fail_after(20):
                async with http_session(mcp_url, "msk_nothere_nope"):
                    pass
    anyio.run(go)


def test_http_tenants_and_scopes(settings, mcp_url):
    """Two tenants name the same user; each sees its own memory only. Scopes as on the HTTP API."""
    user = unique_user("mcp-alice")
    canary = f"Canary{uuid.uuid4().hex[:6]}"
    acme, globex = make_key(settings, "acme", name="mcp-acme"), make_key(settings, "globex", name="mcp-globex")
    reader = make_key(settings, "acme", ["memory:read"], name="mcp-acme-reader")
    auditor = make_key(settings, "acme", ["audit:read"], name="mcp-acme-auditor")

    async def go():
        async with http_session(mcp_url, acme) as s:
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS
            pos = await call(s, "remember", user=user, session="s1", content=f"I live in {canary}")

            async def found():
                hits = (await call(s, "recall", user=user, query="where do I live?", after=pos["token"],
                                   wait_s=20))["hits"]
                return [h for h in hits if canary in h["content"]]
            memory_id = (await eventually(found, "acme's canary memory"))[0]["memory_id"]

            async def audited():
                try:
                    return await resource(s, f"memstream://memories/{memory_id}/audit")
                except MCPError:
                    return None
            assert (await eventually(audited, "acme's memory in the audit index"))["user"] == user
            profile = await resource(s, f"memstream://users/{user}/profile")
            assert canary in json.dumps(profile)
            # bad input is a tool error naming the field and the limit (the model can fix it), not a crash
            for content, words in (("x" * (settings.max_content_chars + 1), "MEMSTREAM_MAX_CONTENT_CHARS"),
                                   ("bell\x07", "control characters")):
                bad = await s.call_tool("remember", {"user": user, "content": content})
                assert bad.is_error and words in bad.content[0].text, bad.content[0].text
            bad = await s.call_tool("recall", {"user": user, "query": "x", "after": "not-a-token"})
            assert bad.is_error and "after" in bad.content[0].text

        async with http_session(mcp_url, globex) as s:       # another tenant, the same user id
            hits = (await call(s, "recall", user=user, query="where do I live?"))["hits"]
            assert canary not in json.dumps(hits)
            assert canary not in json.dumps(await resource(s, f"memstream://users/{user}/profile"))
            assert canary not in (await call(s, "build_context", user=user, query="where do I live?"))["text"]
            await refused(s.read_resource(f"memstream://memories/{memory_id}/audit"), NOT_FOUND, "not found")
            await refused(s.call_tool("forget_memory", {"user": user, "memory_id": memory_id}), NOT_FOUND, "not found")

        async with http_session(mcp_url, reader) as s:
            assert canary in json.dumps((await call(s, "recall", user=user, query="where do I live?"))["hits"])
            await refused(s.call_tool("remember", {"user": user, "content": "I like tea"}), FORBIDDEN, "memory:write")
            await refused(s.call_tool("remember_step", {"user": user, "task": "t", "content": "x"}), FORBIDDEN,
                          "memory:write")
            await refused(s.read_resource(f"memstream://memories/{memory_id}/audit"), FORBIDDEN, "audit:read")
            await refused(s.call_tool("forget_memory", {"user": user, "memory_id": memory_id}), FORBIDDEN,
                          "memory:write")
            await refused(s.call_tool("add_memories", {"user": user, "texts": ["x"]}), FORBIDDEN, "memory:write")
            bad = await s.call_tool("recall", {"user": "a/b", "query": "tea"})       # a tenant separator
            assert bad.is_error and "user" in bad.content[0].text
            # an argument the schema refuses: one line naming the field, not pydantic's dump
            bad = await s.call_tool("recall", {"user": user, "query": ""})
            assert bad.is_error and "\n" not in bad.content[0].text and "query" in bad.content[0].text, bad.content[0].text

        async with http_session(mcp_url, auditor) as s:     # audit:read without audit:content: clear fields only
            await refused(s.read_resource(f"memstream://memories/{memory_id}/audit"), FORBIDDEN, "audit:content")
            clear = await resource(s, f"memstream://memories/{memory_id}/audit?content=false")
            assert clear["memory_id"] == memory_id and canary not in json.dumps(clear)
            await refused(s.call_tool("recall", {"user": user, "query": "x"}), FORBIDDEN, "memory:read")
    anyio.run(go)


def test_http_add_list_and_forget_memories_within_the_tenant(settings, mcp_url):
    """add_memories keeps texts as stated with their scope; list_memories filters by it and pages;
    forget_memory deletes with memory:write; the other tenant lists nothing of it."""
    user = unique_user("mcp-res")
    globex = make_key(settings, "globex", name="mcp-globex")
    writer = make_key(settings, "acme", ["memory:read", "memory:write"], name="mcp-acme-writer")

    async def go():
        async with http_session(mcp_url, writer) as s:
            pos = await call(s, "add_memories", user=user, texts=["Prefers aisle seats", "Flies out of Oslo"],
                             agent_id="travel", metadata={"topic": "travel"})
            assert len(pos["positions"]) == 2

            async def both():
                page = await call(s, "list_memories", user=user, after=pos["token"], wait_s=20)
                return page if len(page["memories"]) == 2 else None
            page = await eventually(both, "two stated memories")
            assert {m["agent_id"] for m in page["memories"]} == {"travel"}
            assert (await call(s, "list_memories", user=user, filters={"metadata": {"topic": "other"}}))["memories"] == []
            first = await call(s, "list_memories", user=user, limit=1, filters={"agent_id": "travel"})
            assert len(first["memories"]) == 1 and first["next_cursor"]
            bad = await s.call_tool("list_memories", {"user": user, "filters": {"importance": {"like": 1}}})
            assert bad.is_error and "unknown operator" in bad.content[0].text and "\n" not in bad.content[0].text
            bad = await s.call_tool("add_memories", {"user": user, "texts": []})
            assert bad.is_error and "texts" in bad.content[0].text
        async with http_session(mcp_url, globex) as s:
            assert (await call(s, "list_memories", user=user))["memories"] == []
            await refused(s.call_tool("forget_memory", {"user": user, "memory_id": first["memories"][0]["memory_id"]}),
                          NOT_FOUND, "not found")
        async with http_session(mcp_url, writer) as s:
            gone = await call(s, "forget_memory", user=user, memory_id=first["memories"][0]["memory_id"])

            async def one_left():
                left = (await call(s, "list_memories", user=user, after=gone["token"], wait_s=20))["memories"]
                return left if len(left) == 1 else None
            await eventually(one_left, "the forgotten memory to leave the list")
    anyio.run(go)


def test_http_update_memory_makes_a_new_version(settings, mcp_url):
    """update_memory edits as a new version (the PATCH route's service path): the answer names it, the
    list shows it with the new fields, the old one is superseded in its history; memory:write is
    needed, another tenant's key finds nothing, bad input is one line."""
    user = unique_user("mcp-edit")
    writer = make_key(settings, "acme", ["memory:read", "memory:write"], name="mcp-edit-writer")
    reader = make_key(settings, "acme", ["memory:read"], name="mcp-edit-reader")
    globex = make_key(settings, "globex", ["memory:read", "memory:write"], name="mcp-edit-globex")

    async def go():
        async with http_session(mcp_url, writer) as s:
            pos = await call(s, "add_memories", user=user, texts=["Prefers aisle seats"], metadata={"topic": "travel"})

            async def listed():
                page = await call(s, "list_memories", user=user, after=pos["token"], wait_s=20)
                return page["memories"] or None
            old = (await eventually(listed, "the stated memory"))[0]
            edited = await call(s, "update_memory", user=user, memory_id=old["memory_id"],
                                content="Prefers window seats", metadata={"topic": "flights"})
            assert edited["memory_id"] != old["memory_id"] and edited["token"]
            page = await call(s, "list_memories", user=user, after=edited["token"], wait_s=20)
            assert [(m["memory_id"], m["content"], m["metadata"]) for m in page["memories"]] == [
                (edited["memory_id"], "Prefers window seats", {"topic": "flights"})]
            everything = await call(s, "list_memories", user=user, status="all")
            gone = next(m for m in everything["memories"] if m["memory_id"] == old["memory_id"])
            assert gone["superseded_by"] == edited["memory_id"]
            # metadata cleared, the content kept
            cleared = await call(s, "update_memory", user=user, memory_id=edited["memory_id"], clear_metadata=True)
            page = await call(s, "list_memories", user=user, after=cleared["token"], wait_s=20)
            assert [(m["content"], m["metadata"]) for m in page["memories"]] == [("Prefers window seats", None)]
            # bad input: one line each, never a pydantic dump or "internal error"
            for args, words in (({}, "at least one"), ({"importance": 2}, "importance"),
                                ({"metadata": {"a": {"b": 1}}}, "metadata"),
                                ({"metadata": {"a": "b"}, "clear_metadata": True}, "not both")):
                bad = await s.call_tool("update_memory", {"user": user, "memory_id": cleared["memory_id"], **args})
                text = bad.content[0].text
                assert bad.is_error and words in text and "\n" not in text and "internal" not in text, text
            # an outdated version cannot be edited: its active one can
            bad = await s.call_tool("update_memory", {"user": user, "memory_id": old["memory_id"], "content": "x"})
            assert bad.is_error and "only an active memory" in bad.content[0].text, bad.content[0].text
        async with http_session(mcp_url, reader) as s:
            await refused(s.call_tool("update_memory", {"user": user, "memory_id": cleared["memory_id"],
                                                        "content": "x"}), FORBIDDEN, "memory:write")
        async with http_session(mcp_url, globex) as s:
            await refused(s.call_tool("update_memory", {"user": user, "memory_id": cleared["memory_id"],
                                                        "content": "x"}), NOT_FOUND, "not found")
    anyio.run(go)


def one_line_error(result, *words: str) -> str:
    """A tool error a model can act on: one line naming what is wrong, never 'internal error'."""
    text = result.content[0].text
    assert result.is_error and "\n" not in text and "internal" not in text, text
    assert all(w in text for w in words), text
    return text


def test_http_get_memory_history_and_delete_all(settings, mcp_url):
    """get_memory and memory_history read through the services the HTTP routes use (an edit shows as the
    old version superseded, caused by the statement); delete_all_memories forgets every memory
    (memory:write). Another tenant's key finds none of it, a reader cannot delete."""
    user = unique_user("mcp-hist")
    writer = make_key(settings, "acme", ["memory:read", "memory:write"], name="mcp-hist-writer")
    reader = make_key(settings, "acme", ["memory:read"], name="mcp-hist-reader")
    globex = make_key(settings, "globex", ["memory:read", "memory:write"], name="mcp-hist-globex")

    async def go():
        async with http_session(mcp_url, writer) as s:
            pos = await call(s, "add_memories", user=user, texts=["Prefers aisle seats", "Flies out of Oslo"],
                             metadata={"topic": "travel"})

            async def both():
                page = await call(s, "list_memories", user=user, after=pos["token"], wait_s=20)
                return page["memories"] if len(page["memories"]) == 2 else None
            old = next(m for m in await eventually(both, "two stated memories") if m["content"] == "Prefers aisle seats")
            got = await call(s, "get_memory", user=user, memory_id=old["memory_id"])
            assert (got["user"], got["content"], got["status"], got["metadata"]) == (
                user, "Prefers aisle seats", "active", {"topic": "travel"})
            edited = await call(s, "update_memory", user=user, memory_id=old["memory_id"], content="Prefers window seats")

            async def superseded():
                history = await call(s, "memory_history", user=user, memory_id=old["memory_id"],
                                     after=edited["token"], wait_s=20)
                return history if history["status"] == "outdated" else None
            history = await eventually(superseded, "the edit in the old version's history")
            types = [v["type"] for v in history["versions"]]
            assert types[0] == "memory.created" and "memory.superseded" in types, types
            assert history["user"] == user and history["memory_id"] == old["memory_id"]
            assert (await call(s, "get_memory", user=user, memory_id=old["memory_id"]))["superseded_by"] == \
                edited["memory_id"]
            one_line_error(await s.call_tool("get_memory", {"user": user, "memory_id": "bad id!"}), "memory_id")
        async with http_session(mcp_url, globex) as s:       # the same user id in another tenant: nothing
            await refused(s.call_tool("get_memory", {"user": user, "memory_id": old["memory_id"]}), NOT_FOUND,
                          "not found")
            await refused(s.call_tool("memory_history", {"user": user, "memory_id": old["memory_id"]}), NOT_FOUND,
                          "not found")
        async with http_session(mcp_url, reader) as s:
            await refused(s.call_tool("delete_all_memories", {"user": user}), FORBIDDEN, "memory:write")
        async with http_session(mcp_url, writer) as s:
            gone = await call(s, "delete_all_memories", user=user, reason="user asked")
            assert gone["token"].count(":") == 2

            async def empty():
                page = await call(s, "list_memories", user=user, status="all", after=gone["token"], wait_s=20)
                return page["memories"] == []
            await eventually(empty, "every memory forgotten")
            await refused(s.call_tool("get_memory", {"user": user, "memory_id": edited["memory_id"]}), NOT_FOUND,
                          "not found")
    anyio.run(go)


def test_http_erased_user_and_nul_arguments_are_one_line_tool_errors(settings, mcp_url):
    """Reported: a write for an erased user answered 'internal error' (HTTP: 410), and a NUL in a
    category argument too. Both are one-line tool errors now: the erasure said as such, the NUL naming
    its field (and every other free-text argument that reaches SQL or an event the same way)."""
    from adapters.erasure import erase_user
    from adapters.privacy.tenants import internal_user
    user = unique_user("mcp-erased")
    writer = make_key(settings, "acme", ["memory:read", "memory:write"], name="mcp-erased-writer")

    async def go():
        async with http_session(mcp_url, writer) as s:
            await call(s, "remember", user=user, content="hello")      # the server process now holds the user's key
            erase_user(settings, internal_user("acme", user), requested_by="test")   # another process erases them
            for tool, args in (("remember", {"content": "I like tea"}), ("add_memories", {"texts": ["Likes tea"]}),
                               ("add_memories", {"texts": ["I like tea"], "infer": True}),
                               ("remember_step", {"task": "t", "content": "x"})):
                one_line_error(await s.call_tool(tool, {"user": user, **args}), "erased")
            nul = unique_user("mcp-nul")
            for tool, args, field in (
                    ("recall", {"query": "tea", "categories": ["pre\x00f"]}, "categor"),
                    ("list_memories", {"filters": {"category": "pre\x00f"}}, "category"),
                    ("add_memories", {"texts": ["tea\x00"]}, "text"),
                    ("query_relations", {"predicate": "lives\x00in"}, "predicate"),
                    ("get_entity", {"entity": "A\x00na"}, "entity"),
                    ("forget_memory", {"memory_id": "abc", "reason": "r\x00"}, "reason"),
                    ("delete_all_memories", {"reason": "r\x00"}, "reason")):
                one_line_error(await s.call_tool(tool, {"user": nul, **args}), field)
    anyio.run(go)
