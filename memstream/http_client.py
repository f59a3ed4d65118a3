"""The SDK over the HTTP API (httpx), sync and async: for agents that only reach memstream by HTTP.

    api = MemoryApi("http://127.0.0.1:8080")
    pos = api.record_turn("alice", "s1", "user", "我叫Alice")
    api.recall("alice", "我叫什么", after=pos["token"])

Every call sends an API key (`Authorization: Bearer …`): the `api_key` argument, else
MEMSTREAM_API_KEY, else the local admin key `memstream stack up` wrote (<stack_dir>/secrets/api.key).
A refused key raises AccessDenied (401/403, the server's message names a missing scope); a user or
memory outside the key's reach is a 404 (MemstreamError), as if it did not exist.

Ids and content are checked against the input contract (schemas/limits.py) before a request is
sent; what only the server knows (its size limits) comes back as a 413/422, raised as InvalidInput
with the server's message naming the field and the limit.
"""
from __future__ import annotations

from urllib.parse import quote

import httpx

from memstream.errors import AccessDenied, InvalidInput, MemstreamError, Timeout
from schemas.limits import check_content, check_id


def _check(resp: httpx.Response):
    try:
        body = resp.json()
    except ValueError:
        body = {"error": resp.text[:300]}
    if resp.status_code == 503:
        raise Timeout(body.get("error") if isinstance(body, dict) else resp.text[:300])
    if resp.status_code >= 400:
        if not isinstance(body, dict):
            body = {"error": str(body)[:300]}
        problems = "; ".join(body.get("problems") or [])
        cls = (InvalidInput if resp.status_code in (413, 422) else AccessDenied if resp.status_code in (401, 403)
               else MemstreamError)
        raise cls(f"HTTP {resp.status_code}: {body.get('error')}" + (f": {problems}" if problems else ""))
    return body


def _ids(**ids) -> None:
    """The input contract's id rules (schemas/limits.py), checked before anything is sent."""
    for what, value in ids.items():
        if value is not None:
            check_id(value, f"{what} id")


def _seg(value: str) -> str:
    """An id as one URL path segment ('?', '%', '#' and the like escaped). A '/' cannot be carried:
    the server's router decodes %2F before matching, so such an id is refused here, clearly."""
    if "/" in value:
        raise InvalidInput(f"id {value!r} contains '/', which a URL path of the HTTP API cannot carry "
                           f"(the POST routes, the Kafka SDK and the CLI can)")
    return quote(value, safe="")


def _auth(api_key: str | None) -> dict:
    """The Authorization header: the given key, else MEMSTREAM_API_KEY, else the local admin key."""
    if api_key is None:
        from memstream.config import get_settings
        from memstream.privacy.tenants import local_api_key
        api_key = local_api_key(get_settings())
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}   # none: the server's 401 says so


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


class _Calls:
    """Request shapes shared by the sync and async clients."""

    @staticmethod
    def turn(user, session, role, content, task=None, at=None):
        _ids(user=user, session=session, task=task)
        check_content(content)  # the size limit is the server's setting: a 422 names it
        return "POST", "/v1/turns", {"json": _drop_none({"user": user, "session": session, "role": role, "content": content,
                                                          "task": task, "at": at.isoformat() if at else None})}

    @staticmethod
    def step(user, task, content, status="ok", kind="step", session=None):
        _ids(user=user, task=task, session=session)
        check_content(content)
        return "POST", "/v1/steps", {"json": _drop_none({"user": user, "task": task, "content": content,
                                                          "status": status, "kind": kind, "session": session})}

    @staticmethod
    def recall(user, query, k=10, after=None, **filters):
        _ids(user=user)
        if not query:
            raise InvalidInput("query is empty")
        return "POST", "/v1/recall", {"json": _drop_none({"user": user, "query": query, "k": k, "after": after, **filters})}

    @staticmethod
    def profile(user, after=None, wait_s=None):
        _ids(user=user)
        return "GET", f"/v1/users/{_seg(user)}/profile", {"params": _drop_none({"after": after, "wait_s": wait_s})}

    @staticmethod
    def steps(user, task, k=20, after=None, wait_s=None):
        _ids(user=user, task=task)
        return "GET", f"/v1/users/{_seg(user)}/tasks/{_seg(task)}/steps", {"params": _drop_none({"k": k, "after": after, "wait_s": wait_s})}

    @staticmethod
    def session(user, session, after=None, wait_s=None):
        _ids(user=user, session=session)
        return "GET", f"/v1/users/{_seg(user)}/sessions/{_seg(session)}", {"params": _drop_none({"after": after, "wait_s": wait_s})}

    @staticmethod
    def context(user, query, after=None, **options):
        _ids(user=user, session=options.get("session"), task=options.get("task"))
        return "POST", "/v1/context", {"json": _drop_none({"user": user, "query": query, "after": after, **options})}


class MemoryApi:
    def __init__(self, base_url: str, timeout: float = 30.0, api_key: str | None = None):
        self._http = httpx.Client(base_url=base_url, timeout=timeout, headers=_auth(api_key))

    def _call(self, spec):
        method, path, kw = spec
        return _check(self._http.request(method, path, **kw))

    def record_turn(self, *a, **kw): return self._call(_Calls.turn(*a, **kw))
    def record_step(self, *a, **kw): return self._call(_Calls.step(*a, **kw))
    def recall(self, *a, **kw): return self._call(_Calls.recall(*a, **kw))
    def profile(self, *a, **kw): return self._call(_Calls.profile(*a, **kw))
    def task_steps(self, *a, **kw): return self._call(_Calls.steps(*a, **kw))
    def session(self, *a, **kw): return self._call(_Calls.session(*a, **kw))
    def context(self, *a, **kw): return self._call(_Calls.context(*a, **kw))

    def close(self) -> None:
        self._http.close()


class AsyncMemoryApi:
    def __init__(self, base_url: str, timeout: float = 30.0, api_key: str | None = None):
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=_auth(api_key))

    async def _call(self, spec):
        method, path, kw = spec
        return _check(await self._http.request(method, path, **kw))

    async def record_turn(self, *a, **kw): return await self._call(_Calls.turn(*a, **kw))
    async def record_step(self, *a, **kw): return await self._call(_Calls.step(*a, **kw))
    async def recall(self, *a, **kw): return await self._call(_Calls.recall(*a, **kw))
    async def profile(self, *a, **kw): return await self._call(_Calls.profile(*a, **kw))
    async def task_steps(self, *a, **kw): return await self._call(_Calls.steps(*a, **kw))
    async def session(self, *a, **kw): return await self._call(_Calls.session(*a, **kw))
    async def context(self, *a, **kw): return await self._call(_Calls.context(*a, **kw))

    async def aclose(self) -> None:
        await self._http.aclose()
