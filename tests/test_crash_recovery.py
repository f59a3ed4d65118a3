"""kill -9 a projector process in the middle of a 10,000-event burst: nothing lost, nothing twice.

The killed-and-restarted projections are compared, by content checksum, with a clean run of the
same projectors over the same log into separate stores (MEMSTREAM_LOG_NAMESPACE).
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from bench.synthetic import decided_events
from adapters.bus import EventProducer, ensure_topics
from adapters.kafka_auth import ADMIN
from adapters.privacy.keystore import KeyStore
from projections.registry import PROJECTORS, build_projector
from memstream.app.workers import worker_command
from projections import pg
from projections.runner import ProjectorRunner
from schemas.codec import encode
from tests.helpers import assert_same_projections, stored_positions, wait_for

N_EVENTS = 10_000


def stored_total(settings, projector_name: str) -> int:
    return sum(stored_positions(settings, projector_name).values())   # without setup's DDL (tests/helpers.py)


def start_projectors(settings) -> subprocess.Popen:
    env = {**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace}
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-projectors.log", "ab")
    return subprocess.Popen(worker_command("projectors"), env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_sigkill_mid_burst_equals_a_clean_run(settings):
    live = settings.model_copy(update={"namespace": settings.namespace + "_k"})
    clean = settings.model_copy(update={"namespace": settings.namespace + "_c", "log_namespace_override": live.namespace})
    ensure_topics(live)
    pg.ensure_schema(live)
    keys = KeyStore(live)
    records = [encode(e, keys) for e in decided_events(N_EVENTS, settings.embed_dim)]
    users = [e.user for e in decided_events(N_EVENTS, settings.embed_dim)]
    assert len(records) == N_EVENTS

    # 1. start the projectors, then publish the burst while they run
    proc = start_projectors(live)
    producer = EventProducer(live, ADMIN)
    topic = live.topic("memory")

    def burst():
        for i, (user, raw) in enumerate(zip(users, records)):
            producer.send(topic, user, raw)
            if i % 500 == 499:
                time.sleep(0.05)
        producer.flush()
    sender = threading.Thread(target=burst)
    sender.start()

    # 2. kill -9 once part of the burst is applied
    wait_for(lambda: stored_total(live, "pgvector-items") >= N_EVENTS * 0.3, timeout=120, interval=0.05,
             what="30% applied")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = stored_total(live, "pgvector-items")
    assert killed_at < N_EVENTS, "the kill landed after the burst was fully applied; nothing was tested"
    sender.join()
    producer.close()

    # 3. restart and let every projector catch up to the end of the log
    proc = start_projectors(live)
    try:
        for name in PROJECTORS:
            wait_for(lambda: stored_total(live, name) == N_EVENTS, timeout=180, what=f"{name} caught up")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

    # 4. a clean run of the same projectors over the same log, into separate stores
    for name in PROJECTORS:
        ProjectorRunner(build_projector(name, clean), clean, keys, principal=ADMIN).run(idle_exit_after=3.0)

    assert_same_projections(live, clean, f"differs from a clean run after kill -9 at {killed_at}")
    keys.close()
