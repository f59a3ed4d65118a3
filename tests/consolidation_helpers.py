"""Shared by test_consolidation and test_forgetting: an own namespace with its own pipeline (ticks
broadcast to every user of a namespace, so they must not reach other tests' users), facts with
chosen embeddings and event times, and a check that every projection tells the same story."""
from __future__ import annotations

import contextlib
from datetime import datetime

import numpy as np

from adapters import neo4j_auth
from adapters.bus import EventProducer, ensure_topics
from kernel.ids import uuid7
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy.keystore import KeyStore
from projections.registry import PROJECTORS, build_projector
from memstream.app.workers import start_pipeline, stop_pipeline
from projections import pg
from projections.graph_generation import RESOLVE
from projections.importance import importance_now
from projections.queries import audit_events, preferences
from projections.runner import ProjectorRunner
from schemas.codec import encode, make_envelope
from schemas.events import EventData, FactExtracted
from tests.helpers import WATCHED, assert_same_projections, wait_for


@contextlib.contextmanager
def own_pipeline(settings, suffix: str, env: dict | None = None, **update):
    live = settings.model_copy(update={"namespace": f"{settings.namespace}_{suffix}", **update})
    ensure_topics(live)
    pg.ensure_schema(live)
    keys = KeyStore(live)
    procs = start_pipeline(live, env=env)
    WATCHED.update(procs)
    try:
        yield live, keys
    finally:
        for name in procs:
            WATCHED.pop(name, None)
        stop_pipeline(procs)
        keys.close()
        for name in procs:
            log = live.stack_dir / "logs" / f"{live.namespace}-{name}.log"
            if log.exists() and b"Traceback" in log.read_bytes():
                print(f"\n--- {log} ---\n" + log.read_text()[-4000:])


def unit(v) -> list[float]:
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v)).tolist()


def basis(i: int, dim: int) -> np.ndarray:
    v = np.zeros(dim)
    v[i] = 1.0
    return v


def rot(a: np.ndarray, b: np.ndarray, degrees: float) -> np.ndarray:
    t = np.radians(degrees)
    return np.cos(t) * a + np.sin(t) * b


def publish_fact(live, keys, user: str, at: datetime, content: str, vec, importance: float = 0.5,
                 key: str | None = None, value: str | None = None, category: str = "fact",
                 edits: str | None = None) -> str:
    """A fact.extracted with a chosen embedding and event time (as the extractor would write it); its memory id.
    `edits`: the memory it is a new version of (a stated edit's fact, channel `stated`)."""
    fid = uuid7(at)
    data = FactExtracted(fact_id=fid, source_turn=uuid7(at), channel="stated" if edits else "llm",
                         model=None if edits else "test-script", key=key, value=value, content=content,
                         category=category, importance=importance, embedding=unit(vec), embed_model="synthetic",
                         edits=edits)
    publish(live, keys, "facts", user, data, at, fid)
    return fid


def publish(live, keys, topic: str, user: str, data: EventData, at: datetime, id: str | None = None):
    producer = EventProducer(live, ADMIN)
    try:
        env = make_envelope(data, user=user, time=at, id=id, producer="test")
        return producer.send(live.topic(topic), user, encode(env, keys)).result(10)
    finally:
        producer.close()


# -- what each projection says ---------------------------------------------------------------

def pg_items(live, user: str, at: datetime | None = None) -> dict[str, dict]:
    """The user's rows; importance as readers see it at `at` (decay is a function), or as published
    (the column itself) when `at` is None."""
    importance = "importance" if at is None else importance_now(live.decay_rate, at)
    with pg.connect(live, autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT memory_id, status, {importance}, content, merged_into, parent_ids, source_fact_ids, access_count '
            f'FROM "{live.namespace}".memory_items WHERE user_id = %s', (user,)).fetchall()
    return {r[0]: {"status": r[1], "importance": round(float(r[2]), 4), "content": r[3], "merged_into": r[4],
                   "parent_ids": r[5], "source_fact_ids": r[6], "access_count": r[7]} for r in rows}


def graph(live, query: str, **params) -> list[dict]:
    with neo4j_auth.driver(live) as driver, driver.session() as s:
        return s.run(RESOLVE + query, ns=live.namespace, **params).data()


