"""The HTTP API's operations side: an access log line per request, and the `/healthz` and
`/readyz` probes (no API key: they carry no user data).

Access log (logger `memstream.api.access`, INFO): request id, method, the route's template
(`/v1/users/{user}/profile`, never the raw path, which holds user ids), status, latency in ms. No
query string, no body, no header but the request id. The id is the caller's `X-Request-ID` when
it is a short token, else a new one; the response carries it back.

`/healthz`: the process serves HTTP (liveness). `/readyz` (readiness, what docker-compose and a
load balancer poll): Postgres answers a query, a Kafka broker accepts a connection, and every
projector's consumer lag is at most MEMSTREAM_READY_MAX_LAG records. 200 with each check's
result; 503 naming the check that failed and why. The checks run at most once per
READY_CACHE_S, however many probes arrive: a probe storm cannot load the stores.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.routing import Mount

from adapters.resilience import describe, unreachable

access = logging.getLogger("memstream.api.access")
READY_CACHE_S = 1.0
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class AccessLog:
    """ASGI middleware: one log line per HTTP request, once its response has started."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        rid = given if _REQUEST_ID.match(given) else uuid.uuid4().hex[:16]
        started = time.perf_counter()
        status = [500]   # an exception before any response: what the server will answer

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())]}
            await send(message)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            access.info("%s %s %s %d %.1f ms", rid, scope.get("method"), route_template(scope), status[0],
                        (time.perf_counter() - started) * 1000)


def route_template(scope) -> str:
    """The matched route's path template (Starlette sets scope["route"]); a mounted app's prefix
    plus `/…`; `(unmatched)` for a path no route knows (its raw text may be anything a caller sent)."""
    route = scope.get("route")
    if route is None or getattr(route, "path", None) is None:
        return "(unmatched)"
    return f"{route.path}/…" if isinstance(route, Mount) else route.path


class Readiness:
    """The three checks, cached READY_CACHE_S; concurrent probes share one run."""

    def __init__(self, settings, state: dict):
        self.settings, self.state = settings, state
        self._lock = asyncio.Lock()
        self._at, self._result = 0.0, None

    async def result(self) -> tuple[bool, dict]:
        async with self._lock:
            if self._result is None or time.monotonic() - self._at >= READY_CACHE_S:
                self._result = await run_in_threadpool(self._check)
                self._at = time.monotonic()
            return self._result

    def _check(self) -> tuple[bool, dict]:
        checks = {"postgres": self._postgres(), "kafka": self._kafka()}
        checks["projector_lag"] = (self._lag() if checks["kafka"]["ok"]
                                   else {"ok": False, "error": "not read: no Kafka broker reachable"})
        return all(c["ok"] for c in checks.values()), checks

    def _postgres(self) -> dict:
        models = self.state.get("models")
        if models is None:
            return {"ok": False, "error": "the API has not connected yet (starting)"}
        try:
            with models.pool.connection(timeout=2.0) as conn:
                conn.execute("SELECT 1")
            return {"ok": True}
        except Exception as exc:  # noqa: BLE001 - a probe reports, never raises
            return {"ok": False, "error": f"Postgres at {self.settings.pg_host}:{self.settings.pg_port}: {describe(exc)}"[:300]}

    def _kafka(self) -> dict:
        why = unreachable(list(self.settings.kafka_addresses))
        return {"ok": True} if why is None else {"ok": False, "error": f"no Kafka broker reachable ({why})"}

    def _lag(self) -> dict:
        from adapters.lag import consumer_lag, lag_by_group
        limit = self.settings.ready_max_lag
        prefix = f"{self.settings.namespace}.projector."
        try:
            by_group = {g.removeprefix(prefix): n for g, n in lag_by_group(consumer_lag(self.settings, timeout=2.0)).items()
                        if g.startswith(prefix)}
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "error": f"consumer lag not read: {describe(exc)}"[:300]}
        behind = {g: n for g, n in by_group.items() if n > limit}
        if behind:
            return {"ok": False, "max": limit, "lag": by_group,
                    "error": "projectors behind by more than MEMSTREAM_READY_MAX_LAG="
                             f"{limit}: " + ", ".join(f"{g} {n}" for g, n in sorted(behind.items()))}
        return {"ok": True, "max": limit, "lag": by_group}


def mount(app: FastAPI, settings, state: dict) -> None:
    """GET /healthz and /readyz (no API key), and the access log around every request."""
    readiness = Readiness(settings, state)

    @app.get("/healthz", summary="Liveness: the API process serves requests (no API key)", tags=["operations"])
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: Postgres, Kafka and the projectors' lag (no API key; cached 1 s)",
             tags=["operations"], responses={503: {"description": "a check failed; its `error` says why"}})
    async def readyz():
        ok, checks = await readiness.result()
        body = {"status": "ready" if ok else "not ready", "checks": checks}
        if not ok:
            body["error"] = "; ".join(f"{name}: {c['error']}" for name, c in checks.items() if not c["ok"])
        return JSONResponse(body, status_code=200 if ok else 503)

    app.add_middleware(AccessLog)
