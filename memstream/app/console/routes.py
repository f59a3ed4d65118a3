"""The console's routes: server-rendered HTML under /console, behind the API's keys and scopes.

memory:read   users' memories and memory graphs
audit:read    a memory's timeline (+ audit:content for its decrypted text)
admin         the dead-letter topic (the tenant's own users' letters); projector positions (replay
              status) only for the stack's operator (services/operator_view.py sees_stack)
Tenants as on the API: a user or memory of another tenant (or not the key's bound user) is a 404.
Bad input is a 4xx page, never a 500: every text a route hands to a store is checked first (a NUL,
which Postgres refuses in text, or any control character is a 422 naming the parameter, the
status the console and the API answer every bad input with).
Every state-changing POST (sign in, sign out) must come from the console's own origin
(auth.py same_origin): a cross-site form cannot sign a browser in with the attacker's key.
Every page is sent with a Content-Security-Policy that allows no script at all, so even a value
that escaped escaping could not run; the templates escape every value anyway (templates.py).
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memstream.app.console.auth import (COOKIE, COOKIE_MAX_AGE_S, COOKIE_PATH, Refused, check_user, principal_of,
                                        require, same_origin)
from memstream.app.console.graph_svg import entity_layout, layout
from memstream.app.console.templates import CSS, render
from adapters.privacy.tenants import NotYours
from kernel.errors import InvalidInput, MissingScope
from services import audit, memories as memory_lists, operator_view, relations as relational
from schemas.limits import check_content, check_id

HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; "
                                      "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
           "X-Frame-Options": "DENY"}
MemoryId = Annotated[str, Path(max_length=200, pattern=r"^[A-Za-z0-9_-]+$")]
UserPath = Annotated[str, Path(min_length=1, max_length=200)]


def page(name: str, code: int = 200, **ctx) -> HTMLResponse:
    p = ctx.get("p")
    ctx.setdefault("stack", p is not None and operator_view.sees_stack(p))   # the replay link
    return HTMLResponse(render(name, **ctx), status_code=code, headers=HEADERS)


def refused(request: Request, exc: Refused) -> Response:
    """A refused request as a page: the login form for 401 (browsers are sent there), else an error."""
    if exc.login and request.method == "GET" and request.url.path != "/console/login":
        resp = page("login", 401, title="sign in", p=None, error=exc.message)
        if request.cookies.get(COOKIE):            # a revoked key in the cookie: forget it
            resp.delete_cookie(COOKIE, path=COOKIE_PATH)
        return resp
    return page("error", exc.status, title=f"{exc.status}", p=None, message=exc.message)


def router(settings, state: dict) -> APIRouter:
    """`state` is the API's (create_app): its services Backend ("backend"), opened in its lifespan,
    so the console shares the API's connection pools and key cache."""
    r = APIRouter(prefix="/console", include_in_schema=False)

    def backend():
        return state["backend"]

    @r.get("/static/console.css")
    def css() -> Response:
        return Response(CSS, media_type="text/css", headers={"Cache-Control": "max-age=3600",
                                                              "X-Content-Type-Options": "nosniff"})

    @r.get("/login")
    def login_form() -> HTMLResponse:
        return page("login", title="sign in", p=None, error=None)

    @r.post("/login")
    async def login(request: Request) -> Response:
        _own_origin(request)        # login CSRF: no other site may sign this browser in (with its key)
        # a form post (application/x-www-form-urlencoded), read here: no python-multipart needed
        form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=10)
        key = (form.get("api_key") or [""])[0].strip()
        # a key is printable ASCII (privacy/apikeys.py): anything else (a NUL) is no key, never a query
        p = await principal_of(request, backend(), key) if key and len(key) <= 512 and key.isascii() and key.isprintable() else None
        if p is None:
            return page("login", 401, title="sign in", p=None, error="unknown or revoked API key")
        resp = RedirectResponse("/console/", status_code=303, headers=HEADERS)
        resp.set_cookie(COOKIE, key, max_age=COOKIE_MAX_AGE_S, path=COOKIE_PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
        return resp

    @r.post("/logout")
    def logout(request: Request) -> Response:
        _own_origin(request)
        resp = RedirectResponse("/console/login", status_code=303, headers=HEADERS)
        resp.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
        return resp

    @r.get("/")
    async def home(request: Request) -> Response:
        p = await require(request, backend())
        # the list needs memory:read (it names users); any valid key may open the page itself
        listed = await memory_lists.users(backend(), p) if "memory:read" in p.scopes else None
        return page("home", title="users", p=p, users=listed)

    @r.get("/users")
    async def pick_user(request: Request, user: Annotated[str, Query(min_length=1, max_length=200)]) -> Response:
        p = await require(request, backend(), "memory:read")
        check_user(p, user)
        return RedirectResponse(f"/console/users/{_seg(user)}/memories", status_code=303, headers=HEADERS)

    @r.get("/users/{user}/memories")
    async def memories(request: Request, user: UserPath,
                       status: Literal["all", "active", "archived", "superseded", "merged"] = "all",
                       category: Annotated[str | None, Query(max_length=200)] = None,
                       q: Annotated[str | None, Query(max_length=200)] = None,
                       limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> Response:
        p = await require(request, backend(), "memory:read")
        check_user(p, user)
        category, q = _text(category, "category", check_id), _text(q, "q", check_content)
        rows, counts = await memory_lists.by_status(backend(), p, user, status, category or None, q or None, limit)
        return page("memories", title=f"memories of {user}", p=p, user=user, rows=rows, counts=counts,
                    status=status, category=category, q=q)

    @r.get("/users/{user}/graph")
    async def graph(request: Request, user: UserPath) -> Response:
        p = await require(request, backend(), "memory:read")
        check_user(p, user)
        nodes, edges = await memory_lists.graph(backend(), p, user)
        return page("graph", title=f"memory graph of {user}", p=p, user=user, g=layout(nodes, edges))

    @r.get("/users/{user}/entities")
    async def entities(request: Request, user: UserPath,
                       as_of: Annotated[str | None, Query(max_length=64)] = None) -> Response:
        p = await require(request, backend(), "memory:read")
        check_user(p, user)
        when = _as_of(as_of)
        g = await _relational(relational.graph(backend(), p, user, when))
        drawn = g["relations"] if when is None else [x for x in g["relations"] if x["holds"]]
        return page("entities", title=f"people & places of {user}", p=p, user=user, as_of=when,
                    g=entity_layout(g["entities"], drawn), relations=g["relations"],
                    count=len(g["entities"]))

    @r.get("/users/{user}/entities/{entity_id}")
    async def one_entity(request: Request, user: UserPath, entity_id: UserPath) -> Response:
        p = await require(request, backend(), "memory:read")
        check_user(p, user)
        if any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in entity_id):
            raise Refused(422, "entity: an entity id is printable characters")
        e = await _relational(relational.entity(backend(), p, user, entity_id))
        return page("entity", title=f"{e['name'] or e['entity_id']} ({e['entity_type']})", p=p, user=user, e=e)

    @r.get("/memories/{memory_id}")
    async def timeline(request: Request, memory_id: MemoryId) -> Response:
        p = await require(request, backend(), "audit:read")
        content = "audit:content" in p.scopes        # without it, the clear fields alone
        try:
            a = await audit.memory_life(backend(), p, memory_id, content=content)
        except NotYours:
            raise Refused(404, "not found") from None
        return page("timeline", title=f"memory {memory_id}", p=p, user=a["user"], a=a, content=content)

    @r.get("/deadletters")
    async def deadletters(request: Request) -> Response:
        p = await require(request, backend(), "admin")
        per = 100
        rows = await operator_view.dead_letters(backend(), p, per)
        return page("deadletters", title="dead letters", p=p, rows=rows, per_partition=per,
                    topic=settings.topic("deadletter"))

    @r.get("/replay")
    async def replay_status(request: Request) -> Response:
        p = await require(request, backend(), "admin")
        try:    # positions count every tenant's records: the stack operator's alone
            rows = await operator_view.positions(backend(), p)
        except MissingScope as exc:
            raise Refused(403, str(exc)) from None
        return page("replay", title="replay status", p=p, rows=rows, behind=sum(x["behind"] for x in rows))

    return r


def _own_origin(request: Request) -> None:
    """Refused(403) unless a state-changing POST comes from the console's own origin."""
    if not same_origin(request):
        raise Refused(403, "a form post from another site is refused: sign in from this console's own page")


def _text(value: str | None, what: str, check) -> str | None:
    """A query text before it reaches a store: Refused(422) naming the parameter when it holds a
    control character (a NUL, which Postgres refuses in text: never a 500); None and "" as given."""
    if not value:
        return value
    try:
        return check(value, what)
    except InvalidInput as exc:
        raise Refused(422, str(exc)) from None      # the message names the parameter


def _as_of(value: str | None) -> datetime | None:
    """`as_of` as a date (2021-03-01: its start, UTC) or an ISO time (UTC when it names no zone)."""
    if value is None or not value.strip():
        return None
    try:
        if "\x00" in value:
            raise ValueError
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise Refused(422, "as_of: a date (2021-03-01) or an ISO 8601 time (2021-03-01T10:00:00+00:00)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


async def _relational(call):
    """A relations service answer, its refusals as pages: unknown entity or user 404, bad input 422."""
    try:
        return await call
    except (relational.UnknownEntity, NotYours):
        raise Refused(404, "not found") from None
    except InvalidInput as exc:
        raise Refused(422, str(exc)) from None


def _seg(value: str) -> str:
    from urllib.parse import quote
    return quote(value, safe="")
