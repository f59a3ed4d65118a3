"""The input contract, in one place: what a user, session or task id and what content may be.

Ids route records (the Kafka key is the user id), name rows (Postgres text columns cannot hold a
NUL) and appear in URLs, so they are short and printable: 1–200 characters, no control characters
(C0, DEL, C1; NUL included). Content may hold newlines and tabs (\\n \\r \\t) but no other control
character. The size of content is a deployment setting (MEMSTREAM_MAX_CONTENT_CHARS), checked where
input enters (the API, the SDK, the CLI), never when reading the log back.

Every edge uses these functions: the event models (schemas/events.py), make_envelope and decode
(schemas/codec.py: a record from Kafka that breaks them is poison and is dead-lettered), the HTTP
API's models, both SDKs and the CLI. The errors are InvalidInput, which is also a ValueError, so a
pydantic validator that calls these turns them into a validation error naming the field.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Annotated

from pydantic import AfterValidator, Field

from kernel.errors import InvalidInput

ID_MAX_CHARS = 200
# Anything but C0 controls, DEL and C1 controls; a JSON Schema / OpenAPI `pattern` (ECMA and Rust regex alike).
ID_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]+$"
CONTENT_PATTERN = r"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*$"
_ID_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTENT_BAD = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")   # \t \n \r allowed
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_id(value: str, what: str = "id") -> str:
    """A user, session or task id: 1–200 characters, none of them a control character."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    if not value:
        raise InvalidInput(f"{what} is empty (ids are 1-{ID_MAX_CHARS} characters)")
    if len(value) > ID_MAX_CHARS:
        raise InvalidInput(f"{what} has {len(value)} characters, over the limit of {ID_MAX_CHARS}")
    bad = _ID_BAD.search(value) or _SURROGATE.search(value)
    if bad:
        raise InvalidInput(f"{what} contains control characters ({bad.group()!r} at {bad.start()}); "
                           f"ids are printable")
    return value


def check_content(value: str, what: str = "content", max_chars: int | None = None) -> str:
    """Text (a turn's or step's content, a goal): no control characters but \\n \\r \\t; at most
    `max_chars` characters when given (the MEMSTREAM_MAX_CONTENT_CHARS setting at the edges)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{what} has {len(value)} characters, over the limit of {max_chars} "
                           f"(MEMSTREAM_MAX_CONTENT_CHARS)")
    bad = _CONTENT_BAD.search(value) or _SURROGATE.search(value)
    if bad:
        raise InvalidInput(f"{what} contains control characters ({bad.group()!r} at {bad.start()}); "
                           f"only \\n, \\r and \\t are allowed")
    return value


EARLIEST_EVENT_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)


def check_event_time(at: datetime | None, max_future_skew_s: float, now: datetime | None = None) -> datetime | None:
    """An event time given by a caller may lie in the past (back-fill) but not more than
    `max_future_skew_s` seconds in the future: a user's clock is their newest event time, and a
    clock moved forward would make consolidation expire their memories.

    Nor before 1970-01-01 (refused, not shifted): event ids are UUIDv7, whose time is milliseconds
    since the Unix epoch, and an id must sort with its time. An event time is when something was
    said or done to the agent — no agent turn predates 1970; a date a user talks about ("I was
    born in 1962") is content, and stays content."""
    if at is None:
        return None
    if at.tzinfo is None:
        raise InvalidInput("at must carry a timezone, e.g. 2026-01-02T10:00:00+00:00")
    if at < EARLIEST_EVENT_TIME:
        raise InvalidInput(f"at {at.isoformat()} is before 1970-01-01T00:00:00+00:00, the earliest event time "
                           "(event ids are UUIDv7: milliseconds since the Unix epoch); a date the user talks about "
                           "belongs in the content")
    now = now or datetime.now(at.tzinfo)
    if at - now > timedelta(seconds=max_future_skew_s):
        raise InvalidInput(f"at {at.isoformat()} is more than {max_future_skew_s:g} s in the future "
                           f"(MEMSTREAM_MAX_FUTURE_SKEW_S); past times (back-fill) are allowed")
    return at


def _id(what: str) -> AfterValidator:
    return AfterValidator(lambda v: check_id(v, what))


_ID_SCHEMA = {"pattern": ID_PATTERN}
UserId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, json_schema_extra=_ID_SCHEMA), _id("user id")]
SessionId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, json_schema_extra=_ID_SCHEMA), _id("session id")]
TaskId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, json_schema_extra=_ID_SCHEMA), _id("task id")]
Text = Annotated[str, Field(json_schema_extra={"pattern": CONTENT_PATTERN}), AfterValidator(lambda v: check_content(v, "content"))]
Label = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, json_schema_extra=_ID_SCHEMA), _id("kind")]


# -- agent and run ids, and metadata (turns, facts, memories: issue 25) ------------------------
# An agent id and a run id are short ids with the session id's rules (1-200 printable characters).
AgentId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, json_schema_extra=_ID_SCHEMA), _id("agent_id")]
RunId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, json_schema_extra=_ID_SCHEMA), _id("run_id")]

# Metadata is a flat JSON object a caller attaches (Mem0's `metadata`): filterable in SQL (a jsonb
# column with a GIN index, projections/pg.py), so it is small and plain — no nesting, no nulls.
METADATA_MAX_KEYS = 16
METADATA_KEY_MAX_CHARS = 64
METADATA_MAX_BYTES = 2048   # the object as compact JSON (UTF-8)
METADATA_KEY_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]{1,64}$"
MetadataValue = str | bool | int | float


def check_metadata(value: object, what: str = "metadata") -> dict[str, MetadataValue]:
    """A flat object: at most 16 keys of 1-64 printable characters, each value a string (no control
    characters but \\n \\r \\t), a finite number or a boolean; at most 2048 bytes as compact JSON."""
    import json
    import math
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object of keys to strings, numbers or booleans")
    if len(value) > METADATA_MAX_KEYS:
        raise InvalidInput(f"{what} has {len(value)} keys, over the limit of {METADATA_MAX_KEYS}")
    for k, v in value.items():
        if not isinstance(k, str) or not k or len(k) > METADATA_KEY_MAX_CHARS:
            raise InvalidInput(f"{what} key {str(k)[:80]!r} must be 1-{METADATA_KEY_MAX_CHARS} characters")
        check_id(k, f"{what} key")
        if isinstance(v, str):
            check_content(v, f"{what}.{k}")
        elif isinstance(v, bool):
            pass
        elif isinstance(v, int | float):
            if isinstance(v, float) and not math.isfinite(v):
                raise InvalidInput(f"{what}.{k} must be a finite number")
            if isinstance(v, int) and abs(v) > 2 ** 53:
                raise InvalidInput(f"{what}.{k} is an integer beyond ±2^53 (not exact in JSON)")
        else:
            raise InvalidInput(f"{what}.{k} must be a string, a number or a boolean "
                               f"(metadata is flat: no objects, lists or nulls)")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > METADATA_MAX_BYTES:
        raise InvalidInput(f"{what} is {size} bytes as JSON, over the limit of {METADATA_MAX_BYTES}")
    return value


Metadata = Annotated[dict[str, MetadataValue],
                     Field(json_schema_extra={"maxProperties": METADATA_MAX_KEYS,
                                              "propertyNames": {"pattern": METADATA_KEY_PATTERN}}),
                     AfterValidator(lambda v: check_metadata(v))]
