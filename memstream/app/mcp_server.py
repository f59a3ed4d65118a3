"""The MCP server: memstream's memory as tools and resources for an agent, over stdio or streamable HTTP.

Built on the official `mcp` SDK (v2, `MCPServer`), the optional extra `.[mcp]`. `memstream mcp`
serves it: `--transport stdio` (default; an MCP host starts it as a subprocess) or `--transport
http` (streamable HTTP at `/mcp`, port MEMSTREAM_MCP_PORT).

The trust boundary is the HTTP API's (adapters/privacy/tenants.py, apikeys.py): the same API keys,
tenants, scopes and end-user binding, verified by the same ApiKeys cache.
- streamable HTTP: every request carries its key (`Authorization: Bearer <key>` or `X-API-Key`);
  none, or an unknown or revoked one, is an HTTP 401 before MCP sees the request. The server is
  stateless (each request stands alone), so any process can answer any request, as with the API.
- stdio: the process acts with one key, MEMSTREAM_API_KEY or else the local admin key `stack up`
  wrote (as the HTTP SDK finds it); none, or an unknown one, and it refuses to start. It is still
  checked on every call, so a revoked key stops working within MEMSTREAM_API_KEY_CACHE_S.
A key without a tool's scope gets a JSON-RPC error naming the scope (FORBIDDEN); a user or memory
outside the key's reach (another tenant's memory id, another user than the key's bound one) is
NOT_FOUND, as if it did not exist. Bad arguments and retryable conditions (not applied yet, a store
down) are tool errors (`isError` results) with one clear line, so the model can correct or retry;
nothing carries internals.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from kernel.config import Settings
from kernel.errors import (ConfigError, InvalidEvent, InvalidInput, MemstreamError, MissingScope, NotAuthenticated,
                              RateLimited, Timeout, UserErased)
from adapters.privacy.tenants import NotYours, Principal, local_api_key
from services import audit, context, forget, memories, profile as profiles, recall as recalls
from services import relations as relational
from services import remember as remembering   # (the tools are named remember, recall)
from services.access import authenticate
from services.backend import Backend

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
except ImportError:                      # the optional extra is not installed: `memstream mcp` says so
    MCPServer = None
from pydantic import ValidationError

from memstream.app.api import TOKEN_PATTERN, ApiUserId, IsoTime
from schemas.events import Category
from schemas.limits import AgentId, Label, Metadata, RunId, SessionId, TaskId, check_content, check_id

log = logging.getLogger("memstream.mcp")

# JSON-RPC error codes of the trust boundary, in the implementation-defined band (-32000..-32019,
# the SDK itself uses -32000 and -32001): the MCP counterparts of the API's 401, 403 and 404.
UNAUTHORIZED, FORBIDDEN, NOT_FOUND = -32010, -32011, -32012

INSTRUCTIONS = """\
Long-term memory for the user you are helping (memstream). Publish what happens with `remember`
(conversation turns) and `remember_step` (task steps); memstream extracts facts from them in the
background, so a new memory appears a moment later. Read with `recall` (memories relevant to a
question), `get_profile` (who the user is: identity, preferences, constraints) or `build_context`
(everything relevant, assembled into one prompt-ready text within a token budget). Every call names
the user; ids are your own (any printable text without '/'). To read your own write, pass the
`token` a remember call returned as `after`. Manage memories with `add_memories` (kept as stated),
`list_memories`, `get_memory`, `memory_history` (its versions and what caused each), `update_memory`,
`forget_memory` and `delete_all_memories`. People and places the user mentioned, and how
they relate (relational memory): `list_entities`, `get_entity` (by id, 'self', a name or 'role:sister'),
`query_relations` (e.g. subject='role:sister', predicate='lives_in': "where does my sister live") and
`relation_path` (how two entities connect); each answers sentences first, then the rows. Resources: memstream://users/{user}/profile and
memstream://memories/{memory_id}/audit (a memory's whole life, down to the turns it came from)."""

AfterArg = Annotated[str | None, Field(pattern=TOKEN_PATTERN, description=(
    "The `token` a remember call returned: wait (up to wait_s) until memory has applied it, to read your own write."))]
