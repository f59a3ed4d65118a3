"""Typed, frozen, versioned event payloads: the contract.

Each class is one (type, version). `SEALED` names the personal fields that travel only inside
the event's AES-GCM envelope (see schemas/codec.py); everything else is in the clear so the
pipeline can route and order. The JSON Schema files under schemas/json/ are generated from
these models (`memstream schemas export`) and a test keeps them in step.

Changes are additive; an incompatible change is a new version plus an upcaster
(schemas/upcasters.py). Old classes stay here: the log keeps old versions forever.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.limits import AgentId, Label, Metadata, RunId, SessionId, TaskId, Text

Role = Literal["user", "assistant", "system", "tool"]
Category = Literal["identity", "preference", "fact", "episodic", "tool_failure", "policy", "general"]
Channel = Literal["rule", "llm"]
# A fact's channel: the two extractors, or `stated` (memory.stated: kept as the caller stated it).
FactChannel = Literal["rule", "llm", "stated"]


class EventData(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_min_length=0)

    TYPE: ClassVar[str]
    VERSION: ClassVar[int]
    SEALED: ClassVar[frozenset[str]] = frozenset()
    # Optional fields left off the wire while unset (codec.encode): an event that does not use them
    # keeps exactly the shape it had before they were added, so a reader one version behind (its
    # schema forbids unknown fields) still reads every event that does not need the new ones.
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()
    DESCRIPTION: ClassVar[str] = ""


class DecisionData(EventData):
    """A memory processor's decision: it names the rules profile it was made under
    (domain/rules_profile.py; the profile itself is in a `rules.adopted` event).
    Additive and optional: decisions written before provenance existed read with None."""
    rules_profile: str | None = Field(None, pattern=r"^[0-9a-f]{12}$", description=(
        "Hash of the rules profile (the settings that change decisions) this decision was made under; "
        "the full profile is in the `rules.adopted` event of that hash. Absent on decisions written before 2026-12."))


# Scoping (issue 25): which agent and which run an event belongs to, and the caller's flat metadata.
SCOPE_FIELDS = frozenset({"agent_id", "run_id", "metadata"})
# An edit (issue 25, PATCH /v1/users/{user}/memories/{id}): the memory a statement and its fact are a
# new version of. Off the wire while unset, like the scope fields: a plain statement keeps its shape.
EDIT_FIELDS = frozenset({"edits"})
# A memory id as the API takes it (memory ids are UUIDs; the pattern is the API's path parameter's).
MemoryRef = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_-]+$")]


# -- turns topic ----------------------------------------------------------------------------

class TurnRecordedV1(EventData):
    TYPE = "turn.recorded"
    VERSION = 1
    SEALED = frozenset({"text"})
    DESCRIPTION = "A conversation turn (v1: no task, content named `text`)."
    session: SessionId
    role: Role
    text: Text


class TurnRecorded(EventData):
    TYPE = "turn.recorded"
    VERSION = 2
    SEALED = frozenset({"content", "metadata"})
    OMITTED_WHEN_NONE = SCOPE_FIELDS
    DESCRIPTION = ("A conversation turn an agent saw or said (optionally scoped by agent_id and run_id, with "
                   "flat metadata that the facts and memories made from it carry).")
    session: SessionId
    task: TaskId | None = None
    role: Role
    content: Text
    # Scoping (issue 25), additive and optional: which agent and which run it belongs to, and a
    # caller's flat metadata (schemas/limits.py; sealed with the content, it may be personal).
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: Metadata | None = None


class MemoryStated(EventData):
    TYPE = "memory.stated"
    VERSION = 1
    SEALED = frozenset({"content", "metadata"})
    OMITTED_WHEN_NONE = SCOPE_FIELDS | EDIT_FIELDS
    DESCRIPTION = ("A caller stated a memory directly, to be kept as stated (POST /v1/memories with infer=false): the "
                   "extractor turns it into exactly one fact.extracted (channel `stated`, content as given, embedded "
                   "there), which the memory processor decides like any fact (dedup, conflicts, supersession). With "
                   "`edits` (PATCH /v1/users/{user}/memories/{id}) it is the complete new version of that memory.")
    content: Text = Field(min_length=1)
    category: Category | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0)
    session: SessionId | None = None
    # Scoping (issue 25), additive and optional: which agent and which run it belongs to, and a
    # caller's flat metadata (schemas/limits.py; sealed with the content, it may be personal).
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: Metadata | None = None
    # An edit (additive, optional): the memory this statement is the new version of. The memory
    # processor supersedes it (reason "edited") by the memory this statement's fact creates, if it
    # is still an active memory of the user then; otherwise the statement decides nothing.
    edits: MemoryRef | None = None


# -- tasks topic ----------------------------------------------------------------------------

class TaskStarted(EventData):
    TYPE = "task.started"
    VERSION = 1
    SEALED = frozenset({"goal"})
    DESCRIPTION = "An agent started a task; its step ring buffer resets."
    task: TaskId
    session: SessionId | None = None
    goal: Text = ""


class StepObserved(EventData):
    TYPE = "step.observed"
    VERSION = 1
    SEALED = frozenset({"content"})
    DESCRIPTION = "One step of a task (action, tool call, observation)."
    task: TaskId
    session: SessionId | None = None
    kind: Label = "step"
    status: Literal["ok", "failed", "pending"] = "ok"
    content: Text


class TaskFinished(EventData):
    TYPE = "task.finished"
    VERSION = 1
    DESCRIPTION = "An agent finished a task."
    task: TaskId
    status: Literal["succeeded", "failed", "abandoned"] = "succeeded"


# -- facts topic ----------------------------------------------------------------------------

class FactExtracted(EventData):
    TYPE = "fact.extracted"
    VERSION = 1
    SEALED = frozenset({"key", "value", "content", "tags", "embedding", "metadata"})
    OMITTED_WHEN_NONE = SCOPE_FIELDS | EDIT_FIELDS
    DESCRIPTION = ("A fact extracted from a turn (or stated directly: memory.stated, channel `stated`), with its "
                   "embedding computed once, here; it carries its source's agent_id, run_id and metadata, and a "
                   "statement's `edits` (the memory it is the new version of).")
    fact_id: str
    source_turn: str
    session: str | None = None
    channel: FactChannel
    rule: str | None = None
    model: str | None = None
    key: str | None = None
    value: str | None = None
    content: str = Field(min_length=1)
    category: Category = "general"
    tags: list[str] = []
    slot_hint: str | None = None
    importance: float = Field(ge=0.0, le=1.0)
    embedding: list[float]
    embed_model: str
    # The date the fact's happening resolves to, when the turn named one relative to its own time
    # ("last week" → ISO date of that week; domain/text.py relative_dates). Additive, optional.
    event_date: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    # Scoping (issue 25), additive and optional: which agent and which run it belongs to, and a
    # caller's flat metadata (schemas/limits.py; sealed with the content, it may be personal).
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: Metadata | None = None
    # A statement's edit (memory.stated `edits`), carried on: the memory this fact is the new version of.
    edits: MemoryRef | None = None


# -- memory topic ---------------------------------------------------------------------------

class MemoryCreated(DecisionData):
    TYPE = "memory.created"
    VERSION = 1
    SEALED = frozenset({"key", "value", "content", "tags", "embedding", "metadata"})
    OMITTED_WHEN_NONE = SCOPE_FIELDS
    DESCRIPTION = ("The memory processor decided a fact becomes a new long-term memory (with the fact's agent_id, "
                   "run_id and metadata).")
    memory_id: str
    fact_id: str
    session: str | None = None
    key: str | None = None
    value: str | None = None
    content: str = Field(min_length=1)
    category: Category
    tags: list[str] = []
    slot_hint: str | None = None
    importance: float = Field(ge=0.0, le=1.0)
    embedding: list[float]
    # Scoping (issue 25), additive and optional: which agent and which run it belongs to, and a
    # caller's flat metadata (schemas/limits.py; sealed with the content, it may be personal).
    agent_id: AgentId | None = None
    run_id: RunId | None = None
    metadata: Metadata | None = None


class MemoryReinforced(DecisionData):
    TYPE = "memory.reinforced"
    VERSION = 1
    SEALED = frozenset({"tags"})
    DESCRIPTION = ("A new fact duplicated an existing memory (write-time dedup): the memory's absolute new "
                   "importance, category, slot hint, tags and access count, so re-applying is idempotent.")
    memory_id: str
    fact_id: str
    similarity: float
    importance: float = Field(ge=0.0, le=1.0)
    category: Category
    slot_hint: str | None = None
    tags: list[str] = []
    access_count: int = Field(ge=0)


class MemoryLinked(DecisionData):
    TYPE = "memory.linked"
    VERSION = 1
    DESCRIPTION = "An edge in the memory graph: FOLLOWS (consecutive memories) or SIMILAR_TO (cosine ≥ link threshold)."
    from_id: str
    to_id: str
    kind: Literal["FOLLOWS", "SIMILAR_TO"]
    weight: float = 1.0


class MemorySuperseded(DecisionData):
    TYPE = "memory.superseded"
    VERSION = 1
    DESCRIPTION = "A newer memory contradicts an older one (same slot, other value): the old one is outdated, never deleted."
    memory_id: str
    superseded_by: str
    reason: str


class PreferenceSet(DecisionData):
    TYPE = "preference.set"
    VERSION = 1
    SEALED = frozenset({"key", "value"})
    DESCRIPTION = "A key-value preference got a new version; the previous one is superseded, not deleted."
    key: str = Field(min_length=1)
    value: str
    pref_version: int = Field(ge=1)
    supersedes: str | None = None
    memory_id: str | None = None
    fact_id: str | None = None


class UserErased(EventData):
    TYPE = "user.erased"
    VERSION = 1
    DESCRIPTION = "The user's data key was deleted; every projection drops the user's rows."
    requested_by: str = "operator"
    reason: str = ""


# -- consolidation and forgetting (memory topic) -------------------------------------------
# Decisions carry absolute values (the new importance, the merged content and embedding), so a
# projector that applies one twice, or a processor that re-emits one after a crash, changes nothing.

class DecayTicked(EventData):
    TYPE = "decay.ticked"
    VERSION = 1
    DESCRIPTION = ("A periodic tick for one partition of the memory topic (the envelope's user is `system:ticker`): "
                   "the memory processor owning that partition ages every user of it at the tick's own event time, "
                   "a slice of users at a time; it continues a tick by publishing one with `after` = the last user done.")
    partition: int = Field(ge=0)
    period_s: float = Field(gt=0)
    after: str | None = None


class MemoryDecayed(DecisionData):
    TYPE = "memory.decayed"
    VERSION = 1
    DESCRIPTION = ("A memory's importance changed by at least the decay threshold: base importance x rate^days since it "
                   "was created or last re-stated (reinforced, merged), x the idle factor once it sat idle. Absolute.")
    memory_id: str
    importance: float = Field(ge=0.0, le=1.0)
    previous: float = Field(ge=0.0, le=1.0)
    reason: Literal["decay", "idle", "refresh"]
    age_days: float = Field(ge=0.0)


class MemoryMerged(DecisionData):
    TYPE = "memory.merged"
    VERSION = 1
    SEALED = frozenset({"content", "tags", "key", "value", "embedding"})
    DESCRIPTION = ("Consolidation merged two similar memories (cosine in the merge band): `memory_id` (the one with "
                   "the higher importance) takes the merged content, embedding and importance; `retired_id` is retired. "
                   "Provenance: both parents and their facts.")
    memory_id: str
    retired_id: str
    parent_ids: list[str]
    fact_ids: list[str]
    similarity: float
    importance: float = Field(ge=0.0, le=1.0)
    category: Category
    slot_hint: str | None = None
    access_count: int = Field(ge=0)
    key: str | None = None
    value: str | None = None
    content: str = Field(min_length=1)
    tags: list[str] = []
    embedding: list[float]


class MemoryDeduped(DecisionData):
    TYPE = "memory.deduped"
    VERSION = 1
    SEALED = frozenset({"tags"})
    DESCRIPTION = ("Consolidation found two memories at or above the dedup threshold: `memory_id` (higher importance) "
                   "is kept with its content, `retired_id` is retired into it.")
    memory_id: str
    retired_id: str
    fact_ids: list[str]
    similarity: float
    importance: float = Field(ge=0.0, le=1.0)
    category: Category
    access_count: int = Field(ge=0)
    tags: list[str] = []


class MemoryExpired(DecisionData):
    TYPE = "memory.expired"
    VERSION = 1
    DESCRIPTION = ("A memory was archived (the type keeps its first name): last stated longer ago than its kind's TTL "
                   "with importance below the minimum (`ttl`), or idle past the last step of progressive forgetting "
                   "(`idle`). Never one with graph in-degree at the protection level, nor a kept kind. Projections mark "
                   "it `archived` — content and embedding stay, it leaves the working set and the default recall tier; "
                   "a recall that returns it revives it (memory.revived). Only forget and erase delete.")
    memory_id: str
    reason: Literal["ttl", "idle"]
    importance: float = Field(ge=0.0, le=1.0)
    age_days: float = Field(ge=0.0)
    idle_days: float = Field(ge=0.0)
    in_degree: int = Field(ge=0)


class MemorySummarized(DecisionData):
    TYPE = "memory.summarized"
    VERSION = 1
    SEALED = frozenset({"content"})
    DESCRIPTION = ("Progressive forgetting shortened an idle memory's content (extractive: its main clause with subject, "
                   "verb and object, never cut; only subordinate detail past the budget is dropped).")
    memory_id: str
    content: str = Field(min_length=1)
    idle_days: float = Field(ge=0.0)


class MemoryRecalled(EventData):
    TYPE = "memory.recalled"
    VERSION = 1
    DESCRIPTION = ("One recall call returned these memories to the user (published by the query side, one event per "
                   "call): the memory processor refreshes their access count and last access, and revives those that "
                   "were archived (`archived_ids`, a subset of `memory_ids`; added later, empty in older events) when "
                   "their recall score (`scores`, one per `memory_ids` entry; added later, empty in older events, "
                   "which revive every archived hit) reaches the rules' relevance bar.")
    memory_ids: list[str]
    source: str = "api"
    archived_ids: list[str] = []
    scores: list[float] = []


class MemoryRevived(DecisionData):
    TYPE = "memory.revived"
    VERSION = 1
    DESCRIPTION = ("A recall returned an archived memory (caused by that memory.recalled): it is back in the working "
                   "set, re-stated at the recall's time with `importance` (its base importance; absolute), and every "
                   "projection marks it `active` again.")
    memory_id: str
    importance: float = Field(ge=0.0, le=1.0)
    previous: float = Field(ge=0.0, le=1.0)
    archived_days: float = Field(ge=0.0)
    reason: Literal["recalled"] = "recalled"


class MemoryForgotten(EventData):
    TYPE = "memory.forgotten"
    VERSION = 1
    DESCRIPTION = ("A memory was deleted on request (hard delete): every projection drops it and the memories merged "
                   "or deduped into it (`memory_ids`, resolved once by whoever asked), the audit index keeps only this "
                   "record. Its events stay in the log.")
    memory_id: str
    memory_ids: list[str] = Field(min_length=1)
    requested_by: str = "operator"
    reason: str = ""


class UserForgotten(EventData):
    TYPE = "user.forgotten"
    VERSION = 1
    DESCRIPTION = ("Everything memory learned about the user was deleted on request: memories, preferences, graph, "
                   "processor state. Unlike user.erased the data key stays: short-term windows and task buffers remain, "
                   "and new turns build new memory.")
    requested_by: str = "operator"
    reason: str = ""


class SessionForgotten(EventData):
    TYPE = "session.forgotten"
    VERSION = 1
    DESCRIPTION = ("A conversation session was cleared on request (e.g. a LangChain history's clear()): the session "
                   "window drops the session's messages said at or before this event's time, and its summary. The "
                   "memories learned from the session go in a memory.forgotten published just before. Its turns "
                   "stay in the log; a later turn of the same session starts it afresh.")
    session: SessionId
    requested_by: str = "operator"
    reason: str = ""


class SessionSummarized(EventData):
    TYPE = "session.summarized"
    VERSION = 1
    SEALED = frozenset({"summary"})
    DESCRIPTION = ("The messages that fell out of a session's short-term window (MaxTurns x 2), folded into a rolling "
                   "summary (LLM channel when configured, else extractive). Absolute: the whole summary so far.")
    session: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    summary_version: int = Field(ge=1)
    message_count: int = Field(ge=1)
    through_time: datetime
    through_event_id: str
    channel: Channel
    model: str | None = None


class RulesAdopted(EventData):
    TYPE = "rules.adopted"
    VERSION = 1
    DESCRIPTION = ("A memory worker started deciding under a rules profile new to this partition of the memory topic "
                   "(envelope user `system:rules`, one event per partition): the profile's hash, the full profile "
                   "(setting name → effective value), and the profile it replaced. Written before any decision under "
                   "it, so every hash a decision carries can be resolved to its settings; projections only index it.")
    profile: str = Field(pattern=r"^[0-9a-f]{12}$")
    settings: dict[str, str | bool | int | float]
    previous: str | None = Field(None, pattern=r"^[0-9a-f]{12}$")
    rollover: bool = False
    worker: str = Field("memory", max_length=64)


# -- relational memory (#26): entities and relations, claimed by an extractor, decided once -------

EntityType = Literal["person", "pet", "place", "organisation", "product", "event", "user"]
Predicate = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z_]+$")]
IsoDate = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]


class EntityMention(BaseModel):
    """An entity as a clause names it (domain/entities.py Mention)."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    type: EntityType
    name: str | None = Field(None, min_length=1, max_length=200)
    role: str | None = Field(None, min_length=1, max_length=40)
    pronoun: str | None = Field(None, min_length=1, max_length=20)


