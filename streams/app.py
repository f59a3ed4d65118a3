"""Shared wiring for the faust apps: one app (= one consumer group) per processor."""
from __future__ import annotations

import logging

import faust

from memstream.bus import dead_letter_record
from memstream.config import Settings
from memstream.errors import InvalidEvent
from schemas.codec import KeyRing, decode

log = logging.getLogger("memstream.streams")


def make_app(name: str, settings: Settings) -> faust.App:
    datadir = settings.stack_dir / "faust" / settings.namespace / name
    datadir.mkdir(parents=True, exist_ok=True)
    return faust.App(
        f"{settings.namespace}.{name}",
        broker=f"kafka://{settings.kafka_bootstrap}",
        key_serializer="raw",
        value_serializer="raw",
        web_enabled=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        store="memory://",                 # state is small and bounded; rebuilt from its changelog
        producer_acks=-1,
        producer_linger=0.002,
        broker_commit_interval=0.5,
        consumer_auto_offset_reset="earliest",
        datadir=str(datadir),
    )


def raw_topic(app: faust.App, name: str):
    return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")


class DeadLetters:
    """Routes records a processor cannot read to the dead-letter topic, and counts them."""

    def __init__(self, app: faust.App, settings: Settings, consumer: str, keys: KeyRing):
        self.topic = raw_topic(app, settings.topic("deadletter"))
        self.consumer = consumer
        self.keys = keys
        self.count = 0

    async def send(self, event, exc: InvalidEvent) -> None:
        msg = event.message
        self.count += 1
        log.warning("dead-letter %s:%s:%s (%s): %s", msg.topic, msg.partition, msg.offset, self.consumer, exc.reason)
        await self.topic.send(key=msg.key, value=dead_letter_record(
            self.keys, reason=exc.reason, topic=msg.topic, partition=msg.partition, offset=msg.offset,
            consumer=self.consumer, key=msg.key, raw=msg.value))


async def user_turns(batch, keys: KeyRing, dead: DeadLetters) -> list:
    """The readable user turns of a batch, in order; unreadable records go to dead letters.

    Only what the user says about themselves is extracted, so assistant/system/tool turns and
    turns of erased users are skipped (their positions still advance with the batch).
    """
    out = []
    for event in batch:
        try:
            env = decode(event.message.value, keys)
        except InvalidEvent as exc:
            await dead.send(event, exc)
            continue
        if not env.erased and env.type == "turn.recorded" and env.data.role == "user":
            out.append(env)
    return out