WaitArg = Annotated[float, Field(ge=0, le=30, description="Most seconds to wait for `after` (0-30).")]
UserArg = Annotated[ApiUserId, Field(description="The user the memory belongs to (your own id for them).")]
MemoryIdArg = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_-]+$",
                                   description="A memory id, as recall or the profile returned it.")]
EntityArg = Annotated[str, Field(min_length=1, max_length=300, description=(
    "An entity: its id, 'self' (the user), a name or alias, or 'role:<word>' (e.g. 'role:sister': whoever "
    "the user's sister is).")), AfterValidator(lambda v: check_id(v, "entity"))]
# Free-text arguments that reach SQL as parameters: printable, as on the API (a NUL would make
# Postgres refuse the query, which must read as bad input naming the field, not an internal error).
CategoryFilter = Annotated[str, Field(max_length=200), AfterValidator(lambda v: check_id(v, "category"))]
PredicateArg = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z_]+$", description=(
    "A relation's predicate, e.g. lives_in, sister_of."))]
MemoryText = Annotated[str, Field(min_length=1), AfterValidator(lambda v: check_content(v, "text"))]
ReasonArg = Annotated[str, Field(max_length=500, description="Why (kept in the audit)."),
                      AfterValidator(lambda v: check_content(v, "reason"))]
AsOfArg = Annotated[IsoTime | None, Field(description=(
    "Answer with the relations that held at this time (ISO 8601 with timezone); default now."))]


def key_from_headers(headers) -> str | None:
    """The API key of an HTTP request, read as the HTTP API reads it."""
    if not headers:
        return None
    auth = headers.get("authorization") or ""
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return (headers.get("x-api-key") or "").strip() or None


async def verify(backend: Backend, token: str | None, *scopes: str, client: str | None = None,
                 limit: bool = True) -> Principal:
    """The key's principal when it holds `scopes` (services/access.py, the API's check), refusals
    as the JSON-RPC errors of the trust boundary. `limit`: charge the rate limits (over HTTP the
    key gate already did, once per request)."""
    try:
        return await authenticate(backend, token, *scopes, client=client, limit=limit)
    except NotAuthenticated as exc:
        raise MCPError(UNAUTHORIZED, str(exc)) from None
    except MissingScope as exc:
        raise MCPError(FORBIDDEN, str(exc)) from None


def _retryable(exc: Exception) -> str | None:
    from adapters.resilience import TRANSIENT, classify
    if isinstance(exc, Timeout):
        return str(exc)
    if classify(exc) == TRANSIENT:
        log.warning("a backing service is unavailable: %r", exc)
        return "a backing service is unavailable; retry later"
    return None


def _tool(fn):
    """Tool errors, as the HTTP API answers them: the trust boundary's refusals are JSON-RPC errors;
    bad input and retryable conditions are one-line tool errors; anything else is a generic error
    (logged here) — never a traceback or a store's message in the answer."""
    @functools.wraps(fn)
    async def guarded(*args, **kwargs):
        try:
            return _structured(await fn(*args, **kwargs))
        except (MCPError, ToolError):
            raise
        except NotYours:
            raise MCPError(NOT_FOUND, "not found") from None
        except (InvalidInput, InvalidEvent) as exc:
            raise ToolError(f"invalid input: {exc}") from None
        except UserErased:
            raise ToolError("this user was erased; nothing can be recorded for them") from None
        except ValidationError as exc:      # an event built from the arguments refused them (schemas/events.py)
            raise ToolError(f"invalid input: {_one_line(exc)}") from None
        except relational.UnknownEntity as exc:
            raise ToolError(f"unknown entity: {exc}") from None
        except Exception as exc:
            message = _retryable(exc)
            if message is None:
                log.exception("tool %s failed", fn.__name__)
                message = "internal error"
            raise ToolError(message) from None
    return guarded


def _resource(fn):
    """_tool for resources: every failure is a JSON-RPC error (a resource has no error result)."""
    @functools.wraps(fn)
    async def guarded(*args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except MCPError:
            raise
        except NotYours:
            raise MCPError(NOT_FOUND, "not found") from None
        except (InvalidInput, InvalidEvent) as exc:
            raise MCPError(INVALID_PARAMS, f"invalid input: {exc}") from None
        except Exception as exc:
            message = _retryable(exc)
            if message is None:
                log.exception("resource %s failed", fn.__name__)
                message = "internal error"
            raise MCPError(-32603, message) from None
    return guarded


def _json(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v))


