"""Fault injection on the whole pipeline (extractor, memory processor, projectors under the
supervisor of `memstream run`), on the private stack of tests/helpers.py.

Turns keep flowing while a worker is killed with SIGKILL or Postgres (read models and key store)
is stopped. Afterwards, with no manual step:
  - every fact the rules extract from every turn is in the facts topic (ids are derived from the
    turn, so the expected set is computed offline) — 0 lost;
  - every fact has memory decisions (memory events caused by it) — 0 lost;
  - the projections equal a clean projector run over the same log — 0 duplicated, 0 lost;
  - the extractor's and the memory processor's committed offsets reach the end of their inputs
    (lag 0) and every projector's stored position reaches the end of the memory topic.
Each test prints `FAULT …: lost=… duplicated=… recover_s=…` (pytest -s).
"""
from __future__ import annotations

import io
import os
import signal
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from adapters.bus import EventProducer, ensure_topics
from kernel.ids import derived_id
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy.keystore import KeyStore
from projections import pg
from projections.registry import PROJECTORS, build_projector
from projections.runner import ProjectorRunner
from schemas.codec import encode, make_envelope
from schemas.events import TurnRecorded
from streams.extraction_core import offline_drafts
from tests.kafka_helpers import dead_letters, read_all
from tests.helpers import (assert_same_projections, cluster_nodes, cluster_stack_settings, cluster_stack_up,
                           end_offsets, fault_env, fault_service, fault_stack_settings, fault_stack_up, restart_service,
                           wait_for)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

BASE = os.environ["MEMSTREAM_TEST_NAMESPACE"]
N_TURNS = 240
TEXTS = ["I like {thing}", "My favourite colour is {thing}", "I live in {thing}", "我喜欢{thing}",
         "I work at {thing}", "my name is {thing}"]
THINGS = ["hiking", "green", "Lisbon", "喝茶", "Acme", "Ana", "chess", "blue", "Porto", "咖啡", "Initech", "Bea"]


@pytest.fixture(scope="session")
def fault_base(request):
    s = fault_stack_settings(BASE + "_f")
    fault_stack_up(s, request)
    return s


def _turns(n: int, tag: str):
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        user = f"{tag}-u{i % 12}"
        text = TEXTS[i % len(TEXTS)].format(thing=THINGS[(i * 7) % len(THINGS)] + ("" if i % 3 else f" {i}"))
        out.append(make_envelope(TurnRecorded(session=f"s{i % 12}", role="user", content=text), user=user,
                                 time=t0 + timedelta(minutes=i)))
    return out


def _expected_facts(turns) -> set[str]:
    return {derived_id(t.id, f"fact:{i}") for t in turns for i in range(len(offline_drafts(t)))}


class Pipeline:
    """The supervised workers of `memstream run` (no ticker), on the private stack."""

    def __init__(self, settings):
        from memstream.app.workers import Supervisor
        self.out = io.StringIO()
        self.sup = Supervisor(settings, names=("extractor", "memory", "projectors"), env=fault_env(settings), out=self.out)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            self.sup.check()
            time.sleep(0.1)

    def __enter__(self):
        for name in self.sup.names:
            self.sup.start(name)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sup.stop()


def _committed_lag(settings, group: str, topics: list[str]) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": group, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(settings.topic(t), p) for t in topics for p in range(settings.partitions)]
        lag = 0
        for tp in c.committed(parts, timeout=10):
            high = c.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)[1]
            lag += high - max(tp.offset, 0)
        return lag
    finally:
        c.close()


def _facts_and_decisions(settings):
    def envelope(m):
        try:
            env = orjson.loads(m.value()) if m.value() else None
        except orjson.JSONDecodeError:
            return None     # poison a test wrote; the stages dead-letter it
        return env if isinstance(env, dict) and "id" in env else None

    facts, fact_records = set(), 0
    for m in read_all(settings, settings.topic("facts")):
        if (env := envelope(m)) is not None:
            fact_records += 1
            facts.add(env["id"])
    decided, ids, records = set(), set(), 0
    for m in read_all(settings, settings.topic("memory")):
        if (env := envelope(m)) is not None:
            records += 1
            ids.add(env["id"])
            if env.get("causation"):
                decided.add(env["causation"])
    return facts, fact_records, decided, ids, records


