"""One decode path for a record read from the log, live and in replay alike.

What a record must be, beyond a valid envelope (schemas/codec.py: decode):

1. **Keyed by its user** (law 4): a record whose key is not its envelope's user sits in another
   partition than the user's events, where another processor instance decides for that user.
2. **Dated in the supported range**: event ids are UUIDv7 — milliseconds since the Unix epoch —
   so an event time before 1970-01-01 cannot be stored (the edges refuse it with the same words:
   schemas/limits.py); and not later than the time the broker appended the record plus
   MEMSTREAM_MAX_FUTURE_SKEW_S. A user's clock is their newest event time: one record dated
   9999-12-31 would make consolidation decay, archive and expire every later memory of the user.

The append time is the record's broker timestamp (the topics use LogAppendTime:
adapters/topology.py), which is stored in the log: the check reads no clock, so a rebuild, a
verify or a what-if years later decides exactly as the live stage did (law 2). A record without a
broker timestamp (none available) is checked for its key and the epoch only.

Every consumer — the faust stages, the projectors, replay, time travel, audit and what-if —
decodes through `decode_record`, so a record is poison for all of them or for none: a rebuild can
never write a row that the live stage dead-lettered.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol

from kernel.errors import InvalidEvent
from schemas.codec import KeyRing, decode
from schemas.envelope import Envelope
from schemas.events import EventData

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ConfluentMessage(Protocol):
    """What is read of a confluent-kafka Message (the contract stays free of Kafka clients)."""
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...


def check_record_key(key: bytes | None, user: str) -> None:
    """Law 4 at the consumer: a record's key must be its envelope's user. Poison otherwise."""
    if key is None:
        raise InvalidEvent(f"record has no key (expected the user id {user!r}): it may sit in another partition than the user's events")
    if key != user.encode():
        raise InvalidEvent(f"record key {key[:64]!r} is not its envelope's user {user[:64]!r}")


def check_record_time(when: datetime, appended_ms: int | None, max_future_skew_s: float) -> None:
    """The event time against the epoch and the broker's append time (None: not known)."""
    if when < EPOCH:
        raise InvalidEvent(f"event time {when.isoformat()} is before 1970-01-01: event ids are UUIDv7, milliseconds "
                           "since the Unix epoch, so such a time cannot be recorded")
    if appended_ms is None or appended_ms <= 0:
        return
    appended = EPOCH + timedelta(milliseconds=appended_ms)
    ahead = (when - appended).total_seconds()
    if ahead > max_future_skew_s:
        raise InvalidEvent(f"event time {when.isoformat()} is {ahead:.0f} s after the broker appended the record "
                           f"({appended.isoformat()}), more than MEMSTREAM_MAX_FUTURE_SKEW_S={max_future_skew_s:g}: "
                           "a clock ahead of the broker's (or a forged time) would age the user's other memories")


def decode_record(key: bytes | None, value: bytes | None, keys: KeyRing, *, appended_ms: int | None,
                  max_future_skew_s: float) -> Envelope[EventData]:
    """Decode one log record and check it belongs where it is and when it says (InvalidEvent otherwise)."""
    env = decode(value, keys, appended_ms)
    check_record_key(key, env.user)
    check_record_time(env.time, appended_ms, max_future_skew_s)
    return env


def confluent_appended_ms(msg: ConfluentMessage) -> int | None:
    """The broker timestamp of a confluent-kafka Message, or None when it has none."""
    kind, ms = msg.timestamp()
    return ms if kind != 0 else None   # 0: TIMESTAMP_NOT_AVAILABLE


def decode_confluent(msg: ConfluentMessage, keys: KeyRing, max_future_skew_s: float) -> Envelope[EventData]:
    """decode_record for a confluent-kafka Message (projectors, replay, audit, what-if)."""
    return decode_record(msg.key(), msg.value(), keys, appended_ms=confluent_appended_ms(msg),
                         max_future_skew_s=max_future_skew_s)
