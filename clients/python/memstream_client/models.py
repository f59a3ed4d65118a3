"""Typed answers of memstream's HTTP API (memstream/app/api.py), as pydantic models.

Every model accepts fields it does not know (extra="allow"): a newer server may add fields to an
answer, and an older client keeps reading it (the added fields are on the model, e.g. `m.model_extra`).
Times are timezone-aware datetimes; floats arrive rounded by the server.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "system", "tool"]
Category = Literal["identity", "preference", "fact", "episodic", "tool_failure", "policy", "general"]
MetadataValue = str | int | float | bool
Metadata = dict[str, MetadataValue]
Status = Literal["active", "archived", "superseded", "merged", "all"]


class _Answer(BaseModel):
    """A server answer: unknown fields are kept, not refused."""
    model_config = ConfigDict(extra="allow")


class Position(_Answer):
    """Where a publish landed in the log. Pass it (or its `token`) as `after` to a read to read your write."""
    topic: str
    partition: int
    offset: int
    token: str = Field(description="topic:partition:offset")


class AddResult(Position):
    """POST /v1/memories: the last message's position (its token for `after`), and one per message."""
    positions: list[Position] = []


class UpdateResult(Position):
    """PATCH /v1/users/{user}/memories/{memory_id}: the edit's position and `memory_id`, the new version
    it creates (the edited memory becomes outdated, superseded by it)."""
    memory_id: str


class Forgotten(Position):
    """DELETE /v1/users/{user}/memories/{memory_id}: the memory and every memory merged into it."""
    memory_ids: list[str] = []


class Memory(_Answer):
    """One memory, as GET /v1/users/{user}/memories/{memory_id} and the lists answer it."""
    memory_id: str
    user: str | None = None
    content: str
    category: str
    key: str | None = None
    value: str | None = None
    tags: list[str] = []
    slot_hint: str | None = None
    importance: float
    status: str = Field(description="active, outdated (superseded), merged, deduped, archived")
    superseded_by: str | None = None
    merged_into: str | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None
    session: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    fact_id: str | None = None
    created_at: datetime
    updated_at: datetime


class MemoryPage(_Answer):
    """One page of a user's memories, oldest first; pass `next_cursor` as `cursor` for the next."""
    user: str
    memories: list[Memory]
    next_cursor: str | None = None


class MemoryHistory(_Answer):
    """A memory's versions (every event that created or changed it, oldest first, each with
    `caused_by`), where it came from (`origin`) and the memories it superseded or absorbed (`parents`)."""
    user: str
    memory_id: str
    status: str
    versions: list[dict[str, Any]] = []
    origin: list[dict[str, Any]] = []
    parents: list[str | None] = []


class RecallHit(_Answer):
    """A memory recalled for a query, with its score and `why` (what made the score)."""
    memory_id: str
    content: str
    category: str
    tags: list[str] = []
    importance: float
    created_at: datetime
    score: float
    archived: bool = False
    why: dict[str, Any] = {}
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None


class Context(_Answer):
    """Prompt context within a token budget: `text` to put in the prompt, `slots` what each slot kept and cut."""
    text: str
    slots: dict[str, Any] = {}


class ProfileMemory(_Answer):
    memory_id: str
    content: str
    importance: float
    created_at: datetime


class Preference(_Answer):
    """One row of the key-value preference table."""
    value: Any = None
    version: int | None = None


class Profile(_Answer):
    """Who the user is: every active identity, preference and policy memory, and the preference table."""
    identity: list[ProfileMemory] = []
    preference: list[ProfileMemory] = []
    policy: list[ProfileMemory] = []
    preferences: dict[str, Preference] = {}


class SessionMessage(_Answer):
    event_id: str | None = None
    role: str
    content: str
    task: str | None = None
    time: datetime | None = None


class SessionWindow(_Answer):
    """A session's recent messages (oldest first) and the rolling summary of the older ones (or None)."""
    messages: list[SessionMessage] = []
    summary: dict[str, Any] | None = None


class TaskStep(_Answer):
    event_id: str | None = None
    kind: str
    status: str
    content: str
    session: str | None = None
    time: datetime | None = None


class TaskSteps(_Answer):
    """A task's start and outcome (`task`, None if never started) and its newest steps, oldest first."""
    task: dict[str, Any] | None = None
    steps: list[TaskStep] = []


class RelationEnd(_Answer):
    """How a relation ended: superseded (by `ended_by`), stated or negated; when it was recorded, by which turn."""
    reason: str | None = None
    ended_by: str | None = None
    recorded_at: datetime | None = None
    source_turn: str | None = None


class Relation(_Answer):
    """One relation between two entities of the user's world (`self` is the user), with its validity
    in event time (valid_to None while current) and its provenance."""
    relation_id: str
    subject_id: str
    subject_name: str | None = None
    predicate: str
    object_id: str
    object_name: str | None = None
    group: str | None = None
    text: str | None = Field(None, description="The relation as an English sentence")
    current: bool
    valid_from: datetime
    valid_to: datetime | None = None
    recorded_at: datetime
    source_turn: str
    evidence: str = ""
    ended: RelationEnd | None = None
    forward: bool | None = None


class Entity(_Answer):
    """A person, pet, place, organisation … of the user's world (names live in Postgres only)."""
    entity_id: str
    entity_type: str
    name: str | None = None
    aliases: list[str] = []
    source_turn: str | None = None
    updated_at: datetime | None = None
    relations_to_user: list[Relation] = []


class Entities(_Answer):
    user: str
    entities: list[Entity] = []


class EntityDetail(Entity):
    """One entity with all its relations, both directions (current and ended; with as_of, those holding then)."""
    user: str
    as_of: datetime | None = None
    relations: list[Relation] = []


class Relations(_Answer):
    user: str
    as_of: datetime | None = None
    relations: list[Relation] = []
    answer: str | None = None


class RelationPath(Relations):
    """The shortest chain of relations between two entities (`found` False when there is none)."""
    from_: str = Field(alias="from")
    to: str
    found: bool
    hops: int


class Message(BaseModel):
    """One message of `add(messages=…)`; a plain {"role", "content"} mapping works too."""
    model_config = ConfigDict(extra="forbid")
    role: Role = "user"
    content: str


class Turn(BaseModel):
    """One turn of `add_turns(…)`; a plain mapping with these keys works too."""
    model_config = ConfigDict(extra="forbid")
    user: str
    session: str
    role: Role
    content: str
    task: str | None = None
    at: datetime | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: Metadata | None = None
