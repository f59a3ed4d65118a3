"""MemstreamClient (sync) and AsyncMemstreamClient (async): memstream's HTTP API, typed.

Both are context managers, send `Authorization: Bearer <key>` (the `api_key` argument, else
MEMSTREAM_API_KEY), retry 503 and 429 a bounded number of times honouring `Retry-After`, and
raise MemstreamError subclasses (memstream_client.errors). The two have the same methods; the
async ones are awaited.
"""
from __future__ import annotations

import asyncio
import enum
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Self

import httpx

from memstream_client import _requests as r
from memstream_client._requests import Req
from memstream_client._version import __version__
from memstream_client.errors import InvalidInput, Unavailable
from memstream_client.models import (AddResult, Category, Context, Entities, EntityDetail, Forgotten, Memory,
                                     MemoryHistory, MemoryPage, Message, Metadata, Position, Preference, Profile,
                                     RecallHit, RelationPath, Relations, Role, SessionWindow, Status, TaskSteps, Turn,
                                     UpdateResult)

DEFAULT_URL = "http://127.0.0.1:8080"
After = str | Position | None
Messages = Sequence[Message | Mapping[str, Any]]
SlotName = Literal["constraints", "profile", "recall", "people", "task", "tool_state", "recent"]


class _Unset(enum.Enum):
    UNSET = "unset"


UNSET = _Unset.UNSET      # update(metadata=…) left out; metadata=None clears it