class RelationClaim(BaseModel):
    """One relation a clause states (domain/entities.py RelationDraft)."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    subject: EntityMention
    predicate: Predicate
    object: EntityMention
    negated: bool = False
    ended: bool = False
    event_date: IsoDate | None = None
    evidence: str = Field("", max_length=1000)


class RelationsExtracted(EventData):
    TYPE = "relations.extracted"
    VERSION = 1
    SEALED = frozenset({"claims"})
    DESCRIPTION = ("The relations an extractor read in one turn (facts topic): mentions as said (name, the user's "
                   "relation word, or an unresolved pronoun); the memory processor resolves and decides them.")
    source_turn: str
    session: str | None = None
    channel: Channel = "rule"
    claims: list[RelationClaim] = Field(min_length=1, max_length=32)


class EntityObserved(DecisionData):
    TYPE = "entity.observed"
    VERSION = 1
    SEALED = frozenset({"name", "aliases"})
    DESCRIPTION = ("An entity of the user's world, as now known (absolute: re-applying is idempotent): its type, "
                   "name, the other names and relation words it goes by, and the turn that last taught something.")
    entity_id: str
    entity_type: EntityType
    name: str | None = None
    aliases: list[str] = []
    source_turn: str


class RelationAsserted(DecisionData):
    TYPE = "relation.asserted"
    VERSION = 1
    SEALED = frozenset({"evidence"})
    DESCRIPTION = ("A relation holds from `valid_from` (event time: the date the turn gave, else the turn's time); "
                   "`subject_id` 'self' is the user. Provenance: the turn and the clause.")
    relation_id: str
    subject_id: str
    predicate: Predicate
    object_id: str
    valid_from: datetime
    source_turn: str
    evidence: str = ""


class RelationEnded(DecisionData):
    TYPE = "relation.ended"
    VERSION = 1
    DESCRIPTION = ("A relation stopped holding at `valid_to` (event time): superseded by a newer one-at-a-time "
                   "relation (`ended_by`), or ended by a statement. Never deleted: as-of reads still see it.")
    relation_id: str
    valid_to: datetime
    reason: Literal["superseded", "stated", "negated"]
    ended_by: str | None = None
    source_turn: str


ALL_EVENTS: tuple[type[EventData], ...] = (
    TurnRecordedV1, TurnRecorded, MemoryStated, TaskStarted, StepObserved, TaskFinished,
    FactExtracted, MemoryCreated, MemoryReinforced, MemoryLinked, MemorySuperseded, PreferenceSet, UserErased,
    DecayTicked, MemoryDecayed, MemoryMerged, MemoryDeduped, MemoryExpired, MemorySummarized, MemoryRecalled,
    MemoryForgotten, UserForgotten, SessionForgotten, SessionSummarized, MemoryRevived, RulesAdopted,
    RelationsExtracted, EntityObserved, RelationAsserted, RelationEnded,
)
REGISTRY: dict[tuple[str, int], type[EventData]] = {(c.TYPE, c.VERSION): c for c in ALL_EVENTS}
LATEST: dict[str, type[EventData]] = {}
for _cls in ALL_EVENTS:
    if _cls.TYPE not in LATEST or LATEST[_cls.TYPE].VERSION < _cls.VERSION:
        LATEST[_cls.TYPE] = _cls