def _structured(result):
    """A tool's answer as structured content (what a client parses) plus the same as compact JSON
    text (what a model reads: no indentation to pay tokens for)."""
    if not isinstance(result, dict):
        return result
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"),
                      default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v))
    # the structured content is the text read back: times as ISO text, exactly as the text shows them
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))


def _answered(result: dict, sentences: list[str]) -> CallToolResult:
    """A relational answer: its sentences first ("Ana is the user's sister; Ana lives in Rome"),
    what a model reads, then the same compact JSON as any tool; structured content as _structured."""
    out = _structured(result)
    lead = "; ".join(s for s in sentences if s) or "nothing found"
    out.content = [TextContent(type="text", text=lead + "\n" + out.content[0].text)]
    return out


def _from_alias(fn):
    """The SDK passes an aliased argument by its alias: `from` (a Python keyword) reaches `from_`."""
    @functools.wraps(fn)
    async def renamed(*args, **kwargs):
        if "from" in kwargs:
            kwargs["from_"] = kwargs.pop("from")
        return await fn(*args, **kwargs)
    return renamed


def _one_line(exc: ValidationError) -> str:
    """Argument problems, one per field, on one line (never pydantic's multi-line dump, nor the values:
    they are the caller's data)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors())


if MCPServer is not None:
    class _Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                    raise ToolError(f"invalid input: {_one_line(exc.__cause__)}") from exc.__cause__
                raise


def create_server(backend: Backend, transport: Literal["stdio", "http"], stdio_key: str | None = None) -> "MCPServer":
    """The MCP server over `backend`. Over stdio every call acts with `stdio_key`; over HTTP with the
    request's own key (never the local one: a remote caller must not borrow the operator's key)."""
    if MCPServer is None:
        raise ConfigError("the MCP server needs the optional extra: pip install 'memstream[mcp]'")
    server = _Server("memstream", title="memstream: long-term memory", instructions=INSTRUCTIONS, version="1",
                       log_level="WARNING")

    async def caller(ctx: Context, *scopes: str) -> Principal:
        if transport == "stdio":
            return await verify(backend, stdio_key, *scopes)
        return await verify(backend, key_from_headers(ctx.headers), *scopes, limit=False)   # KeyGate charged it

    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    # -- tools ----------------------------------------------------------------------------------
    @server.tool(annotations=writes, description=(
        "Remember a conversation turn: publish what the user (or you) said, so memstream can learn from it. "
        "Facts are extracted in the background (name, location, likes, constraints, …) and become memories a "
        "moment later. Returns a position `token`: pass it as `after` to recall/get_profile/build_context to read "
        "this write. Needs scope memory:write."))
    @_tool
    async def remember(user: UserArg, content: Annotated[str, Field(min_length=1, description="What was said, verbatim.")],
                       ctx: Context,
                       session: Annotated[SessionId, Field(description="The conversation it belongs to.")] = "default",
                       role: Annotated[Literal["user", "assistant", "system", "tool"],
                                       Field(description="Who said it.")] = "user",
                       task: Annotated[TaskId | None, Field(description="The task it belongs to, if any.")] = None,
                       at: Annotated[IsoTime | None, Field(description="When it was said (ISO 8601 with timezone); "
                                                                       "default now.")] = None) -> dict:
        p = await caller(ctx, "memory:write")
        return (await remembering.turn(backend, p, user, session, role, content, task=task, at=at)).as_dict()

    @server.tool(annotations=writes, description=(
        "Remember a step of a task you are working on (an action, a tool call, an observation) and whether it "
        "worked. The task's recent steps show up in build_context, and failures are remembered. Returns a position "
        "`token` (see remember). Needs scope memory:write."))
    @_tool
    async def remember_step(user: UserArg, task: Annotated[TaskId, Field(description="The task's id.")],
                            content: Annotated[str, Field(min_length=1, description="What was done or seen.")],
                            ctx: Context,
                            status: Annotated[Literal["ok", "failed", "pending"],
                                              Field(description="How the step went.")] = "ok",
                            kind: Annotated[Label, Field(description="The kind of step, e.g. step, tool, observation.")] = "step",
                            session: SessionId | None = None, at: IsoTime | None = None) -> dict:
        p = await caller(ctx, "memory:write")
        return (await remembering.step(backend, p, user, task, content, status=status, kind=kind, session=session,
                                       at=at)).as_dict()

    @server.tool(annotations=reads, description=(
        "Recall the user's memories most relevant to a question or topic (semantic + keyword search, ranked, with "
        "related memories from the memory graph). Each hit has memory_id, content, category, importance, score. "
        "Use it before answering anything that depends on what the user told you before. Needs scope memory:read."))
    @_tool
    async def recall(user: UserArg, query: Annotated[str, Field(min_length=1, max_length=4000,
                                                                description="The question or topic, in words.")],
                     ctx: Context, k: Annotated[int, Field(ge=1, le=100, description="Most hits wanted.")] = 10,
                     categories: Annotated[list[CategoryFilter] | None, Field(
                         max_length=20, description="Only these categories (e.g. identity, preference, policy).")] = None,
                     filters: Annotated[dict | None, Field(description=(
                         "Mem0-style filters, e.g. {\"agent_id\": \"travel\"} or {\"metadata\": {\"topic\": "
                         "\"work\"}}; and/or, eq ne in nin gt gte lt lte."))] = None,
                     after: AfterArg = None, wait_s: WaitArg = 5.0) -> dict:
        p = await caller(ctx, "memory:read")
        hits = await recalls.recall(backend, p, user, query, channel="mcp", k=k, categories=categories, after=after,
                                    wait_s=wait_s, filters=filters)
        return {"hits": [h.as_dict() for h in hits]}

    @server.tool(annotations=reads, description=(
        "Build prompt context for answering the user: their constraints, profile, relevant memories, the task so "
        "far and the recent conversation, fitted to a token budget. Returns `text` (ready to put in a prompt) and "
        "per-slot accounting. Needs scope memory:read."))
    @_tool
    async def build_context(user: UserArg, query: Annotated[str, Field(min_length=1, max_length=4000,
                                                                       description="What is being asked now.")],
                            ctx: Context, session: SessionId | None = None, task: TaskId | None = None,
                            budget: Annotated[int, Field(ge=50, le=100_000, description="Token budget.")] = 1200,
                            k: Annotated[int, Field(ge=1, le=50)] = 8,
                            after: AfterArg = None, wait_s: WaitArg = 5.0) -> dict:
        p = await caller(ctx, "memory:read")
        return await context.context(backend, p, user, query, session=session, task=task, budget=budget, k=k,
                                     after=after, wait_s=wait_s)

    @server.tool(annotations=reads, description=(
        "Read who the user is: every active identity, preference and policy (constraint) memory, and the key-value "
        "preference table (e.g. name, location, likes:<thing>). Needs scope memory:read."))
    @_tool
    async def get_profile(user: UserArg, ctx: Context, after: AfterArg = None, wait_s: WaitArg = 5.0) -> dict:
        return await _profile(ctx, user, after, wait_s)

    async def _profile(ctx: Context, user: str, after: str | None, wait_s: float) -> dict:
        p = await caller(ctx, "memory:read")
        return await profiles.profile(backend, p, user, after=after, wait_s=wait_s)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                             open_world_hint=False), description=(
        "Forget one memory for good (and every memory merged into it): a hard delete from every read model, "
        "recorded in the log. Only when the user asks for it. Needs scope memory:write."))
    @_tool
    async def forget_memory(user: UserArg, memory_id: MemoryIdArg, ctx: Context,
                            reason: ReasonArg = "") -> dict:
        p = await caller(ctx, "memory:write")
        return await forget.memory(backend, p, user, memory_id, requested_by=f"mcp:{p.key_id}", reason=reason)

    @server.tool(annotations=writes, description=(
        "Add memories directly. infer=false keeps each text as stated (one memory each: use it for what the user "
        "asked you to remember, e.g. 'Prefers metric units'); infer=true extracts facts from each text as from "
        "something the user said. Either way memstream dedups, checks conflicts and supersedes older values. "
        "Optional agent_id, run_id and flat metadata scope them (list_memories filters by them). Returns a "
        "position `token` (see remember). Needs scope memory:write."))
    @_tool
    async def add_memories(user: UserArg, texts: Annotated[list[MemoryText], Field(
                               min_length=1, max_length=100, description="One memory (or message) per item, in order.")],
                           ctx: Context, infer: bool = False, category: Category | None = None,
                           importance: Annotated[float | None, Field(ge=0, le=1)] = None,
                           agent_id: AgentId | None = None, run_id: RunId | None = None,
                           metadata: Metadata | None = None, session: SessionId | None = None) -> dict:
        p = await caller(ctx, "memory:write")
        if infer and (category is not None or importance is not None):
            raise InvalidInput("category and importance apply to infer=false (kept as stated)")
        positions = await memories.add(backend, p, user, messages=[{"role": "user", "content": t} for t in texts],
                                       infer=infer, category=category, importance=importance, agent_id=agent_id,
                                       run_id=run_id, metadata=metadata, session=session)
        return {**positions[-1].as_dict(), "positions": [x.as_dict() for x in positions]}

    @server.tool(annotations=writes, description=(
        "Edit one of the user's memories as a new version (what PATCH /v1/users/{user}/memories/{memory_id} does): "
        "give at least one of content, category, importance, metadata (replaces the old object; clear_metadata "
        "removes it); the rest stay the memory's own. The edited memory stays in the history, outdated by the new "
        "version, which is re-embedded and checked for conflicts. Returns a position `token` (see remember) and "
        "`memory_id`, the new version's id. Only an active memory can be edited (list_memories gives the ids). "
        "Needs scope memory:write."))
    @_tool
    async def update_memory(user: UserArg, memory_id: MemoryIdArg, ctx: Context,
                            content: Annotated[str | None, Field(min_length=1, description="The new text.")] = None,
                            category: Category | None = None,
                            importance: Annotated[float | None, Field(ge=0, le=1)] = None,
                            metadata: Annotated[Metadata | None, Field(description=(
                                "The new flat metadata, replacing the old."))] = None,
                            clear_metadata: Annotated[bool, Field(description="Remove the memory's metadata.")] = False
                            ) -> dict:
        p = await caller(ctx, "memory:write")
        if clear_metadata and metadata is not None:
            raise InvalidInput("give metadata or clear_metadata, not both")
        changes: dict = {k: v for k, v in (("content", content), ("category", category), ("importance", importance),
                                           ("metadata", metadata)) if v is not None}
        if clear_metadata:
            changes["metadata"] = None
        if not changes:
            raise InvalidInput("give at least one of content, category, importance, metadata, clear_metadata")
        return await memories.edit(backend, p, user, memory_id, **changes)

    @server.tool(annotations=reads, description=(
        "List the user's memories, oldest first, with their ids (to update or forget one): optionally only a "
        "status (active, archived, superseded, merged, all), a category, an agent_id or run_id, or Mem0-style "
        "`filters` ({\"metadata\": {\"topic\": \"travel\"}}, {\"and\": [...]}, {\"importance\": {\"gte\": 0.5}}). "
        "Pass `next_cursor` as `cursor` for the next page. Needs scope memory:read."))
    @_tool
    async def list_memories(user: UserArg, ctx: Context,
                            status: Literal["active", "archived", "superseded", "merged", "all"] = "active",
                            category: Category | None = None, agent_id: AgentId | None = None,
                            run_id: RunId | None = None, filters: dict | None = None,
                            cursor: Annotated[str | None, Field(pattern=memories.CURSOR_PATTERN)] = None,
                            limit: Annotated[int, Field(ge=1, le=200)] = 50,
                            after: AfterArg = None, wait_s: WaitArg = 5.0) -> dict:
        p = await caller(ctx, "memory:read")
        return await memories.page(backend, p, user, status=status, category=category, agent_id=agent_id,
                                   run_id=run_id, filters=filters, cursor=cursor, limit=limit, after=after,
                                   wait_s=wait_s)

    @server.tool(annotations=reads, description=(
        "One of the user's memories by id, with its current fields (content, category, importance, status, "
        "superseded_by, agent_id, run_id, metadata, times), whatever its status. Another user's memory, or none, "
        "is not found. Needs scope memory:read."))
    @_tool
    async def get_memory(user: UserArg, memory_id: MemoryIdArg, ctx: Context,
                         after: AfterArg = None, wait_s: WaitArg = 5.0) -> dict:
        p = await caller(ctx, "memory:read")
        return await memories.one(backend, p, user, memory_id, after=after, wait_s=wait_s)

    @server.tool(annotations=reads, description=(
        "A memory's versions, oldest first: every event that created or changed it (created, reinforced, "
        "superseded, merged, edited, decayed, forgotten, ...) with what it set and what caused it, and the turns it "
        "came from (`origin`). What GET /v1/users/{user}/memories/{memory_id}/history answers. Needs scope "
        "memory:read."))
    @_tool
    async def memory_history(user: UserArg, memory_id: MemoryIdArg, ctx: Context,
                             after: AfterArg = None, wait_s: WaitArg = 5.0) -> dict:
        p = await caller(ctx, "memory:read")
        return await memories.history(backend, p, user, memory_id, after=after, wait_s=wait_s)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                             open_world_hint=False), description=(
        "Forget ALL of the user's memories for good (user.forgotten): memories, preferences and the memory graph "
        "go; the conversation windows stay and new turns build new memory. Only when the user asks for it. "
        "Returns a position `token` (see remember). Needs scope memory:write."))
    @_tool
    async def delete_all_memories(user: UserArg, ctx: Context,
                                  reason: ReasonArg = "") -> dict:
        p = await caller(ctx, "memory:write")
        return (await forget.user(backend, p, user, requested_by=f"mcp:{p.key_id}", reason=reason)).as_dict()

    # -- relational memory (#26): services/relations.py, as the HTTP routes ---------------------

    @server.tool(annotations=reads, description=(
        "List the people, places, organisations and things the user mentioned (entities), each with its current "
        "relations to the user (e.g. 'Ana is the user's sister'). Optional `type` filters (person, place, ...). "
        "Needs scope memory:read."))
    @_tool
    async def list_entities(user: UserArg, ctx: Context, type: str | None = None,
                            after: AfterArg = None, wait_s: WaitArg = 5.0) -> CallToolResult:
        p = await caller(ctx, "memory:read")
        out = await relational.entities(backend, p, user, type, after=after, wait_s=wait_s)
        return _answered(out, [r["text"] for e in out["entities"] for r in e["relations_to_user"]])

    @server.tool(annotations=reads, description=(
        "One entity with all its relations both ways, current and ended with their validity (with `as_of`, those "
        "holding then). `entity` is an id, 'self', a name or 'role:<word>'. Needs scope memory:read."))
    @_tool
    async def get_entity(user: UserArg, entity: EntityArg, ctx: Context, as_of: AsOfArg = None,
                         after: AfterArg = None, wait_s: WaitArg = 5.0) -> CallToolResult:
        p = await caller(ctx, "memory:read")
        out = await relational.entity(backend, p, user, entity, as_of, after=after, wait_s=wait_s)
        return _answered(out, [r["text"] for r in out["relations"] if r["current"] or as_of is not None])

    @server.tool(annotations=reads, description=(
        "Relations holding now (or at `as_of`) under filters: `predicate` (e.g. lives_in, sister_of), `group` "
        f"({', '.join(relational.GROUPS)}), `subject` and `object` (entity references: id, 'self', name or "
        "'role:<word>'). 'Where does my sister live?' is subject='role:sister', predicate='lives_in'. The answer "
        "reads as sentences first. Needs scope memory:read."))
    @_tool
    async def query_relations(user: UserArg, ctx: Context, predicate: PredicateArg | None = None,
                              group: str | None = None,
                              subject: EntityArg | None = None, object: EntityArg | None = None,
                              as_of: AsOfArg = None, after: AfterArg = None, wait_s: WaitArg = 5.0) -> CallToolResult:
        p = await caller(ctx, "memory:read")
        out = await relational.relations(backend, p, user, predicate=predicate, group=group, subject=subject,
                                         obj=object, as_of=as_of, after=after, wait_s=wait_s)
        return _answered(out, [out["answer"] or ""])

    @server.tool(annotations=reads, description=(
        f"How two entities connect: the shortest chain of relations from `from` to `to` (1-{relational.MAX_HOPS} "
        "hops), now or at `as_of`, e.g. from='self' to='Rome'. Needs scope memory:read."))
    @_tool
    @_from_alias
    async def relation_path(user: UserArg, ctx: Context,
                            from_: Annotated[EntityArg, Field(alias="from")],
                            to: EntityArg,
                            max_hops: Annotated[int, Field(ge=1, le=relational.MAX_HOPS)] = relational.MAX_HOPS,
                            as_of: AsOfArg = None, after: AfterArg = None, wait_s: WaitArg = 5.0) -> CallToolResult:
        p = await caller(ctx, "memory:read")
        out = await relational.path(backend, p, user, from_, to, max_hops, as_of, after=after, wait_s=wait_s)
        return _answered(out, [out["answer"] or f"no path from {from_} to {to}"])

    # -- resources ------------------------------------------------------------------------------
    @server.resource("memstream://users/{user}/profile", name="profile", mime_type="application/json", description=(
        "The user's profile: identity, preferences and policies by category, and the key-value preference table. "
        "Needs scope memory:read."))
    @_resource
    async def profile_resource(user: str, ctx: Context) -> str:
        from schemas.limits import check_id
        check_id(user, "user")      # the input contract; '/' is refused by Principal.internal, as on the API
        return _json(await _profile(ctx, user, None, 0))

    @server.resource("memstream://memories/{memory_id}/audit{?content}", name="memory-audit",
                     mime_type="application/json", description=(
        "A memory's whole life: every event that created, reinforced, linked, merged, superseded or forgot it, each "
        "with its causation chain down to the turns it came from. Decrypted content needs scope audit:content as well "
        "as audit:read; `?content=false` gives the clear fields alone."))
    @_resource
    async def audit_resource(memory_id: str, ctx: Context, content: str = "true") -> str:
        import re

        with_content = content.lower() not in ("false", "0", "no")
        p = await caller(ctx, "audit:read", *(("audit:content",) if with_content else ()))
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,200}", memory_id):
            raise InvalidInput("memory_id: letters, digits, '_' and '-', 1-200 characters")
        return _json(await audit.memory_life(backend, p, memory_id, content=with_content))

    return server


# -- serving --------------------------------------------------------------------------------------

class KeyGate:
    """Streamable HTTP: a request without a valid API key is an HTTP 401 (as on the API) before the
    MCP transport reads it; the tools then take the same key from the request for its scopes."""

    def __init__(self, app, backend: Backend):
        self.app, self.backend = app, backend

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            from starlette.datastructures import Headers
            from starlette.responses import JSONResponse
            client = scope.get("client")
            try:
                await verify(self.backend, key_from_headers(Headers(scope=scope)), client=client[0] if client else None)
            except MCPError as exc:
                return await JSONResponse({"error": exc.error.message}, status_code=401,
                                          headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            except RateLimited as exc:     # services/rate_limits.py: as the API answers it
                return await JSONResponse({"error": str(exc)}, status_code=429,
                                          headers={"Retry-After": str(exc.retry_after_s)})(scope, receive, send)
        await self.app(scope, receive, send)


def serve(settings: Settings, transport: Literal["stdio", "http"] = "stdio", host: str | None = None,
          port: int | None = None) -> None:
    if MCPServer is None:
        raise ConfigError("the MCP server needs the optional extra: pip install 'memstream[mcp]'")
    stdio_key = None
    if transport == "stdio":
        stdio_key = local_api_key(settings)
        if not stdio_key:
            raise MemstreamError("no API key: set MEMSTREAM_API_KEY, or run `memstream stack up` for the local admin key")
    backend = Backend(settings)       # opens its stores on first use
    try:
        if transport == "stdio":
            # Refuse to start with a key that would refuse every call (the MCP host shows this line),
            # before opening the other stores.
            try:
                asyncio.run(authenticate(backend, stdio_key))
            except NotAuthenticated:
                raise MemstreamError("MEMSTREAM_API_KEY (or the local key file) is an unknown or revoked API key") from None
        backend.open()
        if transport == "stdio":
            logging.basicConfig(stream=sys.stderr, level=logging.WARNING)   # stdout is the protocol's
            create_server(backend, "stdio", stdio_key).run("stdio")
        else:
            import uvicorn
            app = create_server(backend, "http").streamable_http_app(
                stateless_http=True, json_response=True, max_request_body_size=settings.max_body_bytes,
                host=host or settings.api_host)
            uvicorn.run(KeyGate(app, backend), host=host or settings.api_host, port=port or settings.mcp_port,
                        log_level="warning", timeout_graceful_shutdown=5)
    finally:
        backend.close()