class _Base:
    """Configuration and request shapes common to both clients (no I/O)."""

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 timeout: float | httpx.Timeout | None = 30.0, max_retries: int = 3,
                 retry_backoff_s: float = 0.5, max_retry_wait_s: float = 10.0,
                 headers: Mapping[str, str] | None = None) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        key = api_key if api_key is not None else os.environ.get("MEMSTREAM_API_KEY")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.max_retry_wait_s = max_retry_wait_s
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._headers = {"User-Agent": f"memstream-client/{__version__}", **(headers or {})}
        if key:     # none: the server's 401 says so
            self._headers["Authorization"] = f"Bearer {key}"

    def _timeout_for(self, req: Req) -> tuple[float | None, float | None, float | None, float | None]:
        """The read timeout, plus what the server may spend waiting for `after` (wait_s). As a plain
        (connect, read, write, pool) tuple: every httpx-compatible transport takes one (a test's
        in-process client need not share httpx's Timeout class)."""
        t = self._timeout
        read = t.read + req.wait_s if req.wait_s and t.read is not None else t.read
        return (t.connect, read, t.write, t.pool)

    def _delay(self, attempt: int, resp: httpx.Response | None) -> float | None:
        """Seconds to wait before retrying, or None when this answer is final."""
        if attempt >= self.max_retries or (resp is not None and resp.status_code not in r.RETRY_STATUSES):
            return None
        return r.backoff(attempt, resp, self.retry_backoff_s, self.max_retry_wait_s)

    @staticmethod
    def _unreachable(exc: httpx.TransportError, base_url: str) -> Unavailable:
        what = "no answer in time" if isinstance(exc, httpx.TimeoutException) else "cannot reach the server"
        return Unavailable(f"{what} ({base_url}): {type(exc).__name__}: {exc}")

    # -- request shapes -------------------------------------------------------------------------
    @staticmethod
    def _wait(after: After, wait_s: float | None) -> tuple[str | None, float | None]:
        tok = r.token(after)
        return tok, (wait_s if wait_s is not None else (5.0 if tok else None))

    def _add(self, content: str | Messages | None, user: str, messages: Messages | None, infer: bool,
             category: Category | None, importance: float | None, agent_id: str | None, run_id: str | None,
             metadata: Metadata | None, session: str | None, at: datetime | str | None) -> Req:
        if content is not None and not isinstance(content, str):
            if messages is not None:
                raise InvalidInput("give exactly one of `content` and `messages`")
            content, messages = None, content       # add([{"role": …, "content": …}], user=…): Mem0's way
        if (content is None) == (messages is None):
            raise InvalidInput("give exactly one of `content` and `messages`")
        body = r.drop_none({"user": user, "content": content, "infer": infer, "category": category,
                            "importance": importance, "agent_id": agent_id, "run_id": run_id, "metadata": metadata,
                            "session": session, "at": r.iso(at),
                            "messages": None if messages is None else [r.message(m) for m in messages]})
        return Req("POST", "/v1/memories", json=body)

    @staticmethod
    def _turn(user: str, session: str, role: Role, content: str, task: str | None, at: datetime | str | None,
              agent_id: str | None, run_id: str | None, metadata: Metadata | None) -> Req:
        return Req("POST", "/v1/turns", json=r.drop_none({
            "user": user, "session": session, "role": role, "content": content, "task": task, "at": r.iso(at),
            "agent_id": agent_id, "run_id": run_id, "metadata": metadata}))

    @staticmethod
    def _turns(turns: Sequence[Turn | Mapping[str, Any]]) -> Req:
        return Req("POST", "/v1/turns/batch", json={"turns": [r.turn(t) for t in turns]})

    @staticmethod
    def _step(user: str, task: str, content: str, status: Literal["ok", "failed", "pending"], kind: str,
              session: str | None, at: datetime | str | None) -> Req:
        return Req("POST", "/v1/steps", json=r.drop_none({"user": user, "task": task, "content": content,
                                                          "status": status, "kind": kind, "session": session,
                                                          "at": r.iso(at)}))

    @staticmethod
    def _start_task(user: str, task: str, session: str | None, goal: str | None, at: datetime | str | None) -> Req:
        return Req("POST", "/v1/tasks/start", json=r.drop_none({"user": user, "task": task, "session": session,
                                                                "goal": goal, "at": r.iso(at)}))

    @staticmethod
    def _finish_task(user: str, task: str, status: Literal["succeeded", "failed", "abandoned"],
                     at: datetime | str | None) -> Req:
        return Req("POST", "/v1/tasks/finish", json=r.drop_none({"user": user, "task": task, "status": status,
                                                                 "at": r.iso(at)}))

    def _search(self, user: str, query: str, k: int | None, categories: Sequence[str] | None,
                tags: Sequence[str] | None, max_age_hours: float | None, min_score: float | None,
                expand: bool | None, filters: Mapping[str, Any] | None, after: After, wait_s: float | None,
                as_of: datetime | str | None) -> Req:
        tok, wait = self._wait(after, wait_s)
        return Req("POST", "/v1/recall", wait_s=wait, json=r.drop_none({
            "user": user, "query": query, "k": k, "categories": r.many(categories), "tags": r.many(tags),
            "max_age_hours": max_age_hours, "min_score": min_score, "expand": expand,
            "filters": None if filters is None else dict(filters), "after": tok,
            "wait_s": wait_s, "as_of": r.iso(as_of)}))

    def _get_all(self, user: str, status: Status, category: str | None, agent_id: str | None, run_id: str | None,
                 created_after: datetime | str | None, created_before: datetime | str | None,
                 updated_after: datetime | str | None, updated_before: datetime | str | None,
                 cursor: str | None, limit: int | None, filters: Mapping[str, Any] | None, after: After,
                 wait_s: float | None) -> Req:
        tok, wait = self._wait(after, wait_s)
        if filters is None:
            return Req("GET", f"/v1/users/{r.seg(user, 'user')}/memories", wait_s=wait, params=r.drop_none({
                "status": status, "category": category, "agent_id": agent_id, "run_id": run_id,
                "created_after": r.iso(created_after), "created_before": r.iso(created_before),
                "updated_after": r.iso(updated_after), "updated_before": r.iso(updated_before),
                "cursor": cursor, "limit": limit, "after": tok, "wait_s": wait_s}))
        # the list's own parameters, ANDed with the filters (the same meaning as the GET route's)
        extra: list[dict[str, Any]] = [{f: v} for f, v in (("category", category), ("agent_id", agent_id),
                                                           ("run_id", run_id)) if v is not None]
        for field, op, value in (("created_at", "gte", created_after), ("created_at", "lt", created_before),
                                 ("updated_at", "gte", updated_after), ("updated_at", "lt", updated_before)):
            if value is not None:
                extra.append({field: {op: r.iso(value)}})
        combined: dict[str, Any] = dict(filters) if not extra else {"and": [dict(filters), *extra]}
        return Req("POST", "/v1/memories/search", wait_s=wait, json=r.drop_none({
            "user": user, "filters": combined, "status": status, "cursor": cursor, "limit": limit,
            "after": tok, "wait_s": wait_s}))

    def _memory(self, user: str, memory_id: str, tail: str, after: After, wait_s: float | None) -> Req:
        tok, wait = self._wait(after, wait_s)
        return Req("GET", f"/v1/users/{r.seg(user, 'user')}/memories/{r.seg(memory_id, 'memory id')}{tail}",
                   wait_s=wait, params=r.drop_none({"after": tok, "wait_s": wait_s}))

    @staticmethod
    def _update(user: str, memory_id: str, content: str | None, category: Category | None,
                importance: float | None, metadata: Metadata | None | _Unset) -> Req:
        body = r.drop_none({"content": content, "category": category, "importance": importance})
        if metadata is not UNSET:
            body["metadata"] = metadata         # None: clear it
        if not body:
            raise InvalidInput("update needs at least one of content, category, importance, metadata")
        return Req("PATCH", f"/v1/users/{r.seg(user, 'user')}/memories/{r.seg(memory_id, 'memory id')}", json=body)

    @staticmethod
    def _delete(user: str, memory_id: str | None, reason: str | None) -> Req:
        path = f"/v1/users/{r.seg(user, 'user')}/memories"
        if memory_id is not None:
            path += f"/{r.seg(memory_id, 'memory id')}"
        return Req("DELETE", path, params=r.drop_none({"reason": reason or None}))

    @staticmethod
    def _delete_session(user: str, session: str, reason: str | None) -> Req:
        return Req("DELETE", f"/v1/users/{r.seg(user, 'user')}/sessions/{r.seg(session, 'session')}",
                   params=r.drop_none({"reason": reason or None}))

    def _context(self, user: str, query: str, session: str | None, task: str | None, budget: int | None,
                 slot_budgets: Mapping[SlotName, int] | None, k: int | None, after: After,
                 wait_s: float | None) -> Req:
        tok, wait = self._wait(after, wait_s)
        return Req("POST", "/v1/context", wait_s=wait, json=r.drop_none({
            "user": user, "query": query, "session": session, "task": task, "budget": budget,
            "slot_budgets": None if slot_budgets is None else dict(slot_budgets), "k": k, "after": tok,
            "wait_s": wait_s}))

    def _user_view(self, user: str, tail: str, after: After, wait_s: float | None,
                   as_of: datetime | str | None = None, **params: Any) -> Req:
        tok, wait = self._wait(after, wait_s)
        return Req("GET", f"/v1/users/{r.seg(user, 'user')}{tail}", wait_s=wait, params=r.drop_none({
            "after": tok, "wait_s": wait_s, "as_of": r.iso(as_of), **params}))

    @staticmethod
    def _audit_memory(memory_id: str, content: bool) -> Req:
        return Req("GET", f"/v1/audit/memories/{r.seg(memory_id, 'memory id')}",
                   params={"content": str(content).lower()})

    @staticmethod
    def _audit_user(user: str, content: bool, limit: int | None, since: datetime | str | None,
                    until: datetime | str | None) -> Req:
        return Req("GET", f"/v1/audit/users/{r.seg(user, 'user')}", params=r.drop_none({
            "content": str(content).lower(), "limit": limit, "since": r.iso(since), "until": r.iso(until)}))