class _NotYet:
    """A falsy answer that says what is still missing (wait_for prints it when it times out)."""

    def __init__(self, why: str):
        self.why = why

    def __bool__(self):
        return False

    def __repr__(self):
        return f"not yet: {self.why}"


def _settled(settings, expected: set[str]):
    from confluent_kafka import KafkaException
    try:
        return _settled_now(settings, expected)
    except KafkaException as exc:   # the broker still electing leaders after a restart: not yet
        return _NotYet(f"broker: {exc}")


def _settled_now(settings, expected: set[str]):
    facts, _, decided, _, _ = _facts_and_decisions(settings)
    if not expected <= facts:
        return _NotYet(f"{len(expected - facts)} of {len(expected)} facts missing, e.g. {sorted(expected - facts)[:3]}")
    if not expected <= decided:
        return _NotYet(f"{len(expected - decided)} of {len(expected)} facts undecided, "
                       f"e.g. {sorted(expected - decided)[:3]}")
    from tests.helpers import projectors_behind
    behind = projectors_behind(settings)
    return True if not behind else _NotYet(f"projectors behind the log's end (stored, end): {behind}")


def _publish(settings, keys, turns, per_s: float) -> threading.Thread:
    """The agents' side: turns sealed up front (the key store is what a test stops; an agent's SDK
    would see that error itself), then sent at `per_s` through any outage of the pipeline."""
    producer = EventProducer(settings, ADMIN)
    records = [(t.user, encode(t, keys)) for t in turns]

    def run():
        for user, raw in records:
            producer.send(settings.topic("turns"), user, raw)
            time.sleep(1.0 / per_s)
        producer.flush(timeout=300)   # through a broker outage too (librdkafka retries meanwhile)
        producer.close()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


@contextmanager
def _injected(env: dict):
    """Workers started inside see `env` and load tests/inject/sitecustomize.py (fault_env() copies
    os.environ into their environment)."""
    inject_dir = str(Path(__file__).parent / "inject")
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [inject_dir, os.environ.get("PYTHONPATH")]))}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _run_fault(fault_base, tag: str, inject, env: dict | None = None, check=None) -> tuple[str, dict]:
    """Turns flow through the supervised pipeline while `inject` does its harm; then every fact must
    be decided and projected exactly as a clean run of the same log would. `check(settings)` adds
    the caller's own assertions on the run's namespace."""
    s = fault_base.model_copy(update={"namespace": f"{BASE}_f{tag}{uuid.uuid4().hex[:4]}"})
    print("NAMESPACE", s.namespace, flush=True)
    ensure_topics(s)
    pg.ensure_schema(s)
    keys = KeyStore(s)
    turns = _turns(N_TURNS, f"{tag}{uuid.uuid4().hex[:4]}")
    expected = _expected_facts(turns)
    with _injected(env or {}), Pipeline(s) as pipe:
        # ready: a first turn goes all the way through
        first = _publish(s, keys, turns[:6], per_s=50)
        first.join()
        wait_for(lambda: _settled(s, _expected_facts(turns[:6])), timeout=150, interval=0.5, what="the pipeline to be ready")
        sender = _publish(s, keys, turns[6:], per_s=12)         # ~20 s of turns
        time.sleep(5)
        fault_at = time.monotonic()
        note = inject(s, pipe)
        healed_at = time.monotonic()
        sender.join(timeout=60)
        try:
            wait_for(lambda: _settled(s, expected), timeout=180, interval=0.5, what="every turn decided and projected")
        except AssertionError:
            _print_log_tails(pipe)
            raise
        recover = time.monotonic() - healed_at
        wait_for(lambda: _committed_lag(s, f"{s.namespace}.extractor", ["turns"]) == 0, timeout=30, what="extractor lag 0")
        wait_for(lambda: _committed_lag(s, f"{s.namespace}.memory", ["facts"]) == 0, timeout=30, what="memory lag 0")
        restarts = dict(pipe.sup.restarts)
        # the supervisor's lines, then each worker's own log
        log_text = pipe.out.getvalue() + "".join(
            pipe.sup.log_path(n).read_text(errors="replace") for n in pipe.sup.names if pipe.sup.log_path(n).exists())
    facts, fact_records, decided, ids, records = _facts_and_decisions(s)
    lost = len(expected - facts) + len(expected - decided)
    assert lost == 0
    clean = s.model_copy(update={"namespace": s.namespace + "_c", "log_namespace_override": s.namespace})
    pg.ensure_schema(clean)
    for name in PROJECTORS:
        ProjectorRunner(build_projector(name, clean), clean, keys, principal=ADMIN).run(idle_exit_after=2.0)
    assert_same_projections(s, clean, f"{tag}: projections differ from a clean run of the same log")
    if check is not None:
        check(s)
    print(f"\nFAULT {note}: lost={lost} duplicated=0 recover_s={recover:.1f} fault_s={healed_at - fault_at:.1f} "
          f"turns={N_TURNS} facts={len(facts)} re-sent_fact_records={fact_records - len(facts)} "
          f"re-emitted_memory_records={records - len(ids)} restarts={restarts}")
    keys.close()
    return log_text, restarts


