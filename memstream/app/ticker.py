"""The decay ticker: `decay.ticked` once per period, one event per partition of the memory topic.

Consolidation runs when a user stores facts; a user who stores nothing would never decay or
expire. The ticker closes that gap without knowing any user: it writes one tick to every
partition (envelope user `system:ticker`, an explicit partition). The memory processor that owns
a partition fans the tick out to the users of that partition in its own state table and ages
each at the tick's event time (domain/consolidation.py), so each user is still decided
by one writer, and the tick — not the wall clock of whoever processes it — fixes the time.

Ticks fall on multiples of the period (UTC). A tick that was missed (the ticker was down) is not
back-filled: decay is computed from creation time, not per tick, so the next tick catches up.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from datetime import datetime, timezone

from confluent_kafka import Producer

from adapters.bus import ensure_topics, producer_config
from adapters.kafka_auth import WORKER
from kernel.config import Settings
from adapters.privacy.keystore import KeyStore
from schemas.codec import encode, make_envelope
from schemas.events import DecayTicked

log = logging.getLogger("memstream.ticker")
TICKER_USER = "system:ticker"
PRODUCER = "ticker/1"


def publish_ticks(settings: Settings, at: datetime | None = None) -> list[str]:
    """One decay.ticked per memory-topic partition at event time `at` (default now); returns their ids."""
    ensure_topics(settings)
    at = at or datetime.now(timezone.utc)
    producer = Producer(producer_config(settings, WORKER))
    topic = settings.topic("memory")
    ids, errors = [], []
    # decay.ticked seals nothing, but it is a control event: its MAC needs the key store's control key.
    keys = KeyStore(settings)
    try:
        for p in range(settings.partitions):
            env = make_envelope(DecayTicked(partition=p, period_s=settings.tick_period_s), user=TICKER_USER,
                                time=at, producer=PRODUCER)
            producer.produce(topic, value=encode(env, keys), key=TICKER_USER.encode(), partition=p,
                             on_delivery=lambda err, msg: err and errors.append(err))
            ids.append(env.id)
        left = producer.flush(30)
        if left or errors:
            raise RuntimeError(f"ticks not delivered: {errors or left}")
    finally:
        producer.flush(5)
        keys.close()
    log.info("published %d ticks at %s", len(ids), at.isoformat())
    return ids


def next_tick(now: float, period_s: float) -> float:
    return (int(now // period_s) + 1) * period_s


def run(settings: Settings, stop: threading.Event | None = None) -> None:
    """Publish ticks on every multiple of the period until SIGTERM/SIGINT (or `stop`)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.is_set():
        due = next_tick(time.time(), settings.tick_period_s)
        if stop.wait(max(0.0, due - time.time())):
            break
        try:
            publish_ticks(settings, datetime.fromtimestamp(due, timezone.utc))
        except Exception:  # noqa: BLE001 - a failed tick is logged; the next one catches up
            log.exception("tick at %s failed", due)