class MemstreamClient(_Base):
    """memstream's HTTP API, synchronous.

        with MemstreamClient("http://127.0.0.1:8080", api_key="msk_…") as mem:
            pos = mem.add("I live in Lisbon", user="alice")
            hits = mem.search("alice", "where does the user live?", after=pos)

    Args:
        base_url: the API's root URL.
        api_key: sent as `Authorization: Bearer …`; default MEMSTREAM_API_KEY.
        timeout: seconds per request (connect, read, write); a read that waits for `after` gets
            `wait_s` more.
        max_retries: retries of a 503 or 429 answer (or a refused connection), each after the
            server's Retry-After or an exponential back-off from `retry_backoff_s`, each wait at
            most `max_retry_wait_s`. 0: no retry.
        headers: extra headers on every request.
        transport: an httpx transport (tests: httpx.MockTransport).
    """

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 timeout: float | httpx.Timeout | None = 30.0, max_retries: int = 3, retry_backoff_s: float = 0.5,
                 max_retry_wait_s: float = 10.0, headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                         retry_backoff_s=retry_backoff_s, max_retry_wait_s=max_retry_wait_s, headers=headers)
        self._http = httpx.Client(base_url=self.base_url, timeout=self._timeout, headers=self._headers,
                                  transport=transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _send(self, req: Req) -> Any:
        attempt = 0
        while True:
            try:
                resp = self._http.request(req.method, req.path, params=req.params, json=req.json,
                                          timeout=self._timeout_for(req))
            except httpx.ConnectError as exc:      # nothing was sent: safe to try again
                delay = self._delay(attempt, None)
                if delay is None:
                    raise self._unreachable(exc, self.base_url) from exc
                time.sleep(delay)
                attempt += 1
                continue
            except httpx.TransportError as exc:
                raise self._unreachable(exc, self.base_url) from exc
            delay = self._delay(attempt, resp)
            if delay is None:
                return r.answer(resp)
            time.sleep(delay)
            attempt += 1

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
                wait_s: float | None = None) -> Any:
        """Any route, raw: the answer's JSON (with auth, retries and errors as for the typed methods)."""
        return self._send(Req(method, path, None if params is None else dict(params), json, wait_s))

    # -- memories as a resource ------------------------------------------------------------------
    def add(self, content: str | Messages | None = None, *, user: str, messages: Messages | None = None,
            infer: bool = True, category: Category | None = None, importance: float | None = None,
            agent_id: str | None = None, run_id: str | None = None, metadata: Metadata | None = None,
            session: str | None = None, at: datetime | str | None = None) -> AddResult:
        """Add memories (POST /v1/memories): one text (`content`) or several messages (`messages`, or
        a list of {"role", "content"} as the first argument).

        infer=True extracts memories from the text as from a user turn; infer=False keeps each text as
        stated (one memory each; `category` and `importance` apply only then). Either way the pipeline
        deduplicates and resolves conflicts; the answer is a position: pass it as `after` to read it.
        """
        return AddResult.model_validate(self._send(self._add(content, user, messages, infer, category, importance,
                                                             agent_id, run_id, metadata, session, at)))

    def add_turns(self, turns: Sequence[Turn | Mapping[str, Any]]) -> list[Position]:
        """Publish up to 100 turns in order (POST /v1/turns/batch): all are checked first (one bad turn
        is an InvalidInput naming its index, and nothing is published). One position per turn."""
        return [Position.model_validate(p) for p in self._send(self._turns(turns))["positions"]]

    def record_turn(self, user: str, session: str, role: Role, content: str, *, task: str | None = None,
                    at: datetime | str | None = None, agent_id: str | None = None, run_id: str | None = None,
                    metadata: Metadata | None = None) -> Position:
        """Publish one conversation turn (POST /v1/turns)."""
        return Position.model_validate(self._send(self._turn(user, session, role, content, task, at, agent_id,
                                                             run_id, metadata)))

    def record_step(self, user: str, task: str, content: str, *, status: Literal["ok", "failed", "pending"] = "ok",
                    kind: str = "step", session: str | None = None, at: datetime | str | None = None) -> Position:
        """Publish one task step (POST /v1/steps): what the agent did, and whether it worked."""
        return Position.model_validate(self._send(self._step(user, task, content, status, kind, session, at)))

    def start_task(self, user: str, task: str, *, session: str | None = None, goal: str | None = None,
                   at: datetime | str | None = None) -> Position:
        """Start a task (POST /v1/tasks/start): its step buffer starts over."""
        return Position.model_validate(self._send(self._start_task(user, task, session, goal, at)))

    def finish_task(self, user: str, task: str, *, status: Literal["succeeded", "failed", "abandoned"] = "succeeded",
                    at: datetime | str | None = None) -> Position:
        """Finish a task with its outcome (POST /v1/tasks/finish)."""
        return Position.model_validate(self._send(self._finish_task(user, task, status, at)))

    def search(self, user: str, query: str, *, k: int | None = None, categories: Sequence[str] | None = None,
               tags: Sequence[str] | None = None, max_age_hours: float | None = None,
               min_score: float | None = None, expand: bool | None = None, filters: Mapping[str, Any] | None = None,
               after: After = None, wait_s: float | None = None,
               as_of: datetime | str | None = None) -> list[RecallHit]:
        """Memories relevant to `query`, best first (POST /v1/recall). Filters: any of `categories`,
        all of `tags`, `max_age_hours`, `min_score`, and `filters` (the filter language of get_all:
        agent_id, run_id, metadata keys, …); `as_of` answers from what memory held then."""
        return [RecallHit.model_validate(h) for h in self._send(self._search(
            user, query, k, categories, tags, max_age_hours, min_score, expand, filters, after, wait_s, as_of))]

    def get_all(self, user: str, *, status: Status = "active", category: str | None = None,
                agent_id: str | None = None, run_id: str | None = None,
                created_after: datetime | str | None = None, created_before: datetime | str | None = None,
                updated_after: datetime | str | None = None, updated_before: datetime | str | None = None,
                cursor: str | None = None, limit: int | None = None, filters: Mapping[str, Any] | None = None,
                after: After = None, wait_s: float | None = None) -> MemoryPage:
        """One page of a user's memories, oldest first (GET /v1/users/{user}/memories).

        `filters` takes the full filter language (POST /v1/memories/search: and/or, eq ne in nin gt gte
        lt lte, on status, category, agent_id, run_id, memory_id, session, importance, created_at,
        updated_at and metadata keys), ANDed with the other arguments. `next_cursor` pages on;
        `iter_all` walks every page.
        """
        return MemoryPage.model_validate(self._send(self._get_all(
            user, status, category, agent_id, run_id, created_after, created_before, updated_after, updated_before,
            cursor, limit, filters, after, wait_s)))

    def iter_all(self, user: str, **options: Any) -> Iterator[Memory]:
        """Every memory `get_all(user, **options)` selects, page after page."""
        cursor = options.pop("cursor", None)
        while True:
            page = self.get_all(user, cursor=cursor, **options)
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor
            options.pop("after", None)      # the first page waited for it

    def get(self, user: str, memory_id: str, *, after: After = None, wait_s: float | None = None) -> Memory:
        """One memory (NotFound if it is not this user's, or outside the key's reach)."""
        return Memory.model_validate(self._send(self._memory(user, memory_id, "", after, wait_s)))

    def history(self, user: str, memory_id: str, *, after: After = None,
                wait_s: float | None = None) -> MemoryHistory:
        """A memory's versions and what caused each."""
        return MemoryHistory.model_validate(self._send(self._memory(user, memory_id, "/history", after, wait_s)))

    def update(self, user: str, memory_id: str, *, content: str | None = None, category: Category | None = None,
               importance: float | None = None, metadata: Metadata | None | _Unset = UNSET) -> UpdateResult:
        """Edit a memory as a new version (PATCH /v1/users/{user}/memories/{memory_id}); give at least
        one field, the others stay the memory's own (`metadata=None` clears it). The answer's
        `memory_id` is the new version; the edited memory becomes outdated, superseded by it. Only an
        active memory can be edited (Conflict otherwise)."""
        return UpdateResult.model_validate(self._send(self._update(user, memory_id, content, category, importance,
                                                                   metadata)))

    def delete(self, user: str, memory_id: str, *, reason: str | None = None) -> Forgotten:
        """Delete one memory for good, and every memory merged into it."""
        return Forgotten.model_validate(self._send(self._delete(user, memory_id, reason)))

    def delete_all(self, user: str, *, reason: str | None = None) -> Position:
        """Delete all of a user's memories (their sessions and task buffers stay; see `erase`)."""
        return Position.model_validate(self._send(self._delete(user, None, reason)))

    def delete_session(self, user: str, session: str, *, reason: str | None = None) -> Forgotten:
        """Clear one conversation session: its messages and summary leave the session window, and
        the memories learned in it (`memory_ids`) are deleted. Pass the answer's token as `after`
        to `session` to read the empty window; new turns of the session start it afresh."""
        return Forgotten.model_validate(self._send(self._delete_session(user, session, reason)))

    # -- reading for the next model call ---------------------------------------------------------
    def context(self, user: str, query: str, *, session: str | None = None, task: str | None = None,
                budget: int | None = None, slot_budgets: Mapping[SlotName, int] | None = None,
                k: int | None = None, after: After = None, wait_s: float | None = None) -> Context:
        """Prompt context within a token `budget` (POST /v1/context): `text` for the prompt, `slots`
        for what each slot (constraints, profile, recall, task, tool_state, recent) kept and cut."""
        return Context.model_validate(self._send(self._context(user, query, session, task, budget, slot_budgets,
                                                               k, after, wait_s)))

    def profile(self, user: str, *, after: After = None, wait_s: float | None = None,
                as_of: datetime | str | None = None) -> Profile:
        """Identity, preference and policy memories, and the preference table."""
        return Profile.model_validate(self._send(self._user_view(user, "/profile", after, wait_s, as_of)))

    def preferences(self, user: str, *, after: After = None, wait_s: float | None = None,
                    as_of: datetime | str | None = None) -> dict[str, Preference]:
        """The key-value preference table."""
        got = self._send(self._user_view(user, "/preferences", after, wait_s, as_of))
        return {k: Preference.model_validate(v) for k, v in got.items()}

    # -- relational memory: entities and relations ------------------------------------------------
    def entities(self, user: str, *, type: str | None = None, after: After = None,
                 wait_s: float | None = None) -> Entities:
        """The user's entities (of one type if given), each with its current relations to the user."""
        return Entities.model_validate(self._send(self._user_view(user, "/entities", after, wait_s, None, type=type)))

    def entity(self, user: str, entity: str, *, as_of: datetime | str | None = None, after: After = None,
               wait_s: float | None = None) -> EntityDetail:
        """One entity (an id, a name, `self` or `role:<word>`) with all its relations (NotFound if unknown)."""
        return EntityDetail.model_validate(self._send(self._user_view(
            user, f"/entities/{r.seg(entity, 'entity')}", after, wait_s, as_of)))

    def relations(self, user: str, *, predicate: str | None = None, group: str | None = None,
                  subject: str | None = None, object: str | None = None, as_of: datetime | str | None = None,
                  after: After = None, wait_s: float | None = None) -> Relations:
        """Relations holding now (or at `as_of`) under the filters; subject/object: an id, `self`, a name or
        `role:<word>` (`relations(u, subject="role:sister", predicate="lives_in")`)."""
        return Relations.model_validate(self._send(self._user_view(
            user, "/relations", after, wait_s, as_of, predicate=predicate, group=group, subject=subject,
            object=object)))

    def relation_path(self, user: str, source: str, target: str, *, max_hops: int | None = None,
                      as_of: datetime | str | None = None, after: After = None,
                      wait_s: float | None = None) -> RelationPath:
        """How two entities are related: the shortest chain of at most `max_hops` (1-3) relations."""
        return RelationPath.model_validate(self._send(self._user_view(
            user, "/relations/path", after, wait_s, as_of, max_hops=max_hops, **{"from": source, "to": target})))

    def session(self, user: str, session: str, *, after: After = None, wait_s: float | None = None) -> SessionWindow:
        """A session's recent messages and the rolling summary of older ones."""
        return SessionWindow.model_validate(self._send(self._user_view(
            user, f"/sessions/{r.seg(session, 'session')}", after, wait_s)))

    def task_steps(self, user: str, task: str, *, k: int | None = None, after: After = None,
                   wait_s: float | None = None) -> TaskSteps:
        """A task's start and outcome and its newest `k` steps."""
        return TaskSteps.model_validate(self._send(self._user_view(
            user, f"/tasks/{r.seg(task, 'task')}/steps", after, wait_s, k=k)))

    # -- audit and erasure -------------------------------------------------------------------------
    def audit_memory(self, memory_id: str, *, content: bool = True) -> dict[str, Any]:
        """A memory's whole life with causation chains (audit:read; content needs audit:content)."""
        got: dict[str, Any] = self._send(self._audit_memory(memory_id, content))
        return got

    def audit_user(self, user: str, *, content: bool = False, limit: int | None = None,
                   since: datetime | str | None = None, until: datetime | str | None = None) -> dict[str, Any]:
        """A user's timeline: every indexed event, oldest first (audit:read)."""
        got: dict[str, Any] = self._send(self._audit_user(user, content, limit, since, until))
        return got

    def erase(self, user: str) -> Position:
        """Erase a user for good (admin): their content is crypto-shredded everywhere and later
        publishes for them are refused (Gone)."""
        return Position.model_validate(self._send(Req("DELETE", f"/v1/users/{r.seg(user, 'user')}")))