def graph_nodes(live, user: str) -> dict[str, dict]:
    rows = graph(live, "MATCH (m:Memory {ns: gen, user: $u}) "
                       "RETURN m.id AS id, m.status AS status, m.importance AS importance, m.content AS content, "
                       "COUNT { (m)<-[:FOLLOWS|SIMILAR_TO]-() } AS in_degree", u=user)
    # Neo4j reads are read-committed: a node that a concurrent transaction deletes (a forget) can be
    # matched and then read with its properties gone. Such a row reads as importance None, which
    # disagrees with Postgres, so wait_agree polls again instead of failing on it.
    # The same race can read the node's id as None: it then counts as a node only the graph has, a
    # disagreement that is polled again.
    return {(r["id"] or "<node deleted concurrently>"): {"status": r["status"], "content": r["content"], "in_degree": r["in_degree"],
                      "importance": None if r["importance"] is None else round(float(r["importance"]), 4)}
            for r in rows}


def disagreements(live, user: str) -> list[str]:
    """Per memory id: status and importance equal in pgvector and Neo4j, and no text in Neo4j (the
    graph holds none: projections/graph_projector.py); every preference points at a memory that
    exists; the audit index has each memory's creation."""
    items, nodes = pg_items(live, user), graph_nodes(live, user)
    problems = []
    if set(items) != set(nodes):
        problems.append(f"ids: pg only {sorted(set(items) - set(nodes))}, neo4j only {sorted(set(nodes) - set(items))}")
    for mid in set(items) & set(nodes):
        a, b = items[mid], nodes[mid]
        for field in ("status", "importance"):
            if a[field] != b[field]:
                problems.append(f"{mid} {field}: pg {a[field]!r} neo4j {b[field]!r}")
        if b["content"] is not None:
            problems.append(f"{mid}: neo4j holds its text {b['content']!r}")
    for p in preferences(live, user):
        if p["memory_id"] and p["memory_id"] not in items:
            problems.append(f"preference {p['key']} points at a memory that is gone: {p['memory_id']}")
    audit = audit_events(live, user, limit=100_000)
    created = {m for r in audit if r["type"] == "memory.created" for m in r["memory_ids"]}
    missing = set(items) - created
    if missing:
        problems.append(f"audit lacks memory.created for {sorted(missing)}")
    return problems


def wait_agree(live, user: str, what: str, condition=lambda items: True, timeout: float = 60.0,
               at: datetime | None = None) -> dict[str, dict]:
    """Wait until the projections agree with each other and `condition(pg items)` holds (importance
    as readers see it at `at`: see pg_items)."""
    def check():
        items = pg_items(live, user, at)
        return not disagreements(live, user) and condition(items) and [items]
    try:
        return wait_for(check, timeout=timeout, what=what)[0]
    except AssertionError as exc:
        raise AssertionError(f"{exc}\npg: {pg_items(live, user, at)}\nneo4j: {graph_nodes(live, user)}\n"
                             f"problems: {disagreements(live, user)}") from None


def types_for(live, memory_id: str) -> list[str]:
    return [r["type"] for r in audit_events(live, memory_id=memory_id, limit=10_000)]


# -- replay -----------------------------------------------------------------------------------

def projectors_caught_up(live, keys) -> bool:
    """Every live projector's stored positions have reached the end of the topics it reads."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({**kafka_config(live, ADMIN), "group.id": "probe-" + uuid7()})
    try:
        ends = {}
        for name in ("turns", "tasks", "facts", "memory"):
            topic = live.topic(name)
            for p in range(live.partitions):
                ends[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
    finally:
        consumer.close()
    for name in PROJECTORS:
        proj = build_projector(name, live)
        proj.setup()
        try:
            stored = proj.positions()
            topics = {live.topic(t) for t in proj.topics}
            if any(stored.get(tp, 0) < end for tp, end in ends.items() if tp[0] in topics and end > 0):
                return False
        finally:
            proj.close()
    return True


def assert_replay_reproduces(live, keys) -> None:
    """Fresh projectors over the same log, into separate stores: every checksum equal."""
    wait_for(lambda: projectors_caught_up(live, keys), timeout=120, what="live projectors at the end of the log")
    replay = live.model_copy(update={"namespace": live.namespace + "_replay", "log_namespace_override": live.namespace})
    pg.ensure_schema(replay)
    for name in PROJECTORS:
        ProjectorRunner(build_projector(name, replay), replay, keys, principal=ADMIN).run(idle_exit_after=3.0)
    assert_same_projections(live, replay, "the replay differs from the live projection")
