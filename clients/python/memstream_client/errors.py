"""One root error type, one subclass per kind of answer a caller acts on differently.

    MemstreamError            every error this client raises
    ├── InvalidInput          413 / 422 (and input refused before sending): `problems` names each field
    ├── AccessDenied          401 / 403: no key, an unknown or revoked one, or a scope missing (named)
    ├── NotFound              404: not there, or outside the key's reach (another tenant's, another user's)
    ├── Conflict              409: `after` names a position past the end of the log
    ├── Gone                  410: the user was erased; nothing can be recorded for them
    └── Unavailable           503 / 429 after the retries, or the server could not be reached

Every error carries `status` (the HTTP status, None when nothing was answered), `error` (the
server's one-line message) and `problems` (its per-field list, for a 422).
"""
from __future__ import annotations

from typing import Any


class MemstreamError(Exception):
    """Root of every error memstream_client raises."""

    def __init__(self, message: str, *, status: int | None = None, error: str | None = None,
                 problems: list[str] | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error if error is not None else message
        self.problems: list[str] = list(problems or [])
        self.retry_after = retry_after


class InvalidInput(MemstreamError, ValueError):
    """The request breaks the server's input contract (413, 422): `problems` lists `field: what is wrong`."""


class AccessDenied(MemstreamError):
    """The API key was refused: none, unknown or revoked (401), or it lacks the route's scope (403)."""


class NotFound(MemstreamError):
    """404: no such memory or user, or one outside the key's reach (answered as if it did not exist)."""


class Conflict(MemstreamError):
    """409: `after` names an offset past the end of the log (no publish returned it)."""


class Gone(MemstreamError):
    """410: the user was erased; nothing can be recorded for them again."""


class Unavailable(MemstreamError):
    """503 or 429 still answered after the bounded retries (a wait for `after` ran out, a backing
    service is down, or the server is busy), or the server could not be reached at all."""


_BY_STATUS: dict[int, type[MemstreamError]] = {
    401: AccessDenied, 403: AccessDenied, 404: NotFound, 409: Conflict, 410: Gone,
    413: InvalidInput, 422: InvalidInput, 429: Unavailable, 503: Unavailable,
}


def error_for(status: int, body: Any, retry_after: float | None = None) -> MemstreamError:
    """The error an HTTP error answer means. The message keeps the server's words:
    `HTTP 422: invalid request: k: Input should be greater than or equal to 1`."""
    if not isinstance(body, dict):
        body = {"error": str(body)[:300]}
    error = body.get("error")
    error = str(error) if error is not None else ""
    raw = body.get("problems")
    problems = [str(p) for p in raw] if isinstance(raw, list) else []
    message = f"HTTP {status}: {error}" + (f": {'; '.join(problems)}" if problems else "")
    cls = _BY_STATUS.get(status, MemstreamError)
    return cls(message, status=status, error=error, problems=problems, retry_after=retry_after)
