"""Request shapes shared by the sync and async clients, their retry rule, and answer checking.

No I/O here: each builder returns a `Req` (method, path, query, JSON body); the clients send it.
"""
from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from memstream_client.errors import InvalidInput, MemstreamError, error_for
from memstream_client.models import Message, Position, Turn

RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    wait_s: float | None = None      # the server may hold the answer this long: the read timeout grows by it


def seg(value: str, what: str = "id") -> str:
    """An id as one URL path segment ('?', '%', '#', spaces escaped). A '/' cannot be carried: the
    server's router decodes %2F before matching, so such an id is refused here, clearly."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} must be a non-empty string, not {value!r}")
    if "/" in value:
        raise InvalidInput(f"{what} {value!r} contains '/', which a URL path of the HTTP API cannot carry")
    return quote(value, safe="")


def token(after: str | Position | None) -> str | None:
    """`after` as the server wants it: a position's token."""
    return after.token if isinstance(after, Position) else after


def iso(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def message(m: Message | Mapping[str, Any]) -> dict[str, Any]:
    return m.model_dump(mode="json") if isinstance(m, BaseModel) else {k: iso(v) for k, v in m.items()}


def turn(t: Turn | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(t, BaseModel):
        return t.model_dump(mode="json", exclude_none=True)
    return drop_none({k: iso(v) for k, v in t.items()})


def retry_after(resp: httpx.Response) -> float | None:
    """Seconds the server asks to wait (Retry-After: seconds or an HTTP date), or None."""
    value = resp.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(attempt: int, resp: httpx.Response | None, base: float, cap: float) -> float:
    """How long to wait before retry number `attempt` (0-based): the server's Retry-After if it
    sent one, else exponential from `base`; never more than `cap`."""
    asked = retry_after(resp) if resp is not None else None
    return min(cap, asked if asked is not None else base * (2 ** attempt))


def answer(resp: httpx.Response) -> Any:
    """The JSON of a 2xx answer; an error answer raised as its MemstreamError subclass."""
    try:
        body: Any = resp.json() if resp.content else None
    except ValueError:
        body = {"error": resp.text[:300]}
    if resp.status_code >= 400:
        raise error_for(resp.status_code, body, retry_after(resp))
    if resp.status_code >= 300:
        raise MemstreamError(f"HTTP {resp.status_code}: unexpected redirect", status=resp.status_code)
    return body


def many(items: Sequence[Any] | None) -> list[Any] | None:
    return None if items is None else list(items)
