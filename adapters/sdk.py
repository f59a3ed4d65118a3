"""The Python SDK: publish what happens to an agent (turns, task steps), sync and async.

Every publish goes through an idempotent, acks=all producer and resolves to a Position (topic,
partition, offset) — the token a later query can pass to read its own writes. Content is sealed
with the user's data key before it leaves the process.

Input is checked before anything is sent (schemas/limits.py): ids, content (characters and
MEMSTREAM_MAX_CONTENT_CHARS), and an `at` no more than MEMSTREAM_MAX_FUTURE_SKEW_S in the future;
a breach raises InvalidInput (a MemstreamError) naming the field and the limit.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from datetime import datetime

from adapters import metrics
from adapters.bus import EventProducer, Position, ensure_topics
from kernel.config import Settings, get_settings
from adapters.kafka_auth import CONTROL, PUBLISHER, PUBLISHER_WRITES
from pydantic import ValidationError

from kernel.errors import InvalidInput
from adapters.privacy.keystore import KeyStore
from schemas.codec import encode, make_envelope
from schemas.events import EventData, StepObserved, TaskFinished, TaskStarted, TurnRecorded
from schemas.limits import check_content, check_event_time, check_id

PRODUCER = "sdk/1"


def _event(cls: type[EventData], **fields) -> EventData:
    """An input event, its fields checked by the contract: a breach is InvalidInput, never a traceback."""
    try:
        return cls(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err.get("ctx", {}).get("error") or err["msg"])
        raise InvalidInput(f"{'.'.join(str(x) for x in err['loc'])}: {msg}") from None


class MemoryClient:
    """Synchronous client. `*_nowait` variants return a Future for bulk publishing."""

    def __init__(self, settings: Settings | None = None, *, create_topics: bool = True):
        self.settings = settings or get_settings()
        if create_topics:
            ensure_topics(self.settings)
        self.keys = KeyStore(self.settings)
        self._producer = EventProducer(self.settings, PUBLISHER)   # may write turns and tasks only
        self._control: EventProducer | None = None                 # any other topic: see _producer_for
        self._control_lock = threading.Lock()

    def _producer_for(self, topic: str) -> EventProducer:
        """The input topics (turns, tasks) go out as the publisher principal, which may write
        nothing else; what a CLI/API/MCP process writes to the memory topic (memory.recalled) as
        the control principal, which may write only that topic, like forgetting and erasure
        (adapters/kafka_auth.py). Made on first use: a client that only publishes turns never
        needs the control password."""
        if topic in PUBLISHER_WRITES:
            return self._producer
        with self._control_lock:
            if self._control is None:
                self._control = EventProducer(self.settings, CONTROL)
            return self._control

    # -- generic ------------------------------------------------------------------------------
    def publish_nowait(self, topic: str, data: EventData, *, user: str, at: datetime | None = None,
                       correlation: str | None = None, causation: str | None = None,
                       id: str | None = None) -> Future:
        """`id`: the event's id when the caller must know it first (a UUIDv7, e.g. `uuid7(at)`): an
        edit names the memory its statement will create (kernel/ids.py stated_fact_id)."""
        check_id(user, "user id")
        producer = self._producer_for(topic)
        if at is None:
            producer.check_clock(self.settings.max_future_skew_s)   # the host's clock stamps the event
        env = make_envelope(data, user=user, time=at, id=id, correlation=correlation, causation=causation,
                            producer=PRODUCER)
        sent = producer.send(self.settings.topic(topic), user, encode(env, self.keys))
        metrics.produced("sdk", topic, env.type)
        return sent

    # -- turns ----------------------------------------------------------------------------------
    def _checked(self, user: str, content: str | None, at: datetime | None) -> None:
        check_id(user, "user id")
        if content is not None:
            check_content(content, "content", self.settings.max_content_chars)
        check_event_time(at, self.settings.max_future_skew_s)

    def record_turn_nowait(self, user: str, session: str, role: str, content: str, *, task: str | None = None,
                           at: datetime | None = None, correlation: str | None = None) -> Future:
        self._checked(user, content, at)
        return self.publish_nowait("turns", _event(TurnRecorded, session=session, task=task, role=role, content=content),
                                   user=user, at=at, correlation=correlation)

    def record_turn(self, user: str, session: str, role: str, content: str, **kw) -> Position:
        return self.record_turn_nowait(user, session, role, content, **kw).result(timeout=30)

    # -- tasks ----------------------------------------------------------------------------------
    def start_task(self, user: str, task: str, *, session: str | None = None, goal: str = "",
                   at: datetime | None = None) -> Position:
        self._checked(user, goal, at)
        return self.publish_nowait("tasks", _event(TaskStarted, task=task, session=session, goal=goal), user=user, at=at).result(30)

    def record_step(self, user: str, task: str, content: str, *, status: str = "ok", kind: str = "step",
                    session: str | None = None, at: datetime | None = None) -> Position:
        self._checked(user, content, at)
        data = _event(StepObserved, task=task, session=session, kind=kind, status=status, content=content)
        return self.publish_nowait("tasks", data, user=user, at=at).result(30)

    def finish_task(self, user: str, task: str, *, status: str = "succeeded", at: datetime | None = None) -> Position:
        self._checked(user, None, at)
        return self.publish_nowait("tasks", _event(TaskFinished, task=task, status=status), user=user, at=at).result(30)

    def flush(self, timeout: float = 30.0) -> None:
        self._producer.flush(timeout)
        if self._control is not None:
            self._control.flush(timeout)

    def close(self) -> None:
        self._producer.close()
        if self._control is not None:
            self._control.close()
        self.keys.close()

    def __enter__(self) -> "MemoryClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncMemoryClient:
    """asyncio client over the same producer: `await client.record_turn(...)` → Position."""

    def __init__(self, settings: Settings | None = None, *, create_topics: bool = True):
        self._sync = MemoryClient(settings, create_topics=create_topics)

    async def record_turn(self, user: str, session: str, role: str, content: str, **kw) -> Position:
        return await asyncio.wrap_future(self._sync.record_turn_nowait(user, session, role, content, **kw))

    async def start_task(self, user: str, task: str, **kw) -> Position:
        return await asyncio.to_thread(self._sync.start_task, user, task, **kw)

    async def record_step(self, user: str, task: str, content: str, **kw) -> Position:
        return await asyncio.to_thread(self._sync.record_step, user, task, content, **kw)

    async def finish_task(self, user: str, task: str, **kw) -> Position:
        return await asyncio.to_thread(self._sync.finish_task, user, task, **kw)

    async def flush(self) -> None:
        await asyncio.to_thread(self._sync.flush)

    async def close(self) -> None:
        await asyncio.to_thread(self._sync.close)

    async def __aenter__(self) -> "AsyncMemoryClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
