"""The HTTP API (FastAPI): publish, recall, profile, preferences, task steps, session window, context.

Every query is scoped to one user. A query may pass `after` (the position token a publish
returned) and then waits, up to `wait_s`, until the read models it uses have applied it.
OpenAPI is served at /openapi.json and /docs. Run: `memstream api` (uvicorn).

The input contract (schemas/limits.py; README "HTTP API"): ids 1-200 printable characters, content
without control characters (but \n \r \t) and at most MEMSTREAM_MAX_CONTENT_CHARS, `at` at most
MEMSTREAM_MAX_FUTURE_SKEW_S ahead, `wait_s` at most MEMSTREAM_MAX_WAIT_S, bodies at most
MEMSTREAM_MAX_BODY_BYTES. A breach is a 422 naming the field (413 for a body too large); every
status a route can answer is declared in its OpenAPI `responses`. Errors are {"error", "problems"}
and never carry internals: an unexpected exception is a generic 500 (logged here), an outage 503.
Waits for `after` are asyncio waits (query/consistency.py): they hold no thread.

Trust boundary (adapters/privacy/tenants.py, apikeys.py): every route needs an API key
(`Authorization: Bearer <key>` or `X-API-Key`) — none or an unknown/revoked one is a 401, one
without the route's scope a 403 naming it. A key belongs to a tenant, and the user ids a caller
names are that tenant's: they become `<tenant>/<user>` inside (bare for tenant `default`), so a
tenant can neither name nor read another tenant's users; answers carry the caller's own ids. A
key bound to one end user gets 404 for any other user, and a memory id whose memory is not the
caller's is a 404 too (memory ids are global).
"""
import logging
import sys
import re
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer,
                      create_model, model_validator)
from starlette.exceptions import HTTPException

from kernel.config import Settings, get_settings
from kernel.errors import (InvalidEvent, InvalidInput, MissingScope, NotActive, NotAuthenticated, PositionPastEnd, Timeout,
                              TooManyWaits, UserErased)
from adapters.privacy.tenants import NotYours, Principal
from services import audit, context, erase, forget, memories, profile, recall, relations, remember, short_term
from services.access import authenticate
from services.backend import Backend
from services.memories import CURSOR_PATTERN
from services.read_your_writes import log_topics as namespace_topics
from schemas.events import Category
from schemas.limits import (CONTENT_PATTERN, ID_PATTERN, METADATA_KEY_MAX_CHARS, METADATA_KEY_PATTERN, METADATA_MAX_BYTES, AgentId, Label, Metadata, RunId, SessionId,
                            TaskId, Text, UserId, check_content, check_event_time, check_id)

log = logging.getLogger("memstream.api")

# topic:partition:offset as a publish returns it (Kafka topic names: [A-Za-z0-9._-], at most 249).
TOKEN_PATTERN = r"^[A-Za-z0-9._-]{1,249}:[0-9]{1,9}:[0-9]{1,18}$"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_only(value):
    """Times are ISO 8601 text: pydantic would also read a number (`as_of=-240`) as a Unix time."""
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO.match(value)):
        return value
    raise ValueError("must be an ISO 8601 date-time with a timezone, e.g. 2026-01-02T10:00:00+00:00")


def _no_slash(value: str) -> str:
    """'/' separates a tenant from its users inside memstream (tenants.py): a caller may not use it."""
    if "/" in value:
        raise InvalidInput(f"user id {value!r} contains '/', which the HTTP API does not accept "
                           f"(it separates a tenant from its users)")
    return value


# The input contract's user id, less '/' (the pattern tells generated clients and schemathesis).
ApiUserId = Annotated[UserId, Field(json_schema_extra={"pattern": r"^[^\u0000-\u001f\u007f-\u009f/]+$"}),
                      AfterValidator(_no_slash)]
IsoTime = Annotated[AwareDatetime, BeforeValidator(_iso_only)]
After = Field(None, pattern=TOKEN_PATTERN,
              description="Position token from a publish: wait until it is applied (read your writes).")
AsOf = Field(None, description="Time travel: answer from what memory held at this time (ISO 8601 with timezone; "
                               "read from the versions the read models keep, see query/as_of.py).")
UserParam = Annotated[ApiUserId, Path(description="The user every result is scoped to (1-200 printable characters).")]
# A category or tag filter: printable like an id (a NUL would reach Postgres as a query parameter).
Tag = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": ID_PATTERN}),
                AfterValidator(lambda v: check_id(v, "tag"))]


# Floats in answers, rounded: a real column read back is float32 noise (0.699999988079071 → 0.7).
Rounded = Annotated[float, PlainSerializer(lambda v: round(v, 6), return_type=float)]
MemoryIdParam = Annotated[str, Path(max_length=200, pattern=r"^[A-Za-z0-9_-]+$")]
BATCH_MAX = 100
CursorDoc = "`next_cursor` of the previous page (the next page starts after it)."


class ErrorOut(BaseModel):
    error: str = Field(description="What is wrong, in one line; never internals.")
    problems: list[str] | None = Field(None, description="Validation problems, one per field: `field: message`.")


class Position(BaseModel):
    topic: str
    partition: int
    offset: int
    token: str


class ForgottenOut(Position):
    memory_ids: list[str]


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId = Field(description="The user every result is scoped to (one of the API key's tenant).")
    session: SessionId
    role: Literal["user", "assistant", "system", "tool"]
    content: Text = Field(min_length=1)
    task: TaskId | None = None
    at: IsoTime | None = Field(None, description="Event time (default: now); the past is allowed (back-fill), "
                                                 "the future only within MEMSTREAM_MAX_FUTURE_SKEW_S.")
    agent_id: AgentId | None = Field(None, description="The agent the turn belongs to (carried to its memories).")
    run_id: RunId | None = Field(None, description="The run the turn belongs to (carried to its memories).")
    metadata: Metadata | None = Field(None, description="Flat metadata carried to its memories: at most 16 keys of "
                                                        "1-64 characters, values strings, numbers or booleans, at "
                                                        "most 2048 bytes as JSON.")


class TurnBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    turns: list[TurnIn] = Field(min_length=1, max_length=BATCH_MAX)


