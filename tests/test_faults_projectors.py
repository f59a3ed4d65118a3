"""Fault injection on the projectors, on a private stack (tests/helpers.py: fault_stack_up).

Each test prints one `FAULT <name>: lost=… duplicated=… recover_s=…` line (pytest -s shows them):
lost/duplicated are 0 exactly when the faulted projections' content checksums equal a clean run
of the same input, which every test asserts.
"""
from __future__ import annotations

import base64
import os
import signal
import threading
import time
import uuid
from dataclasses import replace

import orjson
import pytest

from bench.synthetic import decided_events
from adapters.bus import DEAD_LETTER_RAW_LIMIT, EventProducer, ensure_topics
from adapters.kafka_auth import ADMIN
from adapters.privacy.keystore import KeyStore
from adapters.resilience import StalePosition, read_health
from projections import pg
from projections.registry import PROJECTORS, build_projector
from projections.runner import Item, ProjectorRunner
from schemas.codec import encode
from tests.kafka_helpers import dead_letters
from tests.helpers import (assert_same_projections, end_offsets, fault_env, fault_service, fault_stack_settings,
                           fault_stack_up, restart_service, stored_total, wait_for)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

BASE = os.environ["MEMSTREAM_TEST_NAMESPACE"]


@pytest.fixture(scope="session")
def fault_base(request):
    s = fault_stack_settings(BASE + "_f")
    fault_stack_up(s, request)
    return s


