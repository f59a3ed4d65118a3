"""The SDK over the HTTP API, sync and async: a compatibility layer over memstream_client.

    api = MemoryApi("http://127.0.0.1:8080")
    pos = api.record_turn("alice", "s1", "user", "我叫Alice")
    api.recall("alice", "我叫什么", after=pos["token"])

The thin, typed client is the separate distribution `memstream-client` (clients/python, import
`memstream_client`: httpx and pydantic only), which agents should use: MemstreamClient /
AsyncMemstreamClient, typed models, context managers, retries of 503/429. MemoryApi and
AsyncMemoryApi keep the names and plain-dict results existing callers use (the framework adapters
in memstream/integrations, tests), and send every request through that client (`.client`, for its
other verbs): auth header, bounded retries honouring Retry-After, one error mapping.

Every call sends an API key (`Authorization: Bearer …`): the `api_key` argument, else
MEMSTREAM_API_KEY, else the local admin key `memstream stack up` wrote (<stack_dir>/secrets/api.key;
that fallback lives here, the thin client never imports memstream). A refused key raises
AccessDenied (401/403, the server's message names a missing scope); a user or memory outside the
key's reach is a 404 (MemstreamError), as if it did not exist; a 503 still answered after the
retries is Timeout.

Ids and content are checked against the input contract (schemas/limits.py) before a request is
sent; what only the server knows (its size limits) comes back as a 413/422, raised as InvalidInput
with the server's message naming the field and the limit.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import memstream_client
from memstream_client import AsyncMemstreamClient, MemstreamClient

from kernel.errors import AccessDenied, InvalidInput, MemstreamError, Timeout
from schemas.limits import check_content, check_id

# memstream_client's errors as the kernel.errors classes callers of this module catch (the
# message, the server's own words, is kept): 503/429 after retries was and stays Timeout; 404, 409
# and 410 stay plain MemstreamError.
_ERRORS: tuple[tuple[type[memstream_client.MemstreamError], type[MemstreamError]], ...] = (
    (memstream_client.InvalidInput, InvalidInput), (memstream_client.AccessDenied, AccessDenied),
    (memstream_client.Unavailable, Timeout))


def _translated(exc: memstream_client.MemstreamError) -> MemstreamError:
    cls = next((ours for theirs, ours in _ERRORS if isinstance(exc, theirs)), MemstreamError)
    out = cls(str(exc))
    out.status = exc.status               # type: ignore[attr-defined]   # for callers that look
    out.problems = exc.problems           # type: ignore[attr-defined]
    return out


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


def _key(api_key: str | None) -> str | None:
    """The given key, else MEMSTREAM_API_KEY, else the local admin key (None: the server's 401 says so)."""
    if api_key is None:
        from kernel.config import get_settings
        from adapters.privacy.tenants import local_api_key
        api_key = local_api_key(get_settings())
    return api_key or ""        # "": no header, and memstream_client does not look at the environment again


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


Spec = tuple[str, str, dict[str, Any]]


class _Calls:
    """Request shapes shared by the sync and async clients: (method, path, {"json" | "params", "wait_s"})."""

    @staticmethod
    def turn(user, session, role, content, task=None, at=None) -> Spec:
        _ids(user=user, session=session, task=task)
        check_content(content)  # the size limit is the server's setting: a 422 names it
        return "POST", "/v1/turns", {"json": _drop_none({"user": user, "session": session, "role": role, "content": content,
                                                          "task": task, "at": at.isoformat() if at else None})}

    @staticmethod
    def step(user, task, content, status="ok", kind="step", session=None) -> Spec:
        _ids(user=user, task=task, session=session)
        check_content(content)
        return "POST", "/v1/steps", {"json": _drop_none({"user": user, "task": task, "content": content,
                                                          "status": status, "kind": kind, "session": session})}

    @staticmethod
    def recall(user, query, k=10, after=None, **filters) -> Spec:
        _ids(user=user)
        if not query:
            raise InvalidInput("query is empty")
        return "POST", "/v1/recall", {"json": _drop_none({"user": user, "query": query, "k": k, "after": after, **filters}),
                                      "wait_s": filters.get("wait_s")}

    @staticmethod
    def profile(user, after=None, wait_s=None) -> Spec:
        _ids(user=user)
        return "GET", f"/v1/users/{_seg(user)}/profile", {"params": _drop_none({"after": after, "wait_s": wait_s}),
                                                         "wait_s": wait_s}

    @staticmethod
    def steps(user, task, k=20, after=None, wait_s=None) -> Spec:
        _ids(user=user, task=task)
        return "GET", f"/v1/users/{_seg(user)}/tasks/{_seg(task)}/steps", {
            "params": _drop_none({"k": k, "after": after, "wait_s": wait_s}), "wait_s": wait_s}

    @staticmethod
    def session(user, session, after=None, wait_s=None) -> Spec:
        _ids(user=user, session=session)
        return "GET", f"/v1/users/{_seg(user)}/sessions/{_seg(session)}", {
            "params": _drop_none({"after": after, "wait_s": wait_s}), "wait_s": wait_s}

    @staticmethod
    def forget_session(user, session, reason=None) -> Spec:
        _ids(user=user, session=session)
        return "DELETE", f"/v1/users/{_seg(user)}/sessions/{_seg(session)}", {
            "params": _drop_none({"reason": reason or None})}

    @staticmethod
    def context(user, query, after=None, **options) -> Spec:
        _ids(user=user, session=options.get("session"), task=options.get("task"))
        return "POST", "/v1/context", {"json": _drop_none({"user": user, "query": query, "after": after, **options}),
                                       "wait_s": options.get("wait_s")}


def _sync(shape: Callable[..., Spec]) -> Callable[..., Any]:
    @functools.wraps(shape)
    def call(self: MemoryApi, *a, **kw):
        return self._call(shape(*a, **kw))
    return call


def _async(shape: Callable[..., Spec]) -> Callable[..., Any]:
    @functools.wraps(shape)
    async def call(self: AsyncMemoryApi, *a, **kw):
        return await self._call(shape(*a, **kw))
    return call


class MemoryApi:
    """The HTTP API with plain-dict results (see the module's doc); `.client` is the typed
    memstream_client.MemstreamClient underneath, for the verbs this class does not have."""

    def __init__(self, base_url: str, timeout: float = 30.0, api_key: str | None = None, max_retries: int = 3):
        self.client = MemstreamClient(base_url, api_key=_key(api_key), timeout=timeout, max_retries=max_retries)

    @property
    def _http(self) -> httpx.Client:
        return self.client._http

    @_http.setter
    def _http(self, http: httpx.Client) -> None:   # tests put an in-process app's TestClient here
        self.client._http = http

    def _call(self, spec: Spec):
        method, path, kw = spec
        try:
            return self.client.request(method, path, params=kw.get("params"), json=kw.get("json"),
                                       wait_s=kw.get("wait_s"))
        except memstream_client.MemstreamError as exc:
            raise _translated(exc) from exc

    record_turn = _sync(_Calls.turn)
    record_step = _sync(_Calls.step)
    recall = _sync(_Calls.recall)
    profile = _sync(_Calls.profile)
    task_steps = _sync(_Calls.steps)
    session = _sync(_Calls.session)
    forget_session = _sync(_Calls.forget_session)
    context = _sync(_Calls.context)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> MemoryApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryApi:
    """MemoryApi's methods, awaited; `.client` is the typed memstream_client.AsyncMemstreamClient."""

    def __init__(self, base_url: str, timeout: float = 30.0, api_key: str | None = None, max_retries: int = 3):
        self.client = AsyncMemstreamClient(base_url, api_key=_key(api_key), timeout=timeout, max_retries=max_retries)

    async def _call(self, spec: Spec):
        method, path, kw = spec
        try:
            return await self.client.request(method, path, params=kw.get("params"), json=kw.get("json"),
                                             wait_s=kw.get("wait_s"))
        except memstream_client.MemstreamError as exc:
            raise _translated(exc) from exc

    record_turn = _async(_Calls.turn)
    record_step = _async(_Calls.step)
    recall = _async(_Calls.recall)
    profile = _async(_Calls.profile)
    task_steps = _async(_Calls.steps)
    session = _async(_Calls.session)
    forget_session = _async(_Calls.forget_session)
    context = _async(_Calls.context)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> AsyncMemoryApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
