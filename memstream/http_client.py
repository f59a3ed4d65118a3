"""The SDK over the HTTP API (httpx), sync and async: for agents that only reach memstream by HTTP.

    api = MemoryApi("http://127.0.0.1:8080")
    pos = api.record_turn("alice", "s1", "user", "我叫Alice")
    api.recall("alice", "我叫什么", after=pos["token"])
"""
from __future__ import annotations

import httpx

from memstream.errors import MemstreamError, Timeout


def _check(resp: httpx.Response):
    if resp.status_code == 503:
        raise Timeout(resp.json().get("error", resp.text))
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            body = {"error": resp.text}
        raise MemstreamError(f"HTTP {resp.status_code}: {body.get('error')} {body.get('problems', '')}".strip())
    return resp.json()


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


class _Calls:
    """Request shapes shared by the sync and async clients."""

    @staticmethod
    def turn(user, session, role, content, task=None, at=None):
        return "POST", "/v1/turns", {"json": _drop_none({"user": user, "session": session, "role": role, "content": content,
                                                          "task": task, "at": at.isoformat() if at else None})}

    @staticmethod
    def step(user, task, content, status="ok", kind="step", session=None):
        return "POST", "/v1/steps", {"json": _drop_none({"user": user, "task": task, "content": content,
                                                          "status": status, "kind": kind, "session": session})}

    @staticmethod
    def recall(user, query, k=10, after=None, **filters):
        return "POST", "/v1/recall", {"json": _drop_none({"user": user, "query": query, "k": k, "after": after, **filters})}

    @staticmethod
    def profile(user, after=None, wait_s=None):
        return "GET", f"/v1/users/{user}/profile", {"params": _drop_none({"after": after, "wait_s": wait_s})}

    @staticmethod
    def steps(user, task, k=20, after=None, wait_s=None):
        return "GET", f"/v1/users/{user}/tasks/{task}/steps", {"params": _drop_none({"k": k, "after": after, "wait_s": wait_s})}

    @staticmethod
    def session(user, session, after=None, wait_s=None):
        return "GET", f"/v1/users/{user}/sessions/{session}", {"params": _drop_none({"after": after, "wait_s": wait_s})}

    @staticmethod
    def context(user, query, after=None, **options):
        return "POST", "/v1/context", {"json": _drop_none({"user": user, "query": query, "after": after, **options})}


class MemoryApi:
    def __init__(self, base_url: str, timeout: float = 30.0):
        self._http = httpx.Client(base_url=base_url, timeout=timeout)

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
    def __init__(self, base_url: str, timeout: float = 30.0):
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout)

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
