"""Encode and decode events: seal/unseal personal fields, validate, upcast.

Decoding order (each step's reason in brackets):
 1. parse and validate the wire envelope          [a broken record is rejected before any use]
 2. find the (type, version) schema                [unknown versions go to the dead-letter topic]
 2b. verify a control event's MAC                  [a forged erase/forget/tick acts on nothing: it is
                                                   poison, dead-lettered by every consumer]
 3. open the sealed part with the user's data key  [a missing key means erased: data=None, no error;
                                                   the associated data of seal v2 is the whole clear
                                                   envelope, so an altered type/time/causation/data
                                                   fails here]
 4. validate the data against its own version      [errors name the field]
 5. upcast to the latest version                   [the rest of the code sees one shape per type]
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from datetime import datetime, timedelta, timezone
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import ValidationError

from kernel.errors import InvalidEvent, InvalidInput, MemstreamError, UnknownEventVersion
from kernel.ids import random_bytes, uuid7
from schemas.envelope import SEAL_VERSION, Envelope, WireEnvelope
from schemas.events import ALL_EVENTS, LATEST, REGISTRY, DecisionData, EventData
from schemas.limits import check_id
from schemas.upcasters import upcast

VECTOR_FIELDS = frozenset({"embedding"})

_E = TypeVar("_E", bound=EventData)   # make_envelope(MemoryCreated(...)) is an Envelope[MemoryCreated]

# Events that make consumers delete or age state rather than add to it. Each must prove it was
# written by memstream (an HMAC with the key store's system control key): anyone who can produce
# to Kafka could otherwise erase or forget any user, or move everyone's clock forward.
CONTROL_TYPES = frozenset({"user.erased", "user.forgotten", "memory.forgotten", "session.forgotten", "decay.ticked"})


# Memory decisions: written only by the pipeline's workers, each with an HMAC of the pipeline's
# decision key (adapters/privacy/decision_key.py), which the serving processes do not hold. The
# principal that writes control events and memory.recalled can write the memory topic; without
# this it could archive, supersede or expire any user's memories (#28).
DECISION_TYPES = frozenset({cls.TYPE for cls in ALL_EVENTS if issubclass(cls, DecisionData)}
                           | {"rules.adopted", "session.summarized"})


@dataclass(frozen=True)
class DecisionKey:
    kid: str           # names the key in each event's `auth` (a hash prefix: no key material)
    key: bytes
    since_ms: int      # decisions the broker appended before this moment may be unsigned (older logs)

    def __repr__(self) -> str:   # never show key material
        return f"DecisionKey(kid={self.kid!r}, since_ms={self.since_ms})"


class KeyRing(Protocol):
    def key_for_write(self, user: str) -> tuple[str, AESGCM]: ...
    def key_for_read(self, user: str, kid: str) -> AESGCM | None: ...
    # The system key for control events' MACs: kid None → the current (kid, key); else that key or None.
    def control_key(self, kid: str | None = None) -> tuple[str, bytes] | None: ...
    # The pipeline's decision key; None in a process that holds none (it can neither sign nor verify).
    def decision_key(self) -> DecisionKey | None: ...


def control_mac(key: bytes, clear: bytes) -> str:
    """HMAC-SHA256 of a control event's canonical clear envelope, domain-separated from seal v2."""
    return base64.b64encode(hmac.new(key, b"memstream.control/1\x00" + clear, hashlib.sha256).digest()).decode()


def _authenticated(cls: type[EventData]) -> bool:
    """Whether the clear envelope is authenticated (a seal's associated data, or a MAC's message)."""
    return bool(cls.SEALED) or cls.TYPE in CONTROL_TYPES or cls.TYPE in DECISION_TYPES


def decision_mac(key: bytes, clear: bytes, sealed_ct: str | None) -> str:
    """HMAC-SHA256 of a decision's canonical clear envelope and its sealed ciphertext: a decision
    copied with another sealed part (anyone holding the user's data key can seal one) fails it."""
    msg = b"memstream.decision/1\x00" + clear + b"\x00" + (sealed_ct or "").encode()
    # hmac.digest: OpenSSL's one-shot HMAC, about half the cost of an hmac.new object per event
    return base64.b64encode(hmac.digest(key, msg, "sha256")).decode()


