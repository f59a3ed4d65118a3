"""Refuse a flood of unknown API keys before the web framework sees it (#28 item 4).

The client address's limit on unknown keys (services/rate_limits.py) already keeps such a flood
from the key store. But each refused request still went through FastAPI's routing (~35 route
patterns tried) and dependency resolution before `authenticate` refused it: ~0.9 ms of the API
process's CPU a request (measured: 822 random-key requests/s from 8 threads used 0.76 of a core),
and that CPU, under the process's one GIL, is what another tenant's recall waits for.

This ASGI middleware makes the same decision first, from the headers alone: a request whose key
(`Authorization: Bearer …` or `X-API-Key`) the key cache does not know, and that this process
never verified, takes one token of its client's lookup bucket; with none left it is answered 429
with Retry-After here, exactly as `authenticate` would have answered it. Admitted, it goes on
marked as charged, so `authenticate` does not charge it twice. Keys the cache knows (valid or
known invalid) and requests without a key pass through untouched.
"""
from __future__ import annotations

from collections.abc import Callable

import orjson

from kernel.errors import RateLimited
from services.access import charge_unknown_key

CHARGED = "memstream.lookup_charged"   # scope["state"] flag: this request's lookup was admitted here


def presented_key(headers) -> str | None:
    """The API key the request presents, as FastAPI's HTTPBearer / APIKeyHeader would read it."""
    bearer = api_key = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials:
                bearer = credentials
        elif name == b"x-api-key":
            api_key = value.decode("latin-1")
    return bearer or api_key


class EarlyRefusal:
    def __init__(self, app, settings, keys: Callable[[], object | None]):
        self.app, self.settings, self.keys = app, settings, keys

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            keys = self.keys()
            token = presented_key(scope.get("headers") or ()) if keys is not None else None
            if token is not None:
                client = scope.get("client")
                try:
                    if charge_unknown_key(keys, self.settings, token, client[0] if client else None):
                        scope.setdefault("state", {})[CHARGED] = True
                except RateLimited as exc:
                    return await _refuse(send, exc)
        return await self.app(scope, receive, send)


async def _refuse(send, exc: RateLimited) -> None:
    body = orjson.dumps({"error": str(exc)})
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(getattr(exc, "retry_after_s", 1)).encode())]})
    await send({"type": "http.response.body", "body": body})