def _print_log_tails(pipe, lines: int = 40) -> None:
    """What each worker said last, for a run that did not settle (pytest shows it with the failure)."""
    print(pipe.out.getvalue()[-4000:])
    for name in pipe.sup.names:
        path = pipe.sup.log_path(name)
        if path.exists():
            print(f"--- {name}: last {lines} lines of {path}")
            print("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))


def _kill(worker: str):
    def inject(s, pipe):
        os.kill(pipe.sup.procs[worker].pid, signal.SIGKILL)
        wait_for(lambda: pipe.sup.restarts[worker] >= 1, timeout=30, what=f"{worker} restarted")
        return f"kill -9 {worker} mid-burst (supervised)"
    return inject


def test_kill_9_extractor_mid_burst(fault_base):
    _, restarts = _run_fault(fault_base, "kx", _kill("extractor"))
    assert restarts["extractor"] >= 1


def test_kill_9_memory_processor_mid_burst(fault_base):
    _, restarts = _run_fault(fault_base, "km", _kill("memory"))
    assert restarts["memory"] >= 1


# "facts:*:0" is the first fact any partition receives, so at that partition's start; "facts:*:12"
# the first at offset 12 or later of any partition, so mid-partition. A fixed partition could hold
# none of the test's twelve users (a 0.8% chance per run): "facts:0:12" once never ran in CI.
@pytest.mark.parametrize("position", ["facts:*:12", "facts:*:0"], ids=["mid-partition", "partition-start"])
def test_a_record_the_stream_skips_is_read_again_not_committed_past(fault_base, position):
    """faust can skip a fetched record around a rebalance (faust#596) and then commit over it
    (faust#606's off-by-one): the kill -9 run above once lost a fact that way. The memory worker's
    stream here skips one fact exactly as faust does (tests/inject/sitecustomize.py); no commit may
    pass it and streams/faust_adapter.py must read it again: 0 lost, lag 0, no restart. At a
    partition's first record nothing is committed yet, and faust then commits any first run of
    acks (its None means both "never" and "offset 0"): the guard reads the log start instead."""
    def inject(s, pipe):
        time.sleep(8)   # the skipped fact is decided by the healer meanwhile
        return f"the memory worker's stream skips one fact (faust#596) at {position}"
    log_text, restarts = _run_fault(fault_base, "sk", inject, env={"MEMSTREAM_TEST_SKIP_ONCE": position})
    if "test injection: the stream skips" not in log_text:
        print(log_text[-6000:])
    assert "test injection: the stream skips" in log_text, "the injection did not run"
    assert "reading them again" in log_text, "the skipped record came back some other way than the healer"
    assert not any(restarts.values()), restarts


def _members(settings, groups: list[str]) -> list[int]:
    """Each group's count of members that hold partitions, once the group is stable (0 while it is
    rebalancing or not there yet): a member that has only sent its JoinGroup is not working yet."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(kafka_config(settings, ADMIN))
    out = []
    for _group, fut in admin.describe_consumer_groups(groups).items():
        try:
            desc = fut.result(timeout=10)
        except Exception:  # noqa: BLE001
            out.append(0)
            continue
        working = [m for m in desc.members if m.assignment and m.assignment.topic_partitions]
        out.append(len(working) if desc.state == ConsumerGroupState.STABLE else 0)
    return out


def test_a_second_worker_of_each_stage_joins_then_the_first_leaves_mid_burst(fault_base):
    """Scale out and in under load (issue 13): a copy of every stage (`memory.2`, what
    `memstream worker memory --instances 2` starts) joins its consumer groups mid-burst, then the
    first copy of each leaves with SIGTERM. Every group rebalances twice while turns flow; the
    result must be what a clean run of the same log gives: 0 lost, 0 duplicated effects.
    (An xfail until 2026-12-01: one CI run in four had left 3 facts undecided, a record skipped at a
    partition's start and committed past; since streams/faust_adapter.py reads the log start there,
    8 of 8 local runs with a real split and 6 of 6 fresh-clone CI runs passed.)"""
    stages = ("extractor", "memory", "projectors")

    def groups(s):
        return [f"{s.namespace}.extractor", f"{s.namespace}.memory"] + [
            f"{s.namespace}.projector.{name}" for name in PROJECTORS]

    def inject(s, pipe):
        for name in stages:
            pipe.sup.add(f"{name}.2")
        t0 = time.monotonic()
        wait_for(lambda: min(_members(s, groups(s))) >= 2, timeout=90, interval=1.0,
                 what="the copies to join every group")
        joined = time.monotonic() - t0
        pipe.sup.retire(*stages)
        wait_for(lambda: set(_members(s, groups(s))) == {1}, timeout=60, interval=1.0,
                 what="the first copies to leave every group")
        print(f"\nREBALANCE joined in {joined:.1f} s, left in {time.monotonic() - t0 - joined:.1f} s")
        return "a second worker of each stage joined mid-burst, then the first left"
    _, restarts = _run_fault(fault_base, "rb", inject)
    assert set(restarts) >= {f"{n}.2" for n in stages}
    assert not any(restarts.values()), restarts


def test_postgres_stopped_with_turns_flowing(fault_base):
    def inject(s, pipe):
        fault_service(s, "postgres").stop()
        time.sleep(20)
        restart_service(s, "postgres")
        return "postgres stopped 20s with turns flowing (key store + read models)"
    log_text, restarts = _run_fault(fault_base, "pp", inject)
    assert not any(restarts.values()), f"a worker exited during a transient outage: {restarts}\n{log_text}"


def test_kafka_broker_killed_with_turns_flowing(fault_base):
    """kill -9 of the only broker for ~20 s mid-burst: the agents' producer buffers, every stage
    waits (faust's client errors are transient; projectors keep polling) and resumes by itself."""
    def inject(s, pipe):
        svc = fault_service(s, "kafka")
        pid = svc.pid()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: svc.pid() is None, timeout=30, what="the broker gone")
        time.sleep(20)
        restart_service(s, "kafka")
        return "kafka broker kill -9, down 20s with turns flowing"
    log_text, restarts = _run_fault(fault_base, "kk", inject)
    print(f"worker restarts during the broker outage: {restarts}")


@pytest.fixture(scope="session")
def cluster_base(fault_base, request):
    s = cluster_stack_settings(fault_base, brokers=3)
    cluster_stack_up(s, fault_base, request)
    return s


def _busiest_broker(settings) -> int:
    """The node that leads the most partitions of the namespace's topics."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient(kafka_config(settings, ADMIN)).list_topics(timeout=10)
    leads: dict[int, int] = {}
    for name, topic in md.topics.items():
        if name.startswith(settings.namespace + "."):
            for p in topic.partitions.values():
                leads[p.leader] = leads.get(p.leader, 0) + 1
    return max(sorted(leads), key=lambda node: leads[node])


@pytest.mark.timeout(900)     # the killed broker's restart may take minutes on a loaded machine
def test_one_broker_of_three_killed_with_turns_flowing(cluster_base):
    """issue 13: a 3-node KRaft cluster (`memstream stack up --brokers 3`: 3 replicas,
    min.insync.replicas 2, acks=all, idempotent producers). kill -9 of the broker leading the most
    partitions mid-burst: the agents' writes go on to the two left (a new leader per partition, an
    acknowledged record is already on 2 replicas), every stage moves to the new leaders by itself,
    and the node, restarted once writes went on without it, rejoins. Every acknowledged turn is in the log once and is
    processed exactly once in effect: 0 lost, 0 duplicated against a clean run of the same log."""
    outage = {}

    def inject(s, pipe):
        from confluent_kafka import KafkaException

        def turns_in_log():
            try:
                return end_offsets(s, ["turns"])
            except KafkaException:   # a partition still led by the dead node: not yet
                return None
        victim = _busiest_broker(s)
        node = next(n for n in cluster_nodes(s) if n.node == victim)
        outage["turns_before_kill"] = end_offsets(s, ["turns"])
        os.kill(node.pid(), signal.SIGKILL)
        killed_at = time.monotonic()
        wait_for(lambda: node.pid() is None, timeout=30, what="the broker gone")
        # The controllers move its partitions' leadership once its session times out (KRaft's
        # broker.session.timeout.ms, 9 s): then the turns the agents kept sending are acknowledged
        # by the two brokers left.
        outage["turns_while_down"] = wait_for(lambda: (n := turns_in_log()) and n > outage["turns_before_kill"] and n,
                                              timeout=90, interval=0.5, what="turns written with one broker down")
        outage["writes_after_s"] = round(time.monotonic() - killed_at, 1)
        restart_service(s, node.name)
        return (f"kafka node {victim} of 3 (leading the most partitions) kill -9, down "
                f"{time.monotonic() - killed_at:.0f} s with turns flowing")

    def once_in_the_log(s):
        ids = [orjson.loads(m.value())["id"] for m in read_all(s, s.topic("turns"))]
        assert len(ids) == len(set(ids)) == N_TURNS, f"{len(ids)} turn records, {len(set(ids))} distinct, {N_TURNS} sent"
    _, restarts = _run_fault(cluster_base, "kc", inject, check=once_in_the_log)
    print(f"turns written with one broker down: {outage}; worker restarts: {restarts}")
    assert outage["turns_while_down"] > outage["turns_before_kill"]


def test_poison_turns_and_facts_are_dead_lettered_and_the_stream_goes_on(fault_base):
    """Oversized, malformed-ciphertext, NUL-user and key-less records on the turns and facts topics:
    each dead-lettered once by the stage that reads it first, every good turn still decided; a
    newline bomb among the good turns is extracted like any other turn, without a stall."""
    from confluent_kafka import Producer

    from adapters.bus import DEAD_LETTER_RAW_LIMIT, producer_config
    s = fault_base.model_copy(update={"namespace": f"{BASE}_fpz{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    keys = KeyStore(s)
    turns = _turns(60, f"pz{uuid.uuid4().hex[:4]}")
    # not poison, but once a 53 s stall for every user: a statement, then 20 KB of newlines (the
    # text past the extraction bound is not read)
    bomb = make_envelope(TurnRecorded(session="s0", role="user", content="I like tea" + "\n" * 20_000 + "I live in Braga"),
                         user=turns[2].user, time=turns[2].time + timedelta(seconds=1))
    turns.insert(3, bomb)
    expected = _expected_facts(turns)
    assert _expected_facts([bomb])   # its statements are still found
    sample = orjson.loads(encode(turns[0], keys))
    poison = [
        (turns[0].user, orjson.dumps({**sample, "id": str(uuid.uuid4()), "sealed": {**sample["sealed"], "ct": "%%bad%%" * 4}})),
        ("nul\x00user", orjson.dumps({**sample, "id": str(uuid.uuid4()), "user": "nul\x00user"})),
        (None, encode(_turns(1, "keyless")[0], keys)),
        (turns[1].user, b"{" + b"x" * (900 * 1024)),
    ]
    prod = Producer(producer_config(s, ADMIN, **{"message.max.bytes": 2_000_000}))
    for topic in ("turns", "facts"):
        for k, v in poison:
            prod.produce(s.topic(topic), key=None if k is None else k.encode(), value=v)
    assert prod.flush(30) == 0
    t0 = time.monotonic()
    with Pipeline(s) as pipe:
        _publish(s, keys, turns, per_s=50).join()
        wait_for(lambda: _settled(s, expected), timeout=180, interval=0.5, what="every good turn decided and projected")
        recover = time.monotonic() - t0
        restarts = dict(pipe.sup.restarts)
    assert not any(restarts.values()), restarts
    dls = dead_letters(s)
    by_consumer: dict[str, int] = {}
    for d in dls:
        by_consumer[d["consumer"]] = by_consumer.get(d["consumer"], 0) + 1
    assert by_consumer.get("extractor") == len(poison), by_consumer      # the turns topic's poison
    assert by_consumer.get("memory-processor") == len(poison), by_consumer  # the facts topic's poison
    big = [d for d in dls if d["size"] > DEAD_LETTER_RAW_LIMIT]
    # every reader of the topics dead-letters the 900 KB record (extractor, memory processor, and the
    # projectors of turns and of all topics), each as a digest that fits a Kafka request
    assert {d["consumer"] for d in big} >= {"extractor", "memory-processor"}
    assert all(d["sealed_raw"] is None and d["sha256"] and "larger than" in d["raw_omitted"] for d in big)
    print(f"\nFAULT poison turns+facts (4 kinds each): lost=0 duplicated=0 recover_s={recover:.1f} "
          f"dead_letters={by_consumer} restarts={restarts}")
    keys.close()


@pytest.mark.timeout(900)     # each of the extractor's restarts loads its embedder: minutes under load
def test_a_record_that_kills_its_worker_every_time_is_dead_lettered_after_the_limit(fault_base):
    """A turn on which the extractor process dies hard (tests/inject/sitecustomize.py: os._exit in
    the middle of extraction, no Python error handling) restarts it crash_loop_limit times, then is
    dead-lettered with its position; every other turn, before and after it, becomes facts."""
    s = fault_base.model_copy(update={"namespace": f"{BASE}_fcl{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    keys = KeyStore(s)
    marker = f"crash-{uuid.uuid4().hex[:6]}"
    turns = _turns(40, f"cl{uuid.uuid4().hex[:4]}")
    bad = make_envelope(TurnRecorded(session="s0", role="user", content=f"I like {marker}"), user=turns[0].user,
                        time=turns[20].time + timedelta(seconds=1))
    turns.insert(21, bad)
    expected = _expected_facts([t for t in turns if t is not bad])
    t0 = time.monotonic()
    with _injected({"MEMSTREAM_TEST_CRASH_ON": marker}), Pipeline(s) as pipe:
        _publish(s, keys, turns, per_s=50).join()
        wait_for(lambda: _settled(s, expected), timeout=600, interval=0.5, what="every other turn decided")
        recover = time.monotonic() - t0
        wait_for(lambda: _committed_lag(s, f"{s.namespace}.extractor", ["turns"]) == 0, timeout=60,
                 what="extractor lag 0 (the crashing turn committed past)")
        restarts = dict(pipe.sup.restarts)
    dls = [d for d in dead_letters(s) if d["consumer"] == "extractor"]
    assert len(dls) == 1 and "crashed" in dls[0]["reason"], dls
    assert dls[0]["source"]["topic"] == s.topic("turns")
    # the unit it was in (a chunk of 16 first, when its batch was larger), then alone limit - 1 times
    assert restarts["extractor"] in (s.crash_loop_limit, s.crash_loop_limit + 1), restarts
    assert restarts["memory"] == 0 and restarts["projectors"] == 0, restarts
    facts, *_ = _facts_and_decisions(s)
    print(f"\nFAULT crash-looping turn (extractor dies hard on it): lost=0 duplicated=0 recover_s={recover:.1f} "
          f"restarts={restarts} dead_letter={dls[0]['reason']!r}")
    keys.close()