class PositionsOut(BaseModel):
    positions: list[Position] = Field(description="One per item, in the order given.")


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system", "tool"] = "user"
    content: Text = Field(min_length=1)


class MemoryAddIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId
    content: Text | None = Field(None, min_length=1, description="One memory's text (or `messages`).")
    messages: list[MessageIn] | None = Field(None, min_length=1, max_length=BATCH_MAX,
                                             description=f"Several messages, in order (at most {BATCH_MAX}).")
    infer: bool = Field(True, description="true: extract from the text as from a user turn; false: keep each text "
                                          "as stated (one memory each, deduplicated and checked for conflicts).")
    category: Category | None = Field(None, description="infer=false only: the memory's category (default: "
                                                         "classified by the rules).")
    importance: float | None = Field(None, ge=0.0, le=1.0, description="infer=false only (default 0.6, or the "
                                                                          "rule's importance for a slot).")
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: Metadata | None = Field(None, description=TurnIn.model_fields["metadata"].description)
    session: SessionId | None = Field(None, description=f"The session (default `{memories.ADD_SESSION}`).")
    at: IsoTime | None = Field(None, description="Event time (default: now).")

    @model_validator(mode="after")
    def _one_text(self):
        if (self.content is None) == (self.messages is None):
            raise ValueError("give exactly one of `content` and `messages`")
        if self.infer and (self.category is not None or self.importance is not None):
            raise ValueError("`category` and `importance` apply to infer=false (kept as stated); with infer=true "
                             "extraction decides them")
        return self


# -- the filter language of POST /v1/memories/search (projections/memory_filters.py compiles it) ------
FilterText = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": ID_PATTERN}),
                       AfterValidator(lambda v: check_id(v, "value"))]
# A subnormal number (|x| < 2.2e-308) is read as 0: Postgres refuses it ("value out of range:
# underflow"), and no importance or metadata number is told apart from 0 at that scale
Finite = Annotated[float, Field(allow_inf_nan=False),
                   AfterValidator(lambda v: 0.0 if abs(v) < sys.float_info.min else v)]
MetaScalar = Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": CONTENT_PATTERN}),
                       AfterValidator(lambda v: check_content(v, "value"))] | bool | Finite
_OPS_DOC = {"minProperties": 1}


# An operator's value is never null (the fields are typed without None, defaulting to absent): a
# null would make {"gt": null} a schema-valid condition that is empty once the nulls are dropped
class TextOps(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_OPS_DOC)
    eq: FilterText = None
    ne: FilterText = None
    in_: list[FilterText] = Field(None, alias="in", min_length=1, max_length=100)
    nin: list[FilterText] = Field(None, min_length=1, max_length=100)


class NumberOps(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_OPS_DOC)
    eq: Finite = None
    ne: Finite = None
    in_: list[Finite] = Field(None, alias="in", min_length=1, max_length=100)
    nin: list[Finite] = Field(None, min_length=1, max_length=100)
    gt: Finite = None
    gte: Finite = None
    lt: Finite = None
    lte: Finite = None


class TimeOps(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_OPS_DOC)
    eq: IsoTime = None
    ne: IsoTime = None
    gt: IsoTime = None
    gte: IsoTime = None
    lt: IsoTime = None
    lte: IsoTime = None


class MetaOps(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_OPS_DOC)
    eq: MetaScalar = None
    ne: MetaScalar = None
    in_: list[MetaScalar] = Field(None, alias="in", min_length=1, max_length=100)
    nin: list[MetaScalar] = Field(None, min_length=1, max_length=100)
    gt: Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": CONTENT_PATTERN})] | Finite = None
    gte: Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": CONTENT_PATTERN})] | Finite = None
    lt: Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": CONTENT_PATTERN})] | Finite = None
    lte: Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": CONTENT_PATTERN})] | Finite = None


def _meta_keys(value: dict) -> dict:
    for k in value:
        check_id(k, "metadata key")
    return value


# Keys are plain str with the pattern in `propertyNames` (schemas.limits.Metadata does the same): a
# pattern on the key type itself documents `patternProperties`, which lets any other key through the
# schema with any value, while the server refuses it (schemathesis ST202)
MetaKey = Annotated[str, Field(min_length=1, max_length=METADATA_KEY_MAX_CHARS)]


class MemoryFilter(BaseModel):
    """One filter: every field given must hold (AND); `and` / `or` combine filters. A field takes a value
    (equality) or operators."""
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    and_: list["MemoryFilter"] | None = Field(None, alias="and", min_length=1, max_length=16)
    or_: list["MemoryFilter"] | None = Field(None, alias="or", min_length=1, max_length=16)
    status: FilterText | TextOps | None = Field(None, description="active, outdated, merged, deduped, archived")
    category: FilterText | TextOps | None = None
    agent_id: FilterText | TextOps | None = None
    run_id: FilterText | TextOps | None = None
    memory_id: FilterText | TextOps | None = None
    session: FilterText | TextOps | None = None
    importance: Finite | NumberOps | None = None
    created_at: IsoTime | TimeOps | None = None
    updated_at: IsoTime | TimeOps | None = None
    metadata: Annotated[dict[MetaKey, MetaScalar | MetaOps],
                        Field(min_length=1, max_length=16, json_schema_extra={"propertyNames": {"pattern": METADATA_KEY_PATTERN}}),
                        AfterValidator(_meta_keys)] | None = Field(
        None, description="Metadata keys to a value (equality) or operators; strings compare as "
                                         "text (ISO dates sort), numbers as numbers, mixed types never match.")


def _filters(f: MemoryFilter | None) -> dict | None:
    """A request's filters as the compiler reads them (projections/memory_filters.py)."""
    return f.model_dump(by_alias=True, exclude_none=True) if f is not None else None


class MemorySearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId
    filters: MemoryFilter | None = None
    status: Literal["active", "archived", "superseded", "merged", "all"] = Field(
        "active", description="Which memories, before the filters (`all`: let the filters say).")
    cursor: str | None = Field(None, pattern=CURSOR_PATTERN, description=CursorDoc)
    limit: int = Field(50, ge=1, le=200)
    after: str | None = After
    wait_s: float = Field(5.0, ge=0)