def _format_validation(prefix: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        parts.append(f"{prefix}{loc}: {err['msg']}")
    return "; ".join(parts)


def _pack_vector(values: Sequence[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def _unpack_vector(text: str) -> list[float]:
    if not isinstance(text, str):
        raise InvalidEvent("sealed vector is not a base64 string")
    raw = _b64(text, "sealed vector")
    if len(raw) % 4:
        raise InvalidEvent(f"sealed vector has {len(raw)} bytes, not a multiple of 4")
    values: list[float] = np.frombuffer(raw, dtype="<f4").tolist()
    return values


def _b64(text: str, what: str) -> bytes:
    """Strict base64 (no stray characters, right padding): anything else is a malformed record."""
    try:
        # binascii's strict mode rejects what b64decode(validate=True) rejects (characters outside
        # the alphabet, bad padding) and more (data after padding), without its regex pass first:
        # ~5 µs less per ciphertext or vector, which every consumer and every rebuild pays per event.
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError, TypeError):
        raise InvalidEvent(f"{what} is not valid base64") from None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


def clear_envelope(id: str, type: str, v: int, user: str, time: datetime, causation: str | None,
                   correlation: str | None, producer: str, data: dict[str, Any]) -> bytes:
    """A canonical encoding of everything an envelope keeps in the clear.

    Canonical, so the writer (from the model) and a reader (from the parsed wire record) get the
    same bytes: a JSON array in a fixed field order, object keys sorted, and the time as integer
    microseconds since the epoch (the wire may spell one instant as 'Z' or '+00:00'; what is
    authenticated is the instant). Used as seal v2's associated data and as the message of a
    control event's MAC (schemas/control.py).
    """
    return orjson.dumps([id, type, v, user, (time - _EPOCH) // _US, causation, correlation, producer, data],
                        option=orjson.OPT_SORT_KEYS)


def seal_aad(seal_version: int, clear: bytes, event_id: str) -> bytes:
    """The AES-GCM associated data of a seal contract version.

    v1: the event id alone — a ciphertext cannot be moved to another event, but the clear type,
        time, causation and data could be altered undetected. Read only (events written before).
    v2: a domain tag + the canonical clear envelope — altering any clear field fails the tag.
    The version travels in `sealed.v`; rewriting it cannot downgrade a record, because the
    ciphertext only opens under the associated data it was sealed with.
    """
    if seal_version == 1:
        return event_id.encode()
    return b"memstream.seal/2\x00" + clear


def check_user_id(user: str) -> None:
    """A user id routes (record key), keys (data key row) and names rows: the id contract of
    schemas/limits.py (1-200 printable characters; a NUL cannot even be stored in a Postgres text
    column). A record that breaks it is poison (InvalidEvent)."""
    try:
        check_id(user, "user id")
    except InvalidInput as exc:
        raise InvalidEvent(str(exc)) from None


def make_envelope(data: _E, *, user: str, time: datetime | None = None, id: str | None = None,
                  causation: str | None = None, correlation: str | None = None,
                  producer: str = "memstream") -> Envelope[_E]:
    """A new event. Fresh events get a UUIDv7 stamped with their own event time."""
    check_user_id(user)
    when = time or datetime.now(timezone.utc)
    if when.tzinfo is None:
        raise InvalidEvent("event time must carry a timezone")
    if when < _EPOCH:
        raise InvalidEvent(f"event time {when.isoformat()} is before 1970-01-01: event ids are UUIDv7 "
                           "(milliseconds since the Unix epoch)")
    return Envelope(id=id or uuid7(when), type=data.TYPE, version=data.VERSION, user=user, time=when,
                    causation=causation, correlation=correlation, producer=producer, data=data,
                    stored_version=data.VERSION)


def encode(env: Envelope[EventData], keys: KeyRing) -> bytes:
    data = env.data
    assert data is not None, "cannot encode an erased event"
    full = {k: v for k, v in data.model_dump(mode="json").items() if v is not None or k not in data.OMITTED_WHEN_NONE}
    clear = {k: v for k, v in full.items() if k not in data.SEALED}
    record: dict[str, Any] = {"id": env.id, "type": env.type, "v": env.version, "user": env.user,
                    "time": env.time, "causation": env.causation,
                    "correlation": env.correlation, "producer": env.producer, "data": clear}
    canonical = (clear_envelope(env.id, env.type, env.version, env.user, env.time, env.causation, env.correlation,
                                env.producer, clear) if _authenticated(type(data)) else b"")
    if env.type in CONTROL_TYPES:
        # Control types seal nothing (asserted by the contract tests), so the clear envelope is all of it.
        # kid None asks for the current control key, which a key ring always has (Optional only for a kid).
        kid, key = cast(tuple[str, bytes], keys.control_key())
        record["auth"] = {"kid": kid, "mac": control_mac(key, canonical)}
    if data.SEALED:
        personal = {k: full[k] for k in data.SEALED if k in full}
        for name in VECTOR_FIELDS & personal.keys():
            personal[name] = _pack_vector(personal[name])
        kid, aead = keys.key_for_write(env.user)
        nonce = random_bytes(12)
        ct = aead.encrypt(nonce, orjson.dumps(personal), seal_aad(SEAL_VERSION, canonical, env.id))
        record["sealed"] = {"v": SEAL_VERSION, "kid": kid, "ct": base64.b64encode(nonce + ct).decode()}
    if env.type in DECISION_TYPES:
        # After sealing: the MAC covers the ciphertext too.
        dk = keys.decision_key()
        if dk is None:
            raise MemstreamError(f"{env.type} is a memory decision, which only the pipeline's workers write, signed "
                                 "with the decision key; this process holds none (adapters/privacy/decision_key.py)")
        sealed = record.get("sealed")
        record["auth"] = {"kid": dk.kid, "mac": decision_mac(dk.key, canonical, sealed["ct"] if sealed else None)}
    # orjson writes the aware datetime as ISO 8601 with 'Z' for UTC (OPT_UTC_Z), microseconds kept.
    return orjson.dumps(record, option=orjson.OPT_UTC_Z)


def decode(raw: bytes | None, keys: KeyRing, appended_ms: int | None = None) -> Envelope[EventData]:
    """`appended_ms`: the broker's append time of the record (None: unknown), which decides whether
    an unsigned decision is from before the decision key (step 2c)."""
    if raw is None:
        raise InvalidEvent("empty record (null value)")
    # 1. envelope
    try:
        wire = WireEnvelope.model_validate_json(raw)
    except ValidationError as exc:
        raise InvalidEvent(_format_validation("", exc)) from None
    check_user_id(wire.user)
    # 2. schema for this (type, version)
    cls = REGISTRY.get((wire.type, wire.v))
    if cls is None:
        known = sorted(v for (t, v) in REGISTRY if t == wire.type)
        raise UnknownEventVersion(
            f"unknown event {wire.type} v{wire.v} (known versions: {known or 'none'})")
    # the canonical clear envelope: the message of a MAC and the seal's associated data, made once
    canonical = (clear_envelope(wire.id, wire.type, wire.v, wire.user, wire.time, wire.causation, wire.correlation,
                                wire.producer, wire.data) if _authenticated(cls) else b"")
    # 2b. proof of origin of a control event
    if wire.type in CONTROL_TYPES:
        _verify_control(wire, keys, canonical)
    # 2c. proof of origin of a memory decision
    elif wire.type in DECISION_TYPES:
        _verify_decision(wire, keys, appended_ms, canonical)
    # 3. sealed part
    values = dict(wire.data)
    if cls.SEALED:
        if wire.sealed is None:
            raise InvalidEvent(f"{wire.type} v{wire.v} must seal {sorted(cls.SEALED)} but has no `sealed` part")
        aead = keys.key_for_read(wire.user, wire.sealed.kid)
        if aead is None:
            return Envelope(wire.id, wire.type, LATEST[wire.type].VERSION, wire.user, wire.time, wire.causation,
                            wire.correlation, wire.producer, None, wire.v)
        blob = _b64(wire.sealed.ct, "sealed ciphertext")
        if len(blob) < 12 + 16:
            raise InvalidEvent(f"sealed ciphertext too short ({len(blob)} bytes; nonce and tag alone are 28)")
        aad = seal_aad(wire.sealed.v, canonical, wire.id)
        try:
            personal = orjson.loads(aead.decrypt(blob[:12], blob[12:], aad))
        except InvalidTag:
            what = "its clear envelope" if wire.sealed.v >= 2 else "its id"
            raise InvalidEvent(f"sealed part fails authentication against {what} (seal v{wire.sealed.v}: "
                               "tampered, or moved from another event)") from None
        except orjson.JSONDecodeError:
            raise InvalidEvent("sealed part is not a JSON object") from None
        if not isinstance(personal, dict):
            raise InvalidEvent("sealed part is not a JSON object")
        for name in VECTOR_FIELDS & personal.keys():
            personal[name] = _unpack_vector(personal[name])
        clash = values.keys() & personal.keys()
        if clash:
            raise InvalidEvent(f"fields both clear and sealed: {sorted(clash)}")
        values.update(personal)
    elif wire.sealed is not None:
        raise InvalidEvent(f"{wire.type} v{wire.v} has no personal fields but carries a `sealed` part")
    # 4. validate against its own version
    try:
        data: EventData = cls.model_validate(values)
    except ValidationError as exc:
        raise InvalidEvent(_format_validation("data.", exc)) from None
    # 5. upcast
    latest = LATEST[wire.type]
    if latest is not cls:
        try:
            data = latest.model_validate(upcast(wire.type, wire.v, data.model_dump(), latest.VERSION))
        except ValidationError as exc:
            raise InvalidEvent(_format_validation(f"upcast to v{latest.VERSION}: data.", exc)) from None
    return Envelope(wire.id, wire.type, latest.VERSION, wire.user, wire.time, wire.causation,
                    wire.correlation, wire.producer, data, wire.v)


def _verify_control(wire: WireEnvelope, keys: KeyRing, canonical: bytes) -> None:
    if wire.auth is None:
        raise InvalidEvent(f"{wire.type} carries no proof of origin (`auth`): control events must be "
                           "authenticated with the key store's control key")
    got = keys.control_key(wire.auth.kid)
    if got is None:
        raise InvalidEvent(f"{wire.type} is authenticated with an unknown control key {wire.auth.kid!r}")
    expected = control_mac(got[1], canonical)
    if not hmac.compare_digest(expected, wire.auth.mac):
        raise InvalidEvent(f"{wire.type} fails its MAC (forged, or altered after it was written)")


def _verify_decision(wire: WireEnvelope, keys: KeyRing, appended_ms: int | None, canonical: bytes) -> None:
    dk = keys.decision_key()
    if dk is None:
        return   # a serving process: it verifies nothing it did not get from a verified index (decision_key.py)
    if wire.auth is None:
        if appended_ms is not None and 0 < appended_ms < dk.since_ms:
            return   # written before the pipeline had a decision key: an older log, read as it was
        raise InvalidEvent(f"{wire.type} carries no proof of origin (`auth`): memory decisions are written only by "
                           "memstream's workers, signed with the pipeline's decision key")
    if wire.auth.kid != dk.kid:
        raise InvalidEvent(f"{wire.type} is signed with an unknown decision key {wire.auth.kid[:64]!r}")
    expected = decision_mac(dk.key, canonical, wire.sealed.ct if wire.sealed is not None else None)
    if not hmac.compare_digest(expected, wire.auth.mac):
        raise InvalidEvent(f"{wire.type} fails its decision MAC (forged, or altered after it was written)")


def kept_bytes(data: bytes) -> bytes:
    """An exact-size copy of bytes that will be held in memory for long (state table values).

    orjson.dumps (3.13) never shrinks its output buffer: a 171 KB result keeps ~2 MB allocated.
    A faust table holding one such value per user made the memory processor's RSS grow by ~2 MB
    per user whose state passed that size (about 10x the state's real bytes).
    """
    return memoryview(data).tobytes()


def seal_blob(keys: KeyRing, user: str, aad: str, blob: bytes) -> dict[str, str]:
    """Seal arbitrary bytes (e.g. a dead-lettered record, processor state) with the user's key."""
    kid, aead = keys.key_for_write(user)
    nonce = random_bytes(12)
    return {"kid": kid, "ct": base64.b64encode(nonce + aead.encrypt(nonce, blob, aad.encode())).decode()}


SEALED_BYTES = b"\x00S1"   # binary sealed values start so; JSON-sealed ones (seal_blob, orjson) with "{"


def seal_bytes(keys: KeyRing, user: str, aad: str, blob: bytes) -> bytes:
    """seal_blob without the JSON and base64 around it, for values stored as bytes (processor state):
    magic, key id length and key id, nonce, ciphertext. A third smaller, and no base64 either way."""
    kid, aead = keys.key_for_write(user)
    nonce = random_bytes(12)
    k = kid.encode()
    return b"".join((SEALED_BYTES, bytes((len(k),)), k, nonce, aead.encrypt(nonce, blob, aad.encode())))


def open_bytes(keys: KeyRing, user: str, aad: str, sealed: bytes) -> bytes | None:
    """The inverse of seal_bytes, and of orjson-serialised seal_blob output (values stored before
    seal_bytes existed); None when the user's key was erased."""
    if not sealed.startswith(SEALED_BYTES):
        return open_blob(keys, user, aad, orjson.loads(sealed))
    n = sealed[3]
    aead = keys.key_for_read(user, sealed[4:4 + n].decode())
    if aead is None:
        return None
    body = memoryview(sealed)[4 + n:]
    return aead.decrypt(bytes(body[:12]), bytes(body[12:]), aad.encode())


def open_blob(keys: KeyRing, user: str, aad: str, sealed: dict[str, str]) -> bytes | None:
    """The inverse of seal_blob; None when the user's key was erased."""
    aead = keys.key_for_read(user, sealed["kid"])
    if aead is None:
        return None
    blob = base64.b64decode(sealed["ct"])
    return aead.decrypt(blob[:12], blob[12:], aad.encode())
