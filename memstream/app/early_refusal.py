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

A refusal is answered after MEMSTREAM_UNKNOWN_KEY_REFUSAL_DELAY_S (a tarpit), not at once: parsing
and answering a refused request still costs ~0.35 ms of the process's CPU, so a flooder that
waits for its answers would otherwise send as many as the process can parse, and another
tenant's recall waits behind them. Held, a flooder with N connections gets N / delay refusals a
second. The held refusals are asyncio sleeps (no thread, no CPU), at most MAX_HELD at once: beyond
that they are answered at once, so memory stays bounded whatever the number of connections.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

import orjson

from kernel.errors import RateLimited
from services.access import charge_unknown_key

CHARGED = "memstream.lookup_charged"   # scope["state"] flag: this request's lookup was admitted here
MAX_HELD = 1024                          # refusals held back at once per process (see the module's doc)


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
        self.held = 0

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
                    return await self._refuse_later(send, exc)
        return await self.app(scope, receive, send)

    async def _refuse_later(self, send, exc: RateLimited) -> None:
        delay = self.settings.unknown_key_refusal_delay_s
        if delay > 0 and self.held < MAX_HELD:
            self.held += 1
            try:
                await asyncio.sleep(delay)
            finally:
                self.held -= 1
        await _refuse(send, exc)


async def _refuse(send, exc: RateLimited) -> None:
    body = orjson.dumps({"error": str(exc)})
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(getattr(exc, "retry_after_s", 1)).encode())]})
    await send({"type": "http.response.body", "body": body})