class MemoryAddOut(Position):
    positions: list[Position] = Field(description="One per message, in order; the top-level position (and token, "
                                                  "for `after`) is the last one.")


class MemoryOut(BaseModel):
    memory_id: str
    user: str | None = None
    content: str
    category: str
    key: str | None = None
    value: str | None = None
    tags: list[str] = []
    slot_hint: str | None = None
    importance: Rounded
    status: str = Field(description="active, outdated (superseded), merged, deduped, archived.")
    superseded_by: str | None = None
    merged_into: str | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None
    session: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict | None = None
    fact_id: str | None = None
    created_at: datetime
    updated_at: datetime


class MemoryPageOut(BaseModel):
    user: str
    memories: list[MemoryOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


def _edit_schema(schema: dict) -> None:
    """The OpenAPI document says what the validator checks (so a generated client and schemathesis
    know it): at least one field, only `metadata` may be null, and what check_metadata asks of its
    values (schemas/limits.py; all but the 2,048-byte total, which JSON Schema cannot say)."""
    schema["minProperties"] = 1
    for shape in schema["properties"]["metadata"].get("anyOf", []):
        if shape.get("type") == "object":
            shape["additionalProperties"] = {"anyOf": [
                {"type": "string", "pattern": CONTENT_PATTERN, "maxLength": METADATA_MAX_BYTES}, {"type": "boolean"},
                {"type": "integer", "minimum": -2 ** 53, "maximum": 2 ** 53}, {"type": "number"}]}
    for name in ("content", "category", "importance"):
        prop = schema["properties"][name]
        kept = [s for s in prop.pop("anyOf", []) if s.get("type") != "null"]
        if len(kept) == 1:
            prop.update(kept[0])
        elif kept:
            prop["anyOf"] = kept
        prop.pop("default", None)


class MemoryEditIn(BaseModel):
    """What an edit changes; every field left out is the memory's own (at least one is given)."""
    # extra="forbid": a misspelt field is a 422, not silently ignored
    model_config = ConfigDict(extra="forbid", json_schema_extra=_edit_schema)
    content: Text | None = Field(None, min_length=1, description="The new text (default: unchanged).")
    category: Category | None = Field(None, description="The new category (default: unchanged).")
    importance: float | None = Field(None, ge=0.0, le=1.0, description="The new importance (default: unchanged).")
    metadata: Metadata | None = Field(None, description="The new flat metadata, replacing the old; null clears it "
                                                         "(default: unchanged).")

    @model_validator(mode="after")
    def _a_change(self):
        if not self.model_fields_set:
            raise ValueError("give at least one of `content`, `category`, `importance`, `metadata`")
        for name in ("content", "category", "importance"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"`{name}` may not be null (leave it out to keep it)")
        return self


class MemoryEditOut(Position):
    memory_id: str = Field(description="The id of the new version the edit creates (the edited memory becomes "
                                       "outdated, superseded by it); pass `token` as `after` to read it.")


class MemoryHistoryOut(BaseModel):
    user: str
    memory_id: str
    status: str
    versions: list[dict] = Field(description="Every event that created or changed the memory, oldest first, each "
                                             "with what it set and `caused_by` (the fact, request or decision).")
    origin: list[dict] = Field(description="Where it came from: the creation, its fact, the turn or statement.")
    parents: list[str | None] = Field(description="Memories it superseded or absorbed (merges).")


# -- relational memory (#26): entities and relations (services/relations.py) -------------

# An id's characters, and at least one that is not blank: a reference of spaces names nothing (a 422).
ENTITY_REF_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
EntityRef = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": ENTITY_REF_PATTERN}),
                      AfterValidator(lambda v: check_id(v, "entity"))]
EntityRefDoc = ("An entity id, `self` (the user), a name or alias (case-insensitive), or `role:<word>` "
                "(whom the user's relation of that word points to, e.g. `role:sister`).")


class RelationEndOut(BaseModel):
    reason: str | None = Field(description="superseded, stated or negated.")
    ended_by: str | None = Field(None, description="The relation that superseded it, if any.")
    recorded_at: datetime | None = Field(None, description="Event time of the ending.")
    source_turn: str | None = Field(None, description="The turn that ended it.")


class RelationOut(BaseModel):
    relation_id: str
    subject_id: str = Field(description="An entity id; `self` is the user.")
    subject_name: str | None = None
    predicate: str
    object_id: str
    object_name: str | None = None
    group: str | None = Field(None, description="family, partner, social, work, place, possession, participation, "
                                                "identity.")
    text: str | None = Field(None, description="The relation as an English sentence.")
    current: bool
    valid_from: datetime = Field(description="Holds from (event time).")
    valid_to: datetime | None = Field(None, description="Held until (event time); null while current.")
    recorded_at: datetime = Field(description="Event time of the assertion.")
    source_turn: str = Field(description="The turn that asserted it (provenance).")
    evidence: str = Field("", description="The clause it was read from.")
    ended: RelationEndOut | None = None
    forward: bool | None = Field(None, description="In a path: walked from subject to object (else backwards).")


class EntityOut(BaseModel):
    entity_id: str
    entity_type: str
    name: str | None = None
    aliases: list[str] = []
    source_turn: str | None = None
    updated_at: datetime | None = None


class EntityListItemOut(EntityOut):
    relations_to_user: list[RelationOut] = Field(description="Its current relations with the user, either direction.")


class EntitiesOut(BaseModel):
    user: str
    entities: list[EntityListItemOut]


class EntityDetailOut(EntityOut):
    user: str
    as_of: datetime | None = None
    relations: list[RelationOut] = Field(description="All its relations, both directions: current and ended "
                                                     "(with `as_of`: those holding then).")


class RelationsOut(BaseModel):
    user: str
    as_of: datetime | None = None
    relations: list[RelationOut]
    answer: str | None = Field(None, description="The relations as sentences, joined.")


class RelationPathOut(RelationsOut):
    from_: str = Field(alias="from")
    to: str
    found: bool
    hops: int
    model_config = ConfigDict(populate_by_name=True)


class StepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId
    task: TaskId
    content: Text = Field(min_length=1)
    status: Literal["ok", "failed", "pending"] = "ok"
    kind: Label = "step"
    session: SessionId | None = None
    at: IsoTime | None = None


class TaskStartIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId
    task: TaskId
    session: SessionId | None = None
    goal: Text = Field("", description="What the task is for (sealed with the user's key).")
    at: IsoTime | None = None


class TaskFinishIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: ApiUserId
    task: TaskId
    status: Literal["succeeded", "failed", "abandoned"] = "succeeded"
    at: IsoTime | None = None


class RecallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId
    query: Text = Field(min_length=1, max_length=4000)
    k: int = Field(10, ge=1, le=100)
    categories: list[Tag] | None = Field(None, max_length=20, description="Any of these categories.")
    tags: list[Tag] | None = Field(None, max_length=20, description="All of these tags.")
    max_age_hours: float | None = Field(None, gt=0, le=1e6)
    min_score: float | None = Field(None, ge=-10, le=10)
    expand: bool = True
    filters: MemoryFilter | None = Field(None, description="Mem0-style filters on the memories (agent_id, run_id, "
                                                             "metadata, category, importance, dates; and/or), in SQL.")
    after: str | None = After
    wait_s: float = Field(5.0, ge=0)
    as_of: IsoTime | None = AsOf


class RecallHitOut(BaseModel):
    memory_id: str
    content: str
    category: str
    tags: list[str]
    importance: Rounded
    created_at: datetime
    score: Rounded
    archived: bool = Field(False, description="An archived (expired) memory, found in the archive tier; recalling it revives it.")
    why: dict
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict | None = None


