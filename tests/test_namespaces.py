"""`memstream namespace list|drop` on the real stack: a dropped namespace leaves nothing behind
(topics, groups, ACLs, schemas and shadows, data keys, graph generations, files), namespaces
whose names start the same are untouched, and a namespace whose workers run is refused."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from bench.synthetic import decided_events
from adapters.bus import EventProducer, ensure_topics
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy.keystore import KeyStore
from adapters.privacy.tenants import local_key_file
from projections import pg
from projections import registry
from projections.registry import build_projector
from projections.runner import ProjectorRunner
from replay import namespaces
from replay.rebuild import rebuild
from schemas.codec import encode
from tests.helpers import wait_for

PROJECTED = ("pgvector-items", "neo4j-graph", "kv-preferences")


def populate(settings, name: str, n: int = 240):
    """A namespace as a benchmark leaves it: a log, live projections, a rebuilt graph generation
    and a leftover shadow schema, data keys, a worker's state directory, log and admin key."""
    ns = settings.model_copy(update={"namespace": name})
    ensure_topics(ns)
    pg.ensure_schema(ns)
    keys = KeyStore(ns)
    producer = EventProducer(ns, ADMIN)
    for env in decided_events(n, ns.embed_dim, users=5, prefix=f"{name}-"):
        producer.send(ns.topic("memory"), env.user, encode(env, keys))
    producer.flush()
    producer.close()
    for projector in PROJECTED:
        ProjectorRunner(build_projector(projector, ns), ns, keys).run(idle_exit_after=2.0)
    # The graph now lives in generation <name>__g1; a rebuild stopped half-way leaves <name>__shadow.
    assert rebuild(ns, ["neo4j-graph"], keys=keys, fresh=True, progress=False).swapped
    assert not rebuild(ns, ["pgvector-items"], keys=keys, fresh=True, progress=False, stop_after=n // 4,
                       batch_size=20).swapped
    keys.close()
    d = ns.stack_dir
    (d / "faust" / name / "memory").mkdir(parents=True, exist_ok=True)
    (d / "faust" / name / "memory" / "state.sst").write_bytes(b"x")
    (d / "logs").mkdir(exist_ok=True)
    (d / "logs" / f"{name}-memory.log").write_text("a worker's log\n")
    local_key_file(ns).write_text("msk_test\n")
    return ns


@pytest.fixture(scope="module")
def three(settings):
    """`a`, and two namespaces whose names start with a's: `a` + 'x' and `a` + '-x'."""
    a = f"{settings.namespace}_drop"
    made = populate(settings, a), populate(settings, a + "x", 60), populate(settings, a + "-x", 60)
    yield made
    for ns in made:   # whatever a failed test left
        namespaces.drop(ns, ns.namespace, force=True)


def test_dropping_a_namespace_leaves_nothing_of_it_and_nothing_else_changes(three):
    a, ax, a_x = three
    before = namespaces.footprint(a, a.namespace)
    assert [t for t in before.topics if t.startswith(a.namespace + ".")] and before.groups and before.acls
    assert set(before.schemas) >= {a.namespace, a.namespace + "__shadow"} and before.key_schemas == [a.namespace]
    assert before.graph_nodes > 0 and len(before.files) == 3
    assert not any(t.startswith(ax.namespace + ".") or t.startswith(a_x.namespace + ".") for t in before.topics)
    others = {ns.namespace: namespaces.footprint(ns, ns.namespace) for ns in (ax, a_x)}
    sums = {ns.namespace: checksums(ns) for ns in (ax, a_x)}

    dropped = namespaces.drop(a, a.namespace)
    assert dropped.topics == before.topics

    wait_for(lambda: namespaces.footprint(a, a.namespace).empty, timeout=30, what="nothing of the namespace left")
    for ns in (ax, a_x):
        assert namespaces.footprint(ns, ns.namespace) == others[ns.namespace]
        assert checksums(ns) == sums[ns.namespace]
    # The data keys went with it: a key store opened on the name again starts empty.
    keys = KeyStore(a)
    try:
        assert not any(keys.has_key(f"{a.namespace}-{i}") for i in range(5))
    finally:
        keys.close()
    namespaces.drop(a, a.namespace)   # dropping again is a no-op, not an error


def test_a_namespace_whose_group_has_members_is_refused_and_kept(three):
    _, ax, _ = three
    consumer = Consumer({**kafka_config(ax, ADMIN), "group.id": f"{ax.namespace}.projector.live",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([ax.topic("memory")])
    try:
        wait_for(lambda: consumer.poll(0.5) is not None or consumer.assignment(), timeout=30, what="a member")
        with pytest.raises(namespaces.NamespaceInUse, match="projector.live"):
            namespaces.drop(ax, ax.namespace)
        assert ax.topic("memory") in AdminClient(kafka_config(ax, ADMIN)).list_topics(timeout=10).topics
    finally:
        consumer.close()
    wait_for(lambda: not namespaces.footprint(ax, ax.namespace).active_groups, timeout=30, what="the member gone")
    namespaces.drop(ax, ax.namespace)
    wait_for(lambda: namespaces.footprint(ax, ax.namespace).empty, timeout=30, what="nothing left")


def test_the_cli_shows_what_a_drop_would_take_and_drops_only_with_yes(three):
    _, _, a_x = three
    cli = [sys.executable, "-m", "memstream.app.cli", "namespace"]
    env = dict(os.environ)
    listed = subprocess.run(cli + ["list"], capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0 and a_x.namespace in listed.stdout, listed.stderr
    shown = subprocess.run(cli + ["drop", a_x.namespace], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and "run again with --yes" in shown.stdout and a_x.topic("memory") in shown.stdout
    assert not namespaces.footprint(a_x, a_x.namespace).empty
    done = subprocess.run(cli + ["drop", a_x.namespace, "--yes"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "dropped." in done.stdout, done.stderr
    wait_for(lambda: namespaces.footprint(a_x, a_x.namespace).empty, timeout=30, what="nothing left")
    bad = subprocess.run(cli + ["drop", a_x.namespace + "__shadow"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert bad.returncode == 2 and "__" in bad.stderr


def checksums(ns) -> dict[str, str]:
    return registry.checksums(ns, PROJECTED)
