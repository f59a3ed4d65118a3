"""The HTTP API (FastAPI): publish, recall, profile, preferences, task steps, session window, context.

Every query is scoped to one user. A query may pass `after` (the position token a publish
returned) and then waits, up to `wait_s`, until the read models it uses have applied it.
OpenAPI is served at /openapi.json and /docs. Run: `memstream api` (uvicorn).
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from datetime import datetime
from typing import Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, Field

from memstream.config import Settings, get_settings
from memstream.errors import MemstreamError, Timeout
from projections.queries import session_window, task_status, task_steps
from query.consistency import wait_until_applied
from query.context import ContextRequest, build_context
from query.profile import profile
from query.recall import RecallRequest, recall, recalled_event
from query.store import ReadModels

UserId = Field(min_length=1, max_length=200, description="The user every result is scoped to.")
After = Field(None, description="Position token from a publish: wait until it is applied (read your writes).")
AsOf = Field(None, description="Time travel: answer from what memory held at this time (ISO 8601 with timezone; "
                               "replayed from the log, see replay/timetravel.py).")


class Position(BaseModel):
    topic: str
    partition: int
    offset: int
    token: str


class TurnIn(BaseModel):
    user: str = UserId
    session: str = Field(min_length=1)
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1)
    task: str | None = None
    at: AwareDatetime | None = Field(None, description="Event time (default: now).")


class StepIn(BaseModel):
    user: str = UserId
    task: str = Field(min_length=1)
    content: str = Field(min_length=1)
    status: Literal["ok", "failed", "pending"] = "ok"
    kind: str = "step"
    session: str | None = None
    at: AwareDatetime | None = None


class RecallIn(BaseModel):
    user: str = UserId
    query: str = Field(min_length=1)
    k: int = Field(10, ge=1, le=100)
    categories: list[str] | None = Field(None, description="Any of these categories.")
    tags: list[str] | None = Field(None, description="All of these tags.")
    max_age_hours: float | None = Field(None, gt=0)
    min_score: float | None = None
    expand: bool = True
    after: str | None = After
    wait_s: float = Field(5.0, ge=0, le=60)
    as_of: AwareDatetime | None = AsOf


class RecallHitOut(BaseModel):
    memory_id: str
    content: str
    category: str
    tags: list[str]
    importance: float
    created_at: datetime
    score: float
    archived: bool = Field(False, description="An archived (expired) memory, found in the archive tier; recalling it revives it.")
    why: dict


class ContextIn(BaseModel):
    user: str = UserId
    query: str = Field(min_length=1)
    session: str | None = None
    task: str | None = None
    budget: int = Field(1200, ge=50, le=100_000)
    slot_budgets: dict[str, int] = Field(default_factory=dict)
    k: int = Field(8, ge=1, le=50)
    after: str | None = After
    wait_s: float = Field(5.0, ge=0, le=60)


class ContextOut(BaseModel):
    text: str
    slots: dict


RECALL_READS = ("pgvector-items", "neo4j-graph")
PROFILE_READS = ("pgvector-items", "kv-preferences")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        from memstream.sdk import MemoryClient
        state["models"] = ReadModels(settings)
        state["client"] = MemoryClient(settings)
        yield
        state["client"].close()
        state["models"].close()

    app = FastAPI(title="memstream", version="1", lifespan=lifespan,
                  description="Long-term memory for AI agents. Every query is scoped to one user.")

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        # One readable line per problem: where, and what is wrong.
        problems = [f"{'.'.join(str(x) for x in e['loc'] if x != 'body')}: {e['msg']}" for e in exc.errors()]
        return JSONResponse(status_code=400, content={"error": "invalid request", "problems": problems})

    @app.exception_handler(Timeout)
    async def not_yet(request: Request, exc: Timeout):
        return JSONResponse(status_code=503, headers={"Retry-After": "1"}, content={"error": str(exc)})

    @app.exception_handler(MemstreamError)
    async def domain_error(request: Request, exc: MemstreamError):
        return JSONResponse(status_code=400, content={"error": str(exc)})

    def models() -> ReadModels:
        return state["models"]

    def wait(after: str | None, reads: tuple[str, ...], wait_s: float) -> None:
        if after:
            wait_until_applied(models(), after, reads, timeout=wait_s)

    @app.post("/v1/turns", response_model=Position, status_code=201, summary="Publish a conversation turn")
    def publish_turn(body: TurnIn) -> dict:
        return state["client"].record_turn(body.user, body.session, body.role, body.content, task=body.task,
                                           at=body.at).as_dict()

    @app.post("/v1/steps", response_model=Position, status_code=201, summary="Publish a task step")
    def publish_step(body: StepIn) -> dict:
        return state["client"].record_step(body.user, body.task, body.content, status=body.status, kind=body.kind,
                                           session=body.session, at=body.at).as_dict()

    @app.post("/v1/recall", response_model=list[RecallHitOut], summary="Recall memories relevant to a query")
    def recall_route(body: RecallIn) -> list[dict]:
        wait(body.after, RECALL_READS, body.wait_s)
        req = RecallRequest(body.user, body.query, body.k, body.categories, body.tags, body.max_age_hours,
                            body.min_score, body.expand)
        if body.as_of is not None:  # reading the past is not a use of the memories: nothing is published
            from replay.timetravel import recall_as_of
            return [h.as_dict() for h in recall_as_of(models(), req, body.as_of)]
        hits = recall(models(), req)
        # One memory.recalled per call (fire and forget: the answer never waits for it); the memory
        # processor refreshes the returned memories' access from it.
        event = recalled_event(hits, "api")
        if event is not None:
            state["client"].publish_nowait("memory", event, user=body.user)
        return [h.as_dict() for h in hits]

    @app.get("/v1/users/{user}/profile", summary="Identity, preferences and policies, by category")
    def profile_route(user: str, after: str | None = None, wait_s: float = 5.0, as_of: datetime | None = None) -> dict:
        wait(after, PROFILE_READS, wait_s)
        if as_of is not None:
            from replay.timetravel import profile_as_of
            return profile_as_of(settings, user, as_of)
        return profile(models(), user)

    @app.get("/v1/users/{user}/preferences", summary="The key-value preference table")
    def preferences_route(user: str, after: str | None = None, wait_s: float = 5.0, as_of: datetime | None = None) -> dict:
        wait(after, ("kv-preferences",), wait_s)
        if as_of is not None:
            from replay.timetravel import profile_as_of
            return profile_as_of(settings, user, as_of)["preferences"]
        return profile(models(), user)["preferences"]

    @app.get("/v1/audit/memories/{memory_id}", summary="A memory's whole life, with causation chains")
    def audit_memory_route(memory_id: str, content: bool = True) -> dict:
        from replay.audit import NotFound, memory_audit
        try:
            return memory_audit(settings, memory_id, content=content)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/v1/audit/users/{user}", summary="A user's timeline: every indexed event, oldest first")
    def audit_user_route(user: str, content: bool = False, limit: int = 1000, since: datetime | None = None,
                         until: datetime | None = None) -> dict:
        from replay.audit import user_timeline
        if not 1 <= limit <= 100_000:
            raise HTTPException(400, "limit must be between 1 and 100000")
        return user_timeline(settings, user, content=content, limit=limit, since=since, until=until)

    @app.get("/v1/users/{user}/tasks/{task}/steps", summary="The last k steps of a task")
    def steps_route(user: str, task: str, k: int = 20, after: str | None = None, wait_s: float = 5.0) -> dict:
        if not 1 <= k <= settings.task_buffer_size:
            raise HTTPException(400, f"k must be between 1 and {settings.task_buffer_size} (the ring buffer size)")
        wait(after, ("task-buffers",), wait_s)
        return {"task": task_status(settings, user, task), "steps": task_steps(settings, user, task, k)}

    @app.get("/v1/users/{user}/sessions/{session}", summary="The session window (recent messages)")
    def session_route(user: str, session: str, after: str | None = None, wait_s: float = 5.0) -> dict:
        wait(after, ("session-windows",), wait_s)
        return session_window(settings, user, session, with_summary=True)

    @app.post("/v1/context", response_model=ContextOut, summary="Assemble prompt context within a token budget")
    async def context_route(body: ContextIn) -> dict:
        if body.after:
            import asyncio
            await asyncio.to_thread(wait, body.after, RECALL_READS + PROFILE_READS, body.wait_s)
        unknown = set(body.slot_budgets) - {"constraints", "profile", "recall", "task", "tool_state", "recent"}
        if unknown:
            raise HTTPException(400, f"unknown slot(s) in slot_budgets: {sorted(unknown)}")
        return await build_context(models(), ContextRequest(body.user, body.query, body.session, body.task,
                                                             body.budget, body.slot_budgets, body.k))

    return app
