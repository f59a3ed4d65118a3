"""The envelope every record carries, on the wire and in memory.

Wire form (orjson): {id, type, v, user, time, causation, correlation, producer, data, sealed}.
`data` holds the clear fields; `sealed` = {v, kid, ct} holds the personal fields, AES-GCM-encrypted
with the user's data key. The seal contract is versioned by `sealed.v` (schemas/codec.py,
`seal_aad`): v2 (every event written since 2026-12) authenticates the whole clear envelope —
id, type, v, user, time, causation, correlation, producer and the clear data — as associated
data, so none of it can be altered without the record failing to open; v1 (no `v` on the wire,
events written before) authenticated the event id only, and is still read. Control events
(schemas/codec.py, CONTROL_TYPES) carry `auth` = {kid, mac}: an HMAC over the same canonical clear
envelope with the key store's system control key, so only memstream's own writers can erase,
forget or tick; memory decisions (DECISION_TYPES) carry one with the pipeline's decision key, which
only the workers hold, so only the memory processor decides. Kafka key = user id.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from schemas.events import EventData

D = TypeVar("D", bound=EventData, covariant=True)  # an Envelope[MemoryCreated] is an Envelope[EventData] (frozen)

UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


SEAL_VERSION = 2   # the seal contract new events are written with


class Sealed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    v: int = Field(1, ge=1, le=SEAL_VERSION, description=(
        "Seal contract version: what the AES-GCM associated data covers. 1 (absent; events written "
        "before 2026-12): the event id. 2: a canonical encoding of the whole clear envelope (id, type, "
        "v, user, time, causation, correlation, producer, data)."))
    kid: str = Field(min_length=1, description="Id of the user's data key that sealed `ct`.")
    ct: str = Field(min_length=16, description="base64(nonce ‖ AES-GCM ciphertext ‖ tag) of the personal fields (orjson).")


class ControlAuth(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kid: str = Field(min_length=1, max_length=64, description="Id of the key that made `mac`: the key store's control key, or the pipeline's decision key.")
    mac: str = Field(min_length=43, max_length=44, description="base64 HMAC-SHA256 over the canonical clear envelope (and, on a decision, the sealed ciphertext).")


class WireEnvelope(BaseModel):
    """The envelope as it travels; validated before anything else is read."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(pattern=UUID_PATTERN, description="Time-ordered event id (UUIDv7; derived events UUIDv8).")
    type: str = Field(pattern=r"^[a-z_]+\.[a-z_]+$", description="Past-tense event type, e.g. turn.recorded.")
    v: int = Field(ge=1, description="Schema version of `data`.")
    user: str = Field(min_length=1, max_length=200, description="User id; also the Kafka key.")
    time: AwareDatetime = Field(description="Event time (ISO 8601 with offset); decisions use it, never the wall clock.")
    causation: str | None = Field(None, description="Id of the event that caused this one.")
    correlation: str | None = Field(None, description="Id shared by everything one request set off.")
    producer: str = Field(min_length=1, description="Who wrote it (component/version).")
    data: dict[str, Any] = Field(description="Clear fields of the event type's schema.")
    sealed: Sealed | None = Field(None, description="Personal fields, sealed; absent when the type has none.")
    auth: ControlAuth | None = Field(None, description=(
        "Proof of origin. On a control event (user.erased, user.forgotten, memory.forgotten, session.forgotten, "
        "decay.ticked): an HMAC with a system key of the key store. On a memory decision (memory.created, "
        "memory.superseded, memory.decayed, … rules.adopted, session.summarized): an HMAC with the pipeline's "
        "decision key over the clear envelope and the sealed ciphertext. Required on those types (decisions "
        "appended before the decision key existed excepted), absent on the others."))


@dataclass(frozen=True, slots=True)
class Envelope(Generic[D]):
    """A decoded event. `data` is None when its sealed content belongs to an erased user."""
    id: str
    type: str
    version: int
    user: str
    time: datetime
    causation: str | None
    correlation: str | None
    producer: str
    data: D | None
    stored_version: int = 0  # the version as written, before upcasting

    @property
    def erased(self) -> bool:
        return self.data is None
