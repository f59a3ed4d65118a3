"""One root error type: every error memstream raises on purpose is a MemstreamError."""


class MemstreamError(Exception):
    """Root of every deliberate memstream error."""


class ConfigError(MemstreamError):
    """A setting is missing or invalid."""


class PrerequisiteMissing(MemstreamError):
    """Something the local stack needs is not installed; the message says how to get it."""


class StackError(MemstreamError):
    """A local service failed to start or to become healthy."""


class InvalidEvent(MemstreamError):
    """A record failed to decode or validate; `reason` is precise enough to act on."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class UnknownEventVersion(InvalidEvent):
    """The (type, version) pair has no schema and no upcaster path."""


class UserErased(MemstreamError):
    """The user was erased: no data key is ever created for them again, so nothing of theirs can be
    sealed (publishing for them fails with this; consumers drop such events and count them)."""


class ClockAhead(MemstreamError):
    """This host's clock runs ahead of the broker's by more than MEMSTREAM_MAX_FUTURE_SKEW_S: events it
    stamps would be dated in the future and refused by every consumer, so it publishes none."""


class Timeout(MemstreamError):
    """A wait (e.g. read-your-writes) ran past its deadline."""


class TooManyWaits(Timeout):
    """A tenant already has MEMSTREAM_MAX_WAITS_PER_TENANT reads waiting for positions: retry shortly
    (HTTP 429). A Timeout, so every caller that retries a not-yet retries this too."""


class TooManyAsOf(TooManyWaits):
    """MEMSTREAM_MAX_AS_OF_REPLAYS as-of reads are replaying in this process already: retry shortly
    (HTTP 429)."""


class RateLimited(TooManyWaits):
    """A key, its tenant or a client of unknown keys is over its request rate
    (MEMSTREAM_RATE_LIMIT_*; services/rate_limits.py): retry after `retry_after_s` (HTTP 429)."""

    def __init__(self, message: str, retry_after_s: int = 1):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class InvalidInput(MemstreamError, ValueError):
    """A caller's input breaks the input contract (schemas/limits.py): the message names the field
    and the limit. Also a ValueError, so a pydantic validator raising it yields a validation error."""


class AccessDenied(MemstreamError):
    """The HTTP API refused the API key: none or an unknown/revoked one (401), or a scope missing (403)."""


class NotAuthenticated(AccessDenied):
    """No API key, or an unknown or revoked one: HTTP 401, MCP UNAUTHORIZED, the console's sign-in form."""


class MissingScope(AccessDenied):
    """The API key lacks a scope the use case needs (`scope` names it): HTTP 403, MCP FORBIDDEN."""

    def __init__(self, scope: str, message: str | None = None):
        super().__init__(message or f"this API key lacks the scope {scope}")
        self.scope = scope


class PositionPastEnd(InvalidInput):
    """A read-your-writes token names a position past the end of the log: no publish returned it, so
    waiting longer would never help (HTTP 409; elsewhere it is bad input like any other)."""


class NotActive(InvalidInput):
    """The memory is the caller's but not active (outdated, merged, deduped, archived): it cannot be
    edited, its active version can (HTTP 409; elsewhere it is bad input like any other)."""