def _ns(base, tag: str):
    s = base.model_copy(update={"namespace": f"{BASE}_f{tag}{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    return s


def _clean_run(live, keys):
    """The same projectors over the same log into separate stores, no faults."""
    clean = live.model_copy(update={"namespace": live.namespace + "_c", "log_namespace_override": live.namespace})
    pg.ensure_schema(clean)
    for name in PROJECTORS:
        ProjectorRunner(build_projector(name, clean), clean, keys, principal=ADMIN).run(idle_exit_after=2.0)
    return clean


def _publish(settings, keys, events, pace_every: int = 500, pause: float = 0.05) -> threading.Thread:
    records = [(e.user, encode(e, keys)) for e in events]
    producer = EventProducer(settings, ADMIN)
    topic = settings.topic("memory")

    def burst():
        for i, (user, raw) in enumerate(records):
            producer.send(topic, user, raw)
            if i % pace_every == pace_every - 1:
                time.sleep(pause)
        producer.close()
    t = threading.Thread(target=burst, daemon=True)
    t.start()
    return t


def _start_projectors(settings):
    import subprocess

    from memstream.app.workers import worker_command
    log_dir = settings.stack_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{settings.namespace}-projectors.log", "ab") as log:
        return subprocess.Popen(worker_command("projectors"), env=fault_env(settings), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _caught_up(settings, total: int) -> bool:
    return all(stored_total(settings, name) >= total for name in PROJECTORS)


def _report(name: str, lost: int, dup: int, recover_s: float, **extra) -> None:
    more = "".join(f" {k}={v}" for k, v in extra.items())
    print(f"\nFAULT {name}: lost={lost} duplicated={dup} recover_s={recover_s:.1f}{more}")


# -- poison ---------------------------------------------------------------------------------------

def _signed_again(wire: dict, keys) -> dict:
    """A decision altered after encoding, given a valid decision MAC again, so what a consumer meets
    is the poison meant (a broken ciphertext), not the MAC that would refuse it first."""
    from schemas.codec import clear_envelope, decision_mac
    from schemas.envelope import WireEnvelope
    w = WireEnvelope.model_validate(wire)
    canonical = clear_envelope(w.id, w.type, w.v, w.user, w.time, w.causation, w.correlation, w.producer, w.data)
    dk = keys.decision_key()
    return {**wire, "auth": {"kid": dk.kid, "mac": decision_mac(dk.key, canonical, wire["sealed"]["ct"])}}


def _poison(settings, keys, good) -> list[tuple[str | None, bytes]]:
    """(key, value) records every consumer must dead-letter: each a different kind of poison."""
    sample = orjson.loads(encode(good[0], keys))
    bad_b64 = _signed_again({**sample, "id": str(uuid.uuid4()), "sealed": {**sample["sealed"], "ct": "!!not*base64!!" * 4}}, keys)
    short_ct = _signed_again({**sample, "id": str(uuid.uuid4()),
                              "sealed": {**sample["sealed"], "ct": base64.b64encode(b"x" * 16).decode()}}, keys)
    nul_user = {**sample, "id": str(uuid.uuid4()), "user": "nul\x00user"}
    return [
        (good[0].user, orjson.dumps(bad_b64)),                                 # malformed base64 ciphertext
        (good[0].user, orjson.dumps(short_ct)),                                # ciphertext shorter than nonce+tag
        ("nul\x00user", orjson.dumps(nul_user)),                               # NUL in the user id
        (None, encode(good[2], keys)),                                         # valid, but no key
        ("someone-else", encode(good[3], keys)),                               # valid, key is not its user
        (good[0].user, b"{" + b"x" * (900 * 1024)),                            # 900 KB of garbage
    ]


def test_poison_records_go_to_dead_letters_and_the_rest_is_applied(fault_base):
    live, clean_log = _ns(fault_base, "p"), _ns(fault_base, "q")
    keys_live, keys_clean = KeyStore(live), KeyStore(clean_log)
    events = decided_events(600, live.embed_dim, prefix=f"poison-{uuid.uuid4().hex[:4]}-")
    poison = _poison(live, keys_live, events)
    # live log: the good events with the poison spread through them; the reference log: the good ones only
    from confluent_kafka import Producer

    from adapters.bus import producer_config
    prod = Producer(producer_config(live, ADMIN, **{"message.max.bytes": 2_000_000}))
    step = len(events) // (len(poison) + 1)
    for i, e in enumerate(events):
        prod.produce(live.topic("memory"), key=e.user.encode(), value=encode(e, keys_live))
        if i % step == step - 1 and poison:
            k, v = poison.pop(0)
            prod.produce(live.topic("memory"), key=None if k is None else k.encode(), value=v)
    assert prod.flush(30) == 0
    n_poison = 6
    total = len(events) + n_poison
    ref = EventProducer(clean_log, ADMIN)
    for e in events:
        ref.send(clean_log.topic("memory"), e.user, encode(e, keys_clean))
    ref.close()

    t0 = time.monotonic()
    for name in PROJECTORS:
        runner = ProjectorRunner(build_projector(name, live), live, keys_live)
        runner.run(idle_exit_after=2.0)
        assert runner.error is None and runner.dead_lettered == n_poison, (name, runner.dead_lettered)
    elapsed = time.monotonic() - t0
    for name in PROJECTORS:
        assert stored_total(live, name) == total, f"{name} did not advance past the poison"

    dls = dead_letters(live)
    assert len(dls) == n_poison * len(PROJECTORS)
    assert {d["consumer"] for d in dls} == {f"projector.{n}" for n in PROJECTORS}
    big = [d for d in dls if d["size"] > DEAD_LETTER_RAW_LIMIT]
    assert big and all(d["sealed_raw"] is None and "larger than" in d["raw_omitted"] and d["sha256"] for d in big)
    reasons = " | ".join(sorted({d["reason"] for d in dls}))
    for needle in ("not valid base64", "too short", "control characters", "no key", "is not its envelope's user"):
        assert needle in reasons, (needle, reasons)

    # the rest: exactly what a run over the good events alone gives (the audit index records log
    # positions and topic names, which the poison shifts: compared without them)
    clean = _clean_run(clean_log, keys_clean)
    for name in PROJECTORS:
        a, b = build_projector(name, live), build_projector(name, clean)
        a.setup()
        b.setup()
        try:
            if name == "audit-index":
                cols = ["event_id", "user_id", "type", "version", "event_time", "partition", "causation_id",
                        "correlation_id", "producer", "memory_ids"]
                assert (pg.table_checksum(a.conn, live, "audit_events", cols, ["event_id"])
                        == pg.table_checksum(b.conn, clean, "audit_events", cols, ["event_id"])), name
            else:
                assert a.checksum() == b.checksum(), f"{name}: poison changed what the good events project to"
        finally:
            a.close()
            b.close()
    _report("poison (6 kinds x 6 projectors)", 0, 0, elapsed, dead_letters=len(dls))
    keys_live.close()
    keys_clean.close()


# -- fencing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pgvector-items", "neo4j-graph"])
def test_a_stale_writer_cannot_commit_after_a_newer_batch(fault_base, name):
    s = _ns(fault_base, "z")
    keys = KeyStore(s)
    events = decided_events(40, s.embed_dim, prefix=f"fence-{uuid.uuid4().hex[:4]}-")
    topic = s.topic("memory")
    items = [Item(topic, 0, n, e) for n, e in enumerate(events)]
    tp = (topic, 0)
    owner, zombie = build_projector(name, s), build_projector(name, s)
    owner.setup()
    zombie.setup()
    try:
        owner.apply(items[:20], {tp: 20}, expected={tp: None})          # the first writer stores 20
        owner.apply(items[20:], {tp: 40}, expected={tp: 20})            # the new owner moves on to 40
        before = owner.checksum()
        # the zombie still believes the partition is at 20 (or has none): both batches must fail whole
        changed = [replace(i, event=replace(i.event, time=i.event.time.replace(year=2001))) for i in items[:20]]
        for stale in ({tp: 20}, {tp: None}):
            with pytest.raises(StalePosition):
                zombie.apply(changed, {tp: 20}, expected=stale)
        assert owner.positions()[tp] == 40
        assert owner.checksum() == before, "a stale writer's batch changed the read model"
        # unfenced callers (replays into a shadow) keep the forward-only rule
        owner.apply([], {tp: 10})
        assert owner.positions()[tp] == 40
    finally:
        owner.close()
        zombie.close()
        keys.close()


# -- outages and kill -9 ----------------------------------------------------------------------------

def _outage(fault_base, service: str, tag: str, down_s: float = 20.0, n: int = 3000):
    live = _ns(fault_base, tag)
    keys = KeyStore(live)
    events = decided_events(n, live.embed_dim, prefix=f"{tag}-{uuid.uuid4().hex[:4]}-")
    proc = _start_projectors(live)
    try:
        wait_for(lambda: read_health(live).get("projectors", {}).get("components"), timeout=60, what="projectors up")
        # ~75 events/s for ~40 s: events keep arriving during the whole outage
        sender = _publish(live, keys, events, pace_every=50, pause=0.65)
        wait_for(lambda: stored_total(live, "pgvector-items") >= n * 0.15, timeout=120, interval=0.1, what="15% applied")
        svc = fault_service(live, service)
        svc.stop()
        stopped_at = time.monotonic()
        waiting = wait_for(lambda: [c for c, h in read_health(live)["projectors"]["components"].items()
                                    if h["state"] == "waiting"], timeout=30, what="a projector to report waiting")
        time.sleep(max(0.0, down_s - (time.monotonic() - stopped_at)))
        assert proc.poll() is None, "the projectors worker died during the outage"
        restart_service(live, service)
        back_at = time.monotonic()
        print(f"\n{service} back at {time.strftime('%H:%M:%S')}")
        sender.join(timeout=120)
        wait_for(lambda: _caught_up(live, n), timeout=150, interval=0.2, what="every projector caught up")
        recover = time.monotonic() - back_at
        assert proc.poll() is None, "the projectors worker exited instead of waiting"
        health = read_health(live)["projectors"]["components"]
        assert all(h["state"] == "running" for h in health.values()), {c: h["state"] for c, h in health.items()}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    clean = _clean_run(live, keys)
    assert_same_projections(live, clean, f"differs from a clean run after a {service} outage")
    _report(f"{service} stopped {down_s:.0f}s mid-burst ({n} events)", 0, 0, recover,
            outage_s=round(back_at - stopped_at, 1), waiting=",".join(sorted(waiting)))
    keys.close()


def test_postgres_outage_mid_burst(fault_base):
    _outage(fault_base, "postgres", "pgo")


def test_neo4j_outage_mid_burst(fault_base):
    _outage(fault_base, "neo4j", "neo")


def test_neo4j_tells_drivers_to_drop_a_silent_connection_within_20s(fault_base):
    """A write caught by a Neo4j restart must fail (transient, waited out) rather than hang: the
    server keeps every request alive with NOOPs and hints a 20 s receive timeout, which the
    driver applies to its socket (memstream/stack/files/neo4j/Launcher.java)."""
    import logging

    from adapters import neo4j_auth
    hints = []

    class Grab(logging.Handler):
        def emit(self, record):
            if "hints" in record.getMessage():
                hints.append(record.getMessage())
    log = logging.getLogger("neo4j")
    handler, level = Grab(), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        with neo4j_auth.driver(fault_base) as driver, driver.session() as s:
            s.run("RETURN 1").consume()
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert any("'connection.recv_timeout_seconds': 20" in h for h in hints), hints


def test_kill_9_projectors_mid_burst_supervisor_restarts(fault_base):
    from memstream.app.workers import Supervisor
    live = _ns(fault_base, "k")
    keys = KeyStore(live)
    n = 6000
    events = decided_events(n, live.embed_dim, prefix=f"k9-{uuid.uuid4().hex[:4]}-")
    import io
    out = io.StringIO()
    sup = Supervisor(live, names=("projectors",), env=fault_env(live), out=out)
    sup.start("projectors")
    stop = threading.Event()

    def supervise():
        while not stop.is_set():
            sup.check()
            time.sleep(0.1)
    th = threading.Thread(target=supervise, daemon=True)
    th.start()
    try:
        sender = _publish(live, keys, events, pace_every=200, pause=0.1)
        wait_for(lambda: stored_total(live, "pgvector-items") >= n * 0.3, timeout=120, interval=0.05, what="30% applied")
        victim = sup.procs["projectors"].pid
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        killed_total = stored_total(live, "pgvector-items")
        sender.join(timeout=120)
        wait_for(lambda: sup.restarts["projectors"] >= 1, timeout=30, what="the supervisor to restart it")
        wait_for(lambda: _caught_up(live, n), timeout=150, interval=0.2, what="every projector caught up")
        recover = time.monotonic() - killed_at
        assert "worker projectors" in out.getvalue() and "SIGKILL" in out.getvalue(), out.getvalue()
    finally:
        stop.set()
        th.join()
        sup.stop()
    assert killed_total < n, "the kill landed after the burst was applied; nothing was tested"
    clean = _clean_run(live, keys)
    assert_same_projections(live, clean, f"differs from a clean run after kill -9 at {killed_total}")
    _report("kill -9 projectors mid-burst (supervised)", 0, 0, recover, killed_at=killed_total)
    keys.close()


def test_key_store_waits_out_postgres_and_never_rekeys(fault_base):
    """Postgres down: key lookups raise Unavailable (transient) — never 'no key, make one', never
    'erased'; back up: the same connection object is re-opened and the user keeps their key."""
    from kernel.errors import InvalidEvent
    from adapters.resilience import TRANSIENT, Unavailable, classify
    s = _ns(fault_base, "ks")
    keys = KeyStore(s, ttl=0.0)              # no write cache: every call goes to Postgres
    user = f"ks-{uuid.uuid4().hex[:6]}"
    kid, _ = keys.key_for_write(user)
    new_user = f"ks-new-{uuid.uuid4().hex[:6]}"
    fault_service(s, "postgres").stop()
    try:
        for call in (lambda: keys.key_for_write(user), lambda: keys.key_for_write(new_user),
                     lambda: keys.key_for_read(new_user, "nope")):
            with pytest.raises(Unavailable) as info:
                call()
            assert classify(info.value) == TRANSIENT
    finally:
        restart_service(s, "postgres")
    assert keys.key_for_write(user)[0] == kid, "a user got a new key after an outage"
    # answered now: a key id this store never gave the user (no key yet, never erased) is poison naming it,
    # not "erased" (which would drop the record) and not the outage's Unavailable
    with pytest.raises(InvalidEvent, match="unknown key id 'nope'"):
        keys.key_for_read(new_user, "nope")
    assert not keys.has_key(new_user), "a key was created for a user during the outage"
    keys.close()


def test_a_fatal_error_stops_every_projector_and_the_worker_exits_non_zero(fault_base):
    """No thread dies alone: one projector's unexpected error stops the others, status 1."""
    from projections.runner import run_until_signalled
    s = _ns(fault_base, "x")
    keys = KeyStore(s)

    class Broken(type(build_projector("kv-preferences", s))):
        def setup(self):
            raise RuntimeError("a bug")

    healthy = ProjectorRunner(build_projector("task-buffers", s), s, keys)
    broken = ProjectorRunner(Broken(s), s, keys)
    t0 = time.monotonic()
    assert run_until_signalled([healthy, broken]) == 1
    assert isinstance(broken.error, RuntimeError) and healthy.error is None
    assert time.monotonic() - t0 < 30
    keys.close()


def test_a_record_that_kills_the_projector_every_time_is_dead_lettered_after_the_limit(fault_base):
    """A projector that raises an unexpected error on one record (a bug the record triggers) fails
    fatally on every run: the first run loses the batch, the next ones narrow it down (a chunk, then
    that record alone), and once it has failed alone crash_loop_limit - 1 times it is dead-lettered
    and the rest is applied.
    (Each "process" here is a fresh runner; the crash ledger is the file a restarted process reads.)"""
    s = _ns(fault_base, "cl")
    keys = KeyStore(s)
    events = decided_events(300, s.embed_dim, prefix=f"cl-{uuid.uuid4().hex[:4]}-")
    bad_id = events[150].id
    _publish(s, keys, events).join()
    total = end_offsets(s, ["memory"])
    base = type(build_projector("task-buffers", s))

    class Buggy(base):
        def apply(self, items, positions, expected=None):
            if any(item.event.id == bad_id for item in items):
                raise RuntimeError("a bug this record triggers")
            return super().apply(items, positions, expected=expected)

    t0 = time.monotonic()
    failures = 0
    for _ in range(s.crash_loop_limit + 2):
        runner = ProjectorRunner(Buggy(s), s, keys)
        try:
            runner.run(idle_exit_after=2.0)
        except RuntimeError:
            failures += 1
            continue
        break
    # the batch, a chunk of 16 around the record, then the record alone limit - 1 times
    assert failures == s.crash_loop_limit + 1, failures
    assert runner.error is None and runner.dead_lettered == 1
    assert stored_total(s, "task-buffers") == total
    dls = [d for d in dead_letters(s) if d["consumer"] == "projector.task-buffers"]
    assert len(dls) == 1 and "crashed 3 times" in dls[0]["reason"], dls
    # everything but that record is applied: the same as a run over the log without it
    ref = _ns(fault_base, "clr")
    keys_ref = KeyStore(ref)
    _publish(ref, keys_ref, [e for e in events if e.id != bad_id]).join()
    clean = ref.model_copy(update={"namespace": ref.namespace + "_c", "log_namespace_override": ref.namespace})
    pg.ensure_schema(clean)
    ProjectorRunner(build_projector("task-buffers", clean), clean, keys_ref, principal=ADMIN).run(idle_exit_after=2.0)
    a, b = build_projector("task-buffers", s), build_projector("task-buffers", clean)
    a.setup()
    b.setup()
    try:
        assert a.checksum() == b.checksum()
    finally:
        a.close()
        b.close()
    _report("record that crashes the projector every time", 0, 0, time.monotonic() - t0, failures=failures)
    keys.close()
    keys_ref.close()


def test_a_namespace_drop_cut_short_by_a_neo4j_outage_says_so_and_is_finished_by_running_it_again(
        fault_base, monkeypatch):
    """Neo4j down before a drop: Unavailable, nothing dropped. Down in the middle (after the
    footprint, before the graph): Unavailable, the data keys still there (they go last); the
    same drop once Neo4j is back leaves nothing of the namespace."""
    from adapters.resilience import Unavailable
    from replay import namespaces
    from tests.test_namespaces import populate
    s = populate(fault_base, f"{fault_base.namespace}drop{uuid.uuid4().hex[:4]}", 60)
    before = namespaces.footprint(s, s.namespace)
    assert before.topics and before.graph_nodes and before.key_schemas
    neo4j = fault_service(s, "neo4j")
    neo4j.stop()
    try:
        with pytest.raises(Unavailable, match="run the command again"):
            namespaces.drop(s, s.namespace)
    finally:
        restart_service(s, "neo4j")
    assert namespaces.footprint(s, s.namespace) == before, "a drop that could not see Neo4j dropped something"

    real = namespaces.footprint

    def footprint_then_outage(*args, **kwargs):
        fp = real(*args, **kwargs)
        neo4j.stop()
        return fp
    monkeypatch.setattr(namespaces, "footprint", footprint_then_outage)
    try:
        with pytest.raises(Unavailable):
            namespaces.drop(s, s.namespace)
    finally:
        monkeypatch.setattr(namespaces, "footprint", real)
        restart_service(s, "neo4j")
    half = namespaces.footprint(s, s.namespace)
    assert not half.topics and not half.schemas and half.graph_nodes == before.graph_nodes
    assert half.key_schemas == before.key_schemas, "the data keys went before the rest of the namespace"
    namespaces.drop(s, s.namespace)
    wait_for(lambda: namespaces.footprint(s, s.namespace).empty, timeout=30, what="nothing of the namespace left")
