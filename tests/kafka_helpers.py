"""Reading topics back in tests, with the product's own bounded reader (adapters/bus.py LogReader)."""
from __future__ import annotations

import uuid

from adapters.bus import LogReader, read_dead_letters
from kernel.config import Settings
from adapters.kafka_auth import ADMIN, kafka_config


def read_all(settings: Settings, topic: str, timeout: float = 60.0) -> list:
    """Every record currently in `topic` (all partitions, up to their ends now), as confluent
    Message objects; LogReadTimeout when the broker gives nothing for `timeout` seconds (generous:
    a new consumer's first fetch takes seconds on a loaded machine, and a wait_for around this must
    not end on a slow read)."""
    with LogReader(kafka_config(settings, ADMIN), group_id="test-" + uuid.uuid4().hex, idle_timeout_s=timeout) as reader:
        return list(reader.records(reader.spans([topic])))


def dead_letters(settings: Settings) -> list[dict]:
    """Every dead letter's body, read as the operator view reads them (bus.read_dead_letters)."""
    return [body for _m, body in read_dead_letters(settings, ADMIN, group_id="test-" + uuid.uuid4().hex, idle_timeout_s=60.0)]