class AsyncMemstreamClient(_Base):
    """memstream's HTTP API, asynchronous: the methods of MemstreamClient, awaited.

        async with AsyncMemstreamClient("http://127.0.0.1:8080") as mem:
            pos = await mem.add("I live in Lisbon", user="alice")
            hits = await mem.search("alice", "where does the user live?", after=pos)
    """

    def __init__(self, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 timeout: float | httpx.Timeout | None = 30.0, max_retries: int = 3, retry_backoff_s: float = 0.5,
                 max_retry_wait_s: float = 10.0, headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                         retry_backoff_s=retry_backoff_s, max_retry_wait_s=max_retry_wait_s, headers=headers)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=self._timeout, headers=self._headers,
                                       transport=transport)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _send(self, req: Req) -> Any:
        attempt = 0
        while True:
            try:
                resp = await self._http.request(req.method, req.path, params=req.params, json=req.json,
                                                timeout=self._timeout_for(req))
            except httpx.ConnectError as exc:      # nothing was sent: safe to try again
                delay = self._delay(attempt, None)
                if delay is None:
                    raise self._unreachable(exc, self.base_url) from exc
                await asyncio.sleep(delay)
                attempt += 1
                continue
            except httpx.TransportError as exc:
                raise self._unreachable(exc, self.base_url) from exc
            delay = self._delay(attempt, resp)
            if delay is None:
                return r.answer(resp)
            await asyncio.sleep(delay)
            attempt += 1

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
                      wait_s: float | None = None) -> Any:
        """Any route, raw: the answer's JSON (with auth, retries and errors as for the typed methods)."""
        return await self._send(Req(method, path, None if params is None else dict(params), json, wait_s))

    async def add(self, content: str | Messages | None = None, *, user: str, messages: Messages | None = None,
                  infer: bool = True, category: Category | None = None, importance: float | None = None,
                  agent_id: str | None = None, run_id: str | None = None, metadata: Metadata | None = None,
                  session: str | None = None, at: datetime | str | None = None) -> AddResult:
        """Add memories (POST /v1/memories); see MemstreamClient.add."""
        return AddResult.model_validate(await self._send(self._add(content, user, messages, infer, category,
                                                                   importance, agent_id, run_id, metadata, session,
                                                                   at)))

    async def add_turns(self, turns: Sequence[Turn | Mapping[str, Any]]) -> list[Position]:
        """Publish up to 100 turns in order (POST /v1/turns/batch), all or nothing."""
        return [Position.model_validate(p) for p in (await self._send(self._turns(turns)))["positions"]]

    async def record_turn(self, user: str, session: str, role: Role, content: str, *, task: str | None = None,
                          at: datetime | str | None = None, agent_id: str | None = None, run_id: str | None = None,
                          metadata: Metadata | None = None) -> Position:
        """Publish one conversation turn (POST /v1/turns)."""
        return Position.model_validate(await self._send(self._turn(user, session, role, content, task, at,
                                                                   agent_id, run_id, metadata)))

    async def record_step(self, user: str, task: str, content: str, *,
                          status: Literal["ok", "failed", "pending"] = "ok", kind: str = "step",
                          session: str | None = None, at: datetime | str | None = None) -> Position:
        """Publish one task step (POST /v1/steps)."""
        return Position.model_validate(await self._send(self._step(user, task, content, status, kind, session, at)))

    async def start_task(self, user: str, task: str, *, session: str | None = None, goal: str | None = None,
                         at: datetime | str | None = None) -> Position:
        """Start a task (POST /v1/tasks/start)."""
        return Position.model_validate(await self._send(self._start_task(user, task, session, goal, at)))

    async def finish_task(self, user: str, task: str, *,
                          status: Literal["succeeded", "failed", "abandoned"] = "succeeded",
                          at: datetime | str | None = None) -> Position:
        """Finish a task with its outcome (POST /v1/tasks/finish)."""
        return Position.model_validate(await self._send(self._finish_task(user, task, status, at)))

    async def search(self, user: str, query: str, *, k: int | None = None, categories: Sequence[str] | None = None,
                     tags: Sequence[str] | None = None, max_age_hours: float | None = None,
                     min_score: float | None = None, expand: bool | None = None,
                     filters: Mapping[str, Any] | None = None, after: After = None, wait_s: float | None = None,
                     as_of: datetime | str | None = None) -> list[RecallHit]:
        """Memories relevant to `query`, best first (POST /v1/recall); see MemstreamClient.search."""
        return [RecallHit.model_validate(h) for h in await self._send(self._search(
            user, query, k, categories, tags, max_age_hours, min_score, expand, filters, after, wait_s, as_of))]

    async def get_all(self, user: str, *, status: Status = "active", category: str | None = None,
                      agent_id: str | None = None, run_id: str | None = None,
                      created_after: datetime | str | None = None, created_before: datetime | str | None = None,
                      updated_after: datetime | str | None = None, updated_before: datetime | str | None = None,
                      cursor: str | None = None, limit: int | None = None,
                      filters: Mapping[str, Any] | None = None, after: After = None,
                      wait_s: float | None = None) -> MemoryPage:
        """One page of a user's memories; see MemstreamClient.get_all."""
        return MemoryPage.model_validate(await self._send(self._get_all(
            user, status, category, agent_id, run_id, created_after, created_before, updated_after, updated_before,
            cursor, limit, filters, after, wait_s)))

    async def iter_all(self, user: str, **options: Any) -> AsyncIterator[Memory]:
        """Every memory `get_all(user, **options)` selects, page after page."""
        cursor = options.pop("cursor", None)
        while True:
            page = await self.get_all(user, cursor=cursor, **options)
            for m in page.memories:
                yield m
            if not page.next_cursor:
                return
            cursor = page.next_cursor
            options.pop("after", None)

    async def get(self, user: str, memory_id: str, *, after: After = None, wait_s: float | None = None) -> Memory:
        """One memory (NotFound if it is not this user's, or outside the key's reach)."""
        return Memory.model_validate(await self._send(self._memory(user, memory_id, "", after, wait_s)))

    async def history(self, user: str, memory_id: str, *, after: After = None,
                      wait_s: float | None = None) -> MemoryHistory:
        """A memory's versions and what caused each."""
        return MemoryHistory.model_validate(await self._send(self._memory(user, memory_id, "/history", after,
                                                                          wait_s)))

    async def update(self, user: str, memory_id: str, *, content: str | None = None,
                     category: Category | None = None, importance: float | None = None,
                     metadata: Metadata | None | _Unset = UNSET) -> UpdateResult:
        """Edit a memory as a new version (PATCH); see MemstreamClient.update."""
        return UpdateResult.model_validate(await self._send(self._update(user, memory_id, content, category,
                                                                         importance, metadata)))

    async def delete(self, user: str, memory_id: str, *, reason: str | None = None) -> Forgotten:
        """Delete one memory for good, and every memory merged into it."""
        return Forgotten.model_validate(await self._send(self._delete(user, memory_id, reason)))

    async def delete_all(self, user: str, *, reason: str | None = None) -> Position:
        """Delete all of a user's memories."""
        return Position.model_validate(await self._send(self._delete(user, None, reason)))

    async def delete_session(self, user: str, session: str, *, reason: str | None = None) -> Forgotten:
        """Clear one conversation session and forget the memories learned in it; see
        MemstreamClient.delete_session."""
        return Forgotten.model_validate(await self._send(self._delete_session(user, session, reason)))

    async def context(self, user: str, query: str, *, session: str | None = None, task: str | None = None,
                      budget: int | None = None, slot_budgets: Mapping[SlotName, int] | None = None,
                      k: int | None = None, after: After = None, wait_s: float | None = None) -> Context:
        """Prompt context within a token budget (POST /v1/context)."""
        return Context.model_validate(await self._send(self._context(user, query, session, task, budget,
                                                                     slot_budgets, k, after, wait_s)))

    async def profile(self, user: str, *, after: After = None, wait_s: float | None = None,
                      as_of: datetime | str | None = None) -> Profile:
        """Identity, preference and policy memories, and the preference table."""
        return Profile.model_validate(await self._send(self._user_view(user, "/profile", after, wait_s, as_of)))

    async def preferences(self, user: str, *, after: After = None, wait_s: float | None = None,
                          as_of: datetime | str | None = None) -> dict[str, Preference]:
        """The key-value preference table."""
        got = await self._send(self._user_view(user, "/preferences", after, wait_s, as_of))
        return {k: Preference.model_validate(v) for k, v in got.items()}

    # -- relational memory: entities and relations ------------------------------------------------
    async def entities(self, user: str, *, type: str | None = None, after: After = None,
                       wait_s: float | None = None) -> Entities:
        """The user's entities (of one type if given), each with its current relations to the user."""
        return Entities.model_validate(await self._send(self._user_view(user, "/entities", after, wait_s, None,
                                                                        type=type)))

    async def entity(self, user: str, entity: str, *, as_of: datetime | str | None = None, after: After = None,
                     wait_s: float | None = None) -> EntityDetail:
        """One entity (an id, a name, `self` or `role:<word>`) with all its relations (NotFound if unknown)."""
        return EntityDetail.model_validate(await self._send(self._user_view(
            user, f"/entities/{r.seg(entity, 'entity')}", after, wait_s, as_of)))

    async def relations(self, user: str, *, predicate: str | None = None, group: str | None = None,
                        subject: str | None = None, object: str | None = None, as_of: datetime | str | None = None,
                        after: After = None, wait_s: float | None = None) -> Relations:
        """Relations holding now (or at `as_of`) under the filters; subject/object: an id, `self`, a name or
        `role:<word>` (`relations(u, subject="role:sister", predicate="lives_in")`)."""
        return Relations.model_validate(await self._send(self._user_view(
            user, "/relations", after, wait_s, as_of, predicate=predicate, group=group, subject=subject,
            object=object)))

    async def relation_path(self, user: str, source: str, target: str, *, max_hops: int | None = None,
                            as_of: datetime | str | None = None, after: After = None,
                            wait_s: float | None = None) -> RelationPath:
        """How two entities are related: the shortest chain of at most `max_hops` (1-3) relations."""
        return RelationPath.model_validate(await self._send(self._user_view(
            user, "/relations/path", after, wait_s, as_of, max_hops=max_hops, **{"from": source, "to": target})))

    async def session(self, user: str, session: str, *, after: After = None,
                      wait_s: float | None = None) -> SessionWindow:
        """A session's recent messages and the rolling summary of older ones."""
        return SessionWindow.model_validate(await self._send(self._user_view(
            user, f"/sessions/{r.seg(session, 'session')}", after, wait_s)))

    async def task_steps(self, user: str, task: str, *, k: int | None = None, after: After = None,
                         wait_s: float | None = None) -> TaskSteps:
        """A task's start and outcome and its newest `k` steps."""
        return TaskSteps.model_validate(await self._send(self._user_view(
            user, f"/tasks/{r.seg(task, 'task')}/steps", after, wait_s, k=k)))

    async def audit_memory(self, memory_id: str, *, content: bool = True) -> dict[str, Any]:
        """A memory's whole life with causation chains (audit:read)."""
        got: dict[str, Any] = await self._send(self._audit_memory(memory_id, content))
        return got

    async def audit_user(self, user: str, *, content: bool = False, limit: int | None = None,
                         since: datetime | str | None = None, until: datetime | str | None = None) -> dict[str, Any]:
        """A user's timeline: every indexed event, oldest first (audit:read)."""
        got: dict[str, Any] = await self._send(self._audit_user(user, content, limit, since, until))
        return got

    async def erase(self, user: str) -> Position:
        """Erase a user for good (admin)."""
        return Position.model_validate(await self._send(Req("DELETE", f"/v1/users/{r.seg(user, 'user')}")))