class ContextIn(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is a 422, not silently ignored
    user: ApiUserId
    query: Text = Field(min_length=1, max_length=4000)
    session: SessionId | None = None
    task: TaskId | None = None
    budget: int = Field(1200, ge=50, le=100_000)
    slot_budgets: dict[Literal["constraints", "profile", "recall", "people", "task", "tool_state", "recent"],
                       Annotated[int, Field(ge=0, le=100_000)]] = Field(default_factory=dict)
    k: int = Field(8, ge=1, le=50)
    filters: MemoryFilter | None = Field(None, description="Mem0-style filters on the memories the recall slot reads (agent_id, run_id, "
                                                             "metadata, category, importance, dates; and/or), in SQL.")
    after: str | None = After
    wait_s: float = Field(5.0, ge=0)


class ContextOut(BaseModel):
    text: str
    slots: dict


def _problems(errors) -> list[str]:
    """One readable line per problem: where (the field), and what is wrong."""
    out = []
    for e in errors:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body", "path", "query"))
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        out.append(f"{loc or '(body)'}: {msg}")
    return out


def _invalid(problems: list[str]) -> JSONResponse:
    return JSONResponse(status_code=422, content={"error": "invalid request", "problems": problems})


class BodyLimit:
    """Reject a request body over `limit` bytes with 413, before the app reads it: at once when its
    Content-Length says so, else while it streams in (chunked bodies declare no length)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = JSONResponse(status_code=413, content={
            "error": f"request body over {self.limit} bytes (MEMSTREAM_MAX_BODY_BYTES)"})
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            try:
                if int(declared) > self.limit:
                    return await too_large(scope, receive, send)
            except ValueError:
                return await JSONResponse(status_code=400, content={"error": "bad Content-Length"})(scope, receive, send)
        if declared is not None or scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
            # a declared length within the limit: the server never passes more than it (h11 checks)
            return await self.app(scope, receive, send)
        # No length: read the whole body here, up to the limit, then hand it on.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return await too_large(scope, receive, send)
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body, sent = b"".join(chunks), False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        await self.app(scope, replay, send)


def _responses(*codes: int) -> dict:
    """Every route also answers 401 (no or unknown key), 403 (a scope missing) and 404 (a user or
    memory outside the key's reach: another tenant's, or not the key's bound user)."""
    # 429: every keyed route is rate limited (MEMSTREAM_RATE_LIMIT_*), and reads that wait for
    # `after` are bounded per tenant (MEMSTREAM_MAX_WAITS_PER_TENANT)
    codes = tuple(sorted({401, 403, 404, 429, *codes}))
    what = {401: "No API key, or an unknown or revoked one", 403: "The API key lacks a scope this needs (named)",
            404: "Not found, or not reachable with this API key", 410: "The user was erased: nothing can be recorded for them",
            409: "`after` is past the end of the log: no publish returned that position",
            413: "Request body too large (MEMSTREAM_MAX_BODY_BYTES)",
            422: "Invalid input: `problems` names each field",
            429: "Too many requests: this key, its tenant or this client of unknown keys is over its rate "
                 "(MEMSTREAM_RATE_LIMIT_*), or the tenant already has MEMSTREAM_MAX_WAITS_PER_TENANT reads waiting "
                 "for `after`: retry after Retry-After", 503: "Not applied yet within wait_s, "
            "or a backing service is unavailable: retry later"}
    return {c: {"model": ErrorOut, "description": what[c]} for c in codes}


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        backend = state["backend"] = Backend(settings).open()
        state["models"] = backend.models      # the readiness probe's (probes.py)
        yield
        backend.close()

    app = FastAPI(title="memstream", version="1", lifespan=lifespan,
                  description="Long-term memory for AI agents. Every query is scoped to one user.")
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    from memstream.app.early_refusal import CHARGED, EarlyRefusal
    # outside BodyLimit and the router: a flood of unknown keys is refused before FastAPI routes it
    app.add_middleware(EarlyRefusal, settings=settings, keys=lambda: state["backend"].keys if "backend" in state else None)
    from memstream.app import probes
    probes.mount(app, settings, state)   # GET /healthz, /readyz (no API key) and the access log
    from adapters.metrics import mount
    mount(app, settings)   # GET /metrics, with consumer lag; no label holds personal data, so no API key
    from memstream.app import console
    console.mount(app, settings, state)   # the web console, /console (memstream/app/console/): same keys and scopes

    # -- the settings' limits, in the request models (so the OpenAPI document shows them) --------
    limit = settings.max_content_chars
    Content = Annotated[str, Field(min_length=1, json_schema_extra={"maxLength": limit, "pattern": CONTENT_PATTERN}),
                        AfterValidator(lambda v: check_content(v, "content", limit))]
    At = Annotated[IsoTime | None, AfterValidator(lambda v: check_event_time(v, settings.max_future_skew_s))]
    WaitS = Annotated[float, Field(ge=0, le=settings.max_wait_s,
                                   description=f"Most seconds to wait for `after` (at most {settings.max_wait_s:g}).")]
    Turn = create_model("TurnIn", __base__=TurnIn, content=(Content, ...), at=(At, Field(None, description=TurnIn.model_fields["at"].description)))
    TurnBatch = create_model("TurnBatchIn", __base__=TurnBatchIn,
                             turns=(list[Turn], Field(min_length=1, max_length=BATCH_MAX,  # type: ignore[valid-type]
                                                      description=f"1-{BATCH_MAX} turns, published in this order.")))
    MemoryAdd = create_model("MemoryAddIn", __base__=MemoryAddIn,
                             content=(Content | None, Field(None, description=MemoryAddIn.model_fields["content"].description)),
                             at=(At, Field(None, description=MemoryAddIn.model_fields["at"].description)))
    MemoryEdit = create_model("MemoryEditIn", __base__=MemoryEditIn,
                              content=(Content | None, Field(None, description=MemoryEditIn.model_fields["content"].description)))
    Step = create_model("StepIn", __base__=StepIn, content=(Content, ...), at=(At, None))
    TaskStart = create_model("TaskStartIn", __base__=TaskStartIn, at=(At, None))
    TaskFinish = create_model("TaskFinishIn", __base__=TaskFinishIn, at=(At, None))
    log_topics = namespace_topics(settings)
    # The token pattern names this namespace's topics and partitions, so the published document
    # says exactly which tokens exist; the offset is checked against the log's end (409).
    token_pattern = (r"^(?:" + "|".join(re.escape(t) for t in sorted(log_topics)) + r"):(?:"
                     + "|".join(str(p) for p in range(settings.partitions)) + r"):[0-9]{1,18}$")
    default_wait = min(5.0, settings.max_wait_s)   # a default above the limit would refuse its own default
    AfterF = (str | None, Field(None, pattern=token_pattern, description=After.description))
    Recall = create_model("RecallIn", __base__=RecallIn, wait_s=(WaitS, default_wait), after=AfterF)
    Context = create_model("ContextIn", __base__=ContextIn, wait_s=(WaitS, default_wait), after=AfterF)
    MemorySearch = create_model("MemorySearchIn", __base__=MemorySearchIn, wait_s=(WaitS, default_wait), after=AfterF)
    WaitQ = Annotated[float, Query(ge=0, le=settings.max_wait_s,
                                   description=f"Most seconds to wait for `after` (at most {settings.max_wait_s:g}).")]
    AfterQ = Annotated[str | None, Query(pattern=token_pattern, description=After.description)]
    AsOfQ = Annotated[IsoTime | None, Query(description=AsOf.description)]

    # -- errors: 422 for bad input, 503 to retry, a generic 500 for the rest -----------------
    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        return _invalid(_problems(exc.errors()))

    @app.exception_handler(InvalidInput)
    @app.exception_handler(InvalidEvent)
    async def bad_input(request: Request, exc: Exception):
        return _invalid([str(exc)])

    @app.exception_handler(PositionPastEnd)
    async def never_applied(request: Request, exc: PositionPastEnd):
        return JSONResponse(status_code=409, content={"error": str(exc)})

    @app.exception_handler(NotActive)
    async def not_active(request: Request, exc: NotActive):
        return JSONResponse(status_code=409, content={"error": str(exc)})

    @app.exception_handler(TooManyWaits)
    async def too_many_waits(request: Request, exc: TooManyWaits):
        return JSONResponse(status_code=429, headers={"Retry-After": str(getattr(exc, "retry_after_s", 1))},
                            content={"error": str(exc)})

    @app.exception_handler(Timeout)
    async def not_yet(request: Request, exc: Timeout):
        return JSONResponse(status_code=503, headers={"Retry-After": "1"}, content={"error": str(exc)})

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        return JSONResponse(status_code=exc.status_code, headers=getattr(exc, "headers", None),
                            content={"error": str(exc.detail)})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        from adapters.resilience import TRANSIENT, classify
        if classify(exc) == TRANSIENT:
            log.warning("%s %s: a backing service is unavailable: %r", request.method, request.url.path, exc)
            return JSONResponse(status_code=503, headers={"Retry-After": "1"},
                                content={"error": "a backing service is unavailable; retry later"})
        # starlette re-raises it after this answer, so the server logs the traceback; the caller sees none
        return JSONResponse(status_code=500, content={"error": "internal error"})

    @app.exception_handler(UserErased)
    async def erased(request: Request, exc: UserErased):
        # Erasure is final: nothing can be sealed for this user again (adapters/privacy/keystore.py).
        return JSONResponse(status_code=410, content={"error": "this user was erased; nothing can be recorded for them"})

    @app.exception_handler(relations.UnknownEntity)
    async def unknown_entity(request: Request, exc: relations.UnknownEntity):
        return JSONResponse(status_code=404, content={"error": str(exc)})

    @app.exception_handler(NotYours)
    async def not_yours(request: Request, exc: NotYours):
        return JSONResponse(status_code=404, content={"error": "not found"})

    @app.exception_handler(NotAuthenticated)
    async def unauthenticated(request: Request, exc: NotAuthenticated):
        return JSONResponse(status_code=401, headers={"WWW-Authenticate": "Bearer"}, content={"error": str(exc)})

    @app.exception_handler(MissingScope)
    async def forbidden(request: Request, exc: MissingScope):
        return JSONResponse(status_code=403, content={"error": str(exc)})

    # -- the trust boundary: a key, its tenant, its scopes -------------------------------------
    bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer msk_…` "
                                                      "(`memstream keys create-api-key`).")
    header = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same API key, as a header.")

    def scoped(*scopes: str):
        """A dependency: the verified key (Principal) when it holds every one of `scopes`."""
        async def principal(request: Request,
                            b: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None,
                            h: Annotated[str | None, Security(header)] = None) -> Principal:
            return await authenticate(backend(), (b.credentials if b is not None else None) or h, *scopes,
                                      client=request.client.host if request.client else None,
                                      lookup_charged=bool(request.scope.get("state", {}).get(CHARGED)))
        return principal

    needs = {scope: scoped(scope) for scope in ("memory:write", "memory:read", "audit:read", "admin")}
    app.state.auth_dependencies = needs     # bench/auth.py overrides them to time the same path without auth
    Writer = Annotated[Principal, Depends(needs["memory:write"])]
    Reader = Annotated[Principal, Depends(needs["memory:read"])]
    Auditor = Annotated[Principal, Depends(needs["audit:read"])]
    Admin = Annotated[Principal, Depends(needs["admin"])]

    def backend() -> Backend:
        return state["backend"]

    @app.post("/v1/turns", response_model=Position, status_code=201, summary="Publish a conversation turn",
              responses=_responses(410, 413, 422, 503))
    async def publish_turn(body: Turn, p: Writer) -> dict:
        [pos] = await memories.record_turns(backend(), p, [body.model_dump()])
        return pos.as_dict()

    @app.post("/v1/turns/batch", response_model=PositionsOut, status_code=201,
              summary=f"Publish several turns in order (at most {BATCH_MAX})",
              description="Every turn is checked before any is published (one bad turn: a 422 naming its index, "
                          "nothing published); then they are published in the order given, and the answer holds "
                          "their positions in that order.", responses=_responses(410, 413, 422, 503))
    async def publish_turns(body: TurnBatch, p: Writer) -> dict:
        positions = await memories.record_turns(backend(), p, [t.model_dump() for t in body.turns])
        return {"positions": [x.as_dict() for x in positions]}

    # -- memories as a resource: add, list, get, history, delete (within the key's reach) ---------
    @app.post("/v1/memories", response_model=MemoryAddOut, status_code=202, summary="Add memories directly",
              description="infer=true: each text is a turn to extract from (a user turn for `content`); infer=false: "
                          "each text is kept as stated (memory.stated → one fact). Either way the memory processor "
                          "decides them like any fact (dedup, conflicts, supersession): 202, with the positions; pass "
                          "the token as `after` to a read to see the result.",
              responses=_responses(410, 413, 422, 503))
    async def add_memories(body: MemoryAdd, p: Writer) -> dict:
        messages = ([{"role": "user", "content": body.content}] if body.messages is None
                    else [m.model_dump() for m in body.messages])
        positions = await memories.add(backend(), p, body.user, messages=messages, infer=body.infer,
                                       category=body.category, importance=body.importance, agent_id=body.agent_id,
                                       run_id=body.run_id, metadata=body.metadata, session=body.session, at=body.at)
        return {**positions[-1].as_dict(), "positions": [x.as_dict() for x in positions]}

    @app.get("/v1/users/{user}/memories", response_model=MemoryPageOut, summary="List a user's memories (filtered, paged)",
             description="Oldest first, in (created_at, memory_id) order; `next_cursor` pages on. The parameters "
                         "are ANDed and run in SQL; POST /v1/memories/search takes the full filter language.",
             responses=_responses(409, 422, 503))
    async def list_memories_route(
            user: UserParam, p: Reader,
            status: Annotated[Literal["active", "archived", "superseded", "merged", "all"],
                              Query(description="Which memories (default: active).")] = "active",
            category: Annotated[Category | None, Query()] = None,
            agent_id: Annotated[AgentId | None, Query()] = None,
            run_id: Annotated[RunId | None, Query()] = None,
            created_after: Annotated[IsoTime | None, Query()] = None,
            created_before: Annotated[IsoTime | None, Query()] = None,
            updated_after: Annotated[IsoTime | None, Query()] = None,
            updated_before: Annotated[IsoTime | None, Query()] = None,
            cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description=CursorDoc)] = None,
            limit: Annotated[int, Query(ge=1, le=200)] = 50,
            after: AfterQ = None, wait_s: WaitQ = default_wait) -> dict:
        return await memories.page(backend(), p, user, status=status, category=category,
                                   agent_id=agent_id, run_id=run_id, created_after=created_after,
                                   created_before=created_before, updated_after=updated_after,
                                   updated_before=updated_before, cursor=cursor, limit=limit, after=after,
                                   wait_s=wait_s)

    @app.post("/v1/memories/search", response_model=MemoryPageOut,
              summary="List a user's memories under Mem0-style filters (and/or, eq ne in nin gt gte lt lte)",
              description="The filters (docs/api.md#filters) compile to one parameterised SQL statement over the "
                          "user's memories (metadata through its GIN index); oldest first, paged by `cursor`.",
              responses=_responses(409, 413, 422, 503))
    async def search_memories_route(body: MemorySearch, p: Reader) -> dict:
        return await memories.page(backend(), p, body.user, status=body.status, filters=_filters(body.filters), cursor=body.cursor,
                                   limit=body.limit, after=body.after, wait_s=body.wait_s)

    @app.get("/v1/users/{user}/memories/{memory_id}", response_model=MemoryOut, summary="One memory",
             responses=_responses(409, 422, 503))
    async def memory_route(user: UserParam, memory_id: MemoryIdParam, p: Reader, after: AfterQ = None,
                           wait_s: WaitQ = default_wait) -> dict:
        return await memories.one(backend(), p, user, memory_id, after=after, wait_s=wait_s)

    @app.get("/v1/users/{user}/memories/{memory_id}/history", response_model=MemoryHistoryOut,
             summary="A memory's versions and what caused each (memory:read, for the caller's own users)",
             responses=_responses(409, 422, 503))
    async def memory_history_route(user: UserParam, memory_id: MemoryIdParam, p: Reader, after: AfterQ = None,
                                   wait_s: WaitQ = default_wait) -> dict:
        return await memories.history(backend(), p, user, memory_id, after=after, wait_s=wait_s)

    @app.patch("/v1/users/{user}/memories/{memory_id}", response_model=MemoryEditOut, status_code=202,
               summary="Edit a memory as a new version (memory.stated with `edits`)",
               description="The fields left out are the memory's own. The memory processor decides the edit like "
                           "any stated fact (dedup aside: it always makes a new version, checked for conflicts): "
                           "`memory_id` is created and the edited memory becomes outdated, superseded by it "
                           "(reason `edited`), both in its history. 202 with the position; pass the token as "
                           "`after` to a read to see it. Only an active memory can be edited (409 otherwise).",
               responses={**_responses(410, 413, 422, 503), 409: {
                   "model": ErrorOut, "description": "The memory is not active (outdated, merged, archived): "
                                                     "edit its active version"}})
    async def edit_memory_route(user: UserParam, memory_id: MemoryIdParam, body: MemoryEdit, p: Writer) -> dict:
        return await memories.edit(backend(), p, user, memory_id, **body.model_dump(exclude_unset=True))

    # -- relational memory (#26): entities and relations, read from pg-relations ----------------------
    RefQ = Annotated[EntityRef | None, Query(description=EntityRefDoc)]

    @app.get("/v1/users/{user}/entities", response_model=EntitiesOut, summary="A user's entities",
             description="The people, places, organisations … the user spoke of, by name, each with its current "
                         "relations to the user.", responses=_responses(409, 422, 503))
    async def entities_route(user: UserParam, p: Reader,
                             type: Annotated[Literal["person", "pet", "place", "organisation", "product", "event",
                                                     "user"] | None, Query(description="Only entities of this type.")] = None,
                             after: AfterQ = None, wait_s: WaitQ = default_wait) -> dict:
        return await relations.entities(backend(), p, user, type, after=after, wait_s=wait_s)

    @app.get("/v1/users/{user}/entities/{entity_id}", response_model=EntityDetailOut, response_model_by_alias=True,
             summary="One entity with all its relations",
             description="Both directions, current and ended with their validity; with `as_of`, those holding "
                         "then. `entity_id` may also be a name, `self` or `role:<word>`.",
             responses=_responses(409, 422, 503))
    async def entity_route(user: UserParam, entity_id: Annotated[EntityRef, Path(description=EntityRefDoc)], p: Reader,
                           as_of: Annotated[IsoTime | None, Query(description="Relations holding at this time "
                                                                              "(event time).")] = None,
                           after: AfterQ = None, wait_s: WaitQ = default_wait) -> dict:
        return await relations.entity(backend(), p, user, entity_id, as_of, after=after, wait_s=wait_s)

    @app.get("/v1/users/{user}/relations", response_model=RelationsOut, summary="A user's relations, filtered, as of a time",
             description="Relations holding now (or at `as_of`: valid_from <= t and (valid_to is null or valid_to > t)), "
                         "under the filters, ANDed. `group=family` takes kin and partners. \"Where does the user's "
                         "sister live\": `subject=role:sister&predicate=lives_in`.",
             responses=_responses(409, 422, 503))
    async def relations_route(user: UserParam, p: Reader,
                              predicate: Annotated[str | None, Query(min_length=1, max_length=40,
                                                                     pattern=r"^[a-z_]+$")] = None,
                              group: Annotated[Literal["family", "partner", "social", "work", "place", "possession",
                                                       "participation", "identity"] | None, Query()] = None,
                              subject: RefQ = None, object: RefQ = None,
                              as_of: Annotated[IsoTime | None, Query(description="Relations holding at this time "
                                                                                 "(event time).")] = None,
                              after: AfterQ = None, wait_s: WaitQ = default_wait) -> dict:
        return await relations.relations(backend(), p, user, predicate=predicate, group=group, subject=subject,
                                         obj=object, as_of=as_of, after=after, wait_s=wait_s)

    @app.get("/v1/users/{user}/relations/path", response_model=RelationPathOut, response_model_by_alias=True,
             summary="How two entities are related (a path of at most max_hops relations)",
             description="The shortest chain of relations, either direction, holding now or at `as_of`.",
             responses=_responses(409, 422, 503))
    async def relation_path_route(user: UserParam, p: Reader,
                                  from_: Annotated[EntityRef, Query(alias="from", description=EntityRefDoc)],
                                  to: Annotated[EntityRef, Query(description=EntityRefDoc)],
                                  max_hops: Annotated[int, Query(ge=1, le=relations.MAX_HOPS)] = relations.MAX_HOPS,
                                  as_of: Annotated[IsoTime | None, Query(description="Relations holding at this time "
                                                                                     "(event time).")] = None,
                                  after: AfterQ = None, wait_s: WaitQ = default_wait) -> dict:
        return await relations.path(backend(), p, user, from_, to, max_hops, as_of, after=after, wait_s=wait_s)

    @app.post("/v1/steps", response_model=Position, status_code=201, summary="Publish a task step",
              responses=_responses(410, 413, 422, 503))
    async def publish_step(body: Step, p: Writer) -> dict:
        return (await remember.step(backend(), p, body.user, body.task, body.content, status=body.status,
                                    kind=body.kind, session=body.session, at=body.at)).as_dict()

    @app.post("/v1/tasks/start", response_model=Position, status_code=201, summary="Start a task (task.started)",
              description="The task's step buffer starts over; GET /v1/users/{user}/tasks/{task}/steps shows its "
                          "start and, once finished, its outcome.", responses=_responses(410, 413, 422, 503))
    async def start_task_route(body: TaskStart, p: Writer) -> dict:
        return (await remember.start_task(backend(), p, body.user, body.task, session=body.session, goal=body.goal,
                                          at=body.at)).as_dict()

    @app.post("/v1/tasks/finish", response_model=Position, status_code=201, summary="Finish a task (task.finished)",
              responses=_responses(410, 422, 503))
    async def finish_task_route(body: TaskFinish, p: Writer) -> dict:
        return (await remember.finish_task(backend(), p, body.user, body.task, status=body.status,
                                           at=body.at)).as_dict()

    @app.post("/v1/recall", response_model=list[RecallHitOut], summary="Recall memories relevant to a query",
              responses=_responses(413, 409, 422, 503))
    async def recall_route(body: Recall, p: Reader) -> list[dict]:
        hits = await recall.recall(backend(), p, body.user, body.query, channel="api", k=body.k,
                                   categories=body.categories, tags=body.tags, max_age_hours=body.max_age_hours,
                                   min_score=body.min_score, expand=body.expand, after=body.after,
                                   wait_s=body.wait_s, as_of=body.as_of, filters=_filters(body.filters))
        return [h.as_dict() for h in hits]

    @app.get("/v1/users/{user}/profile", summary="Identity, preferences and policies, by category",
             responses=_responses(409, 422, 503))
    async def profile_route(user: UserParam, p: Reader, after: AfterQ = None, wait_s: WaitQ = default_wait,
                            as_of: AsOfQ = None) -> dict:
        return await profile.profile(backend(), p, user, after=after, wait_s=wait_s, as_of=as_of)

    @app.get("/v1/users/{user}/preferences", summary="The key-value preference table", responses=_responses(409, 422, 503))
    async def preferences_route(user: UserParam, p: Reader, after: AfterQ = None, wait_s: WaitQ = default_wait,
                                as_of: AsOfQ = None) -> dict:
        return await profile.preferences(backend(), p, user, after=after, wait_s=wait_s, as_of=as_of)

    @app.get("/v1/audit/memories/{memory_id}", summary="A memory's whole life, with causation chains",
             responses=_responses(422, 503))
    async def audit_memory_route(memory_id: Annotated[str, Path(max_length=200, pattern=r"^[A-Za-z0-9_-]+$")],
                                 p: Auditor, content: bool = True) -> dict:
        return await audit.memory_life(backend(), p, memory_id, content=content)

    @app.get("/v1/audit/users/{user}", summary="A user's timeline: every indexed event, oldest first",
             responses=_responses(422, 503))
    async def audit_user_route(user: UserParam, p: Auditor, content: bool = False,
                               limit: Annotated[int, Query(ge=1, le=100_000)] = 1000,
                               since: Annotated[IsoTime | None, Query()] = None,
                               until: Annotated[IsoTime | None, Query()] = None) -> dict:
        return await audit.timeline(backend(), p, user, content=content, limit=limit, since=since, until=until)

    @app.get("/v1/users/{user}/tasks/{task}/steps", summary="The last k steps of a task", responses=_responses(409, 422, 503))
    async def steps_route(user: UserParam, task: Annotated[TaskId, Path()], p: Reader,
                          k: Annotated[int, Query(ge=1, le=settings.task_buffer_size,
                                                  description="Steps wanted (at most the ring buffer size).")] = 20,
                          after: AfterQ = None, wait_s: WaitQ = default_wait) -> dict:
        return await short_term.task(backend(), p, user, task, k, after=after, wait_s=wait_s)

    @app.get("/v1/users/{user}/sessions/{session}", summary="The session window (recent messages)",
             responses=_responses(409, 422, 503))
    async def session_route(user: UserParam, session: Annotated[SessionId, Path()], p: Reader, after: AfterQ = None,
                            wait_s: WaitQ = default_wait) -> dict:
        return await short_term.session(backend(), p, user, session, with_summary=True, after=after, wait_s=wait_s)

    # -- deleting, within the key's tenant (and its bound user): memory:write; erasure is admin ----
    @app.delete("/v1/users/{user}/memories/{memory_id}", response_model=ForgottenOut, status_code=202,
                summary="Delete one memory for good (and every memory merged into it): memory.forgotten",
                responses=_responses(422, 503))
    async def forget_route(user: UserParam, memory_id: MemoryIdParam, p: Writer,
                           reason: Annotated[str, Query(max_length=500, pattern=CONTENT_PATTERN)] = "") -> dict:
        return await forget.memory(backend(), p, user, memory_id, requested_by=f"api:{p.key_id}", reason=reason)

    @app.delete("/v1/users/{user}/memories", response_model=Position, status_code=202,
                summary="Delete all of a user's memories: user.forgotten",
                description="Memories, preferences, graph and the processor's state go; the user's data key, session "
                            "windows and task buffers stay, and new turns build new memory (erasure: DELETE "
                            "/v1/users/{user}, admin).", responses=_responses(422, 503))
    async def forget_all_route(user: UserParam, p: Writer,
                               reason: Annotated[str, Query(max_length=500, pattern=CONTENT_PATTERN)] = "") -> dict:
        return (await forget.user(backend(), p, user, requested_by=f"api:{p.key_id}", reason=reason)).as_dict()

    @app.delete("/v1/users/{user}/sessions/{session}", response_model=ForgottenOut, status_code=202,
                summary="Clear a conversation session: its messages, its summary and the memories learned in it",
                description="Publishes memory.forgotten for every memory whose source session is this one (any "
                            "status; `memory_ids` names them), then session.forgotten: the session window drops "
                            "what was said in it so far. 202 with the position of session.forgotten: pass its "
                            "token as `after` to read the empty window. New turns of the session start it afresh.",
                responses=_responses(422, 503))
    async def forget_session_route(user: UserParam, session: Annotated[SessionId, Path()], p: Writer,
                                   reason: Annotated[str, Query(max_length=500, pattern=CONTENT_PATTERN)] = "") -> dict:
        return await forget.session(backend(), p, user, session, requested_by=f"api:{p.key_id}", reason=reason)

    @app.delete("/v1/users/{user}", response_model=Position, status_code=202,
                summary="Erase a user: crypto-shred their content everywhere, refuse their later events",
                description="The key is deleted and the erasure published before the answer; the storage scrub "
                            "(rewriting what held the user's rows, dropping old WAL) is asked of the pipeline, which "
                            "runs it once the projectors have applied the erasure.",
                responses=_responses(422, 503))
    async def erase_route(user: UserParam, p: Admin) -> dict:
        pos = await erase.erase(backend(), p, user, requested_by=f"api:{p.key_id}")
        return pos.as_dict()

    @app.post("/v1/context", response_model=ContextOut, summary="Assemble prompt context within a token budget",
              responses=_responses(413, 409, 422, 503))
    async def context_route(body: Context, p: Reader) -> dict:
        return await context.context(backend(), p, body.user, body.query, session=body.session, task=body.task,
                                     budget=body.budget, slot_budgets=body.slot_budgets, k=body.k,
                                     after=body.after, wait_s=body.wait_s, filters=_filters(body.filters))

    return app
