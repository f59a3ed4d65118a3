"""Erasure by crypto-shredding on the real stack: the key goes, every projection forgets."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from adapters import neo4j_auth
from adapters.bus import EventProducer
from adapters.erasure import erase_user
from adapters.kafka_auth import ADMIN
from projections.queries import memories, preferences
from schemas.codec import decode, open_blob
from schemas.events import LATEST
from tests.helpers import KeepsPublishing, unique_user, wait_for
from tests.kafka_helpers import dead_letters, read_all


def graph_nodes(settings, user):
    with neo4j_auth.driver(settings) as driver, driver.session() as s:
        return s.run("MATCH (m:Memory {ns: $ns, user: $u}) RETURN count(m) AS n", ns=settings.namespace, u=user).single()["n"]


def follows_edges(settings, user):
    with neo4j_auth.driver(settings) as driver, driver.session() as s:
        return s.run("MATCH (:Memory {ns: $ns, user: $u})-[r:FOLLOWS]->(:Memory) RETURN count(r) AS n",
                     ns=settings.namespace, u=user).single()["n"]


def test_erased_user_disappears_everywhere_and_others_stay(settings, client, keys, pipeline):
    victim, bystander = unique_user("erase"), unique_user("keep")
    marker = "Quixotic" + victim[-6:]
    for user in (victim, bystander):
        client.record_turn(user, "s1", "user", f"My name is {marker} and I live in {marker}ville.")
        client.record_turn(user, "s1", "user", "I like chess")
    # a dead letter of the victim's, whose original bytes are kept sealed
    client._producer.send(settings.topic("turns"), victim, b'{"broken": "' + marker.encode() + b'"}').result(10)
    for user in (victim, bystander):
        wait_for(lambda: len(preferences(settings, user)) == 3 and len(memories(settings, user)) == 3
                 and graph_nodes(settings, user) == 3, what=f"{user} projected")
    dl = wait_for(lambda: [d for d in dead_letters(settings) if d["key"] == victim], what="victim's dead letter")

    erase_user(settings, victim, requested_by="test")

    wait_for(lambda: not preferences(settings, victim) and not memories(settings, victim)
             and graph_nodes(settings, victim) == 0, what="victim's rows gone")
    assert not keys.has_key(victim)
    assert len(preferences(settings, bystander)) == 3 and graph_nodes(settings, bystander) == 3

    # Every event of the victim now reads as erased; the bystander's still read.
    for topic in ("turns", "facts", "memory"):
        for m in read_all(settings, settings.topic(topic)):
            if m.key() == victim.encode() and m.value() and b'"broken"' not in m.value():
                env = decode(m.value(), keys)
                # events with personal fields are unreadable now; clear-only ones (links, the erasure) never had any
                assert env.erased or not LATEST[env.type].SEALED, env.type
    keys.forget_cached(victim)
    assert open_blob(keys, victim, "deadletter:{topic}:{partition}:{offset}".format(**dl[0]["source"]),
                     dl[0]["sealed_raw"]) is None

    # No plaintext of the victim in any Kafka segment file of our topics or in the worker logs,
    # except the one malformed record the test itself wrote in the clear to the turns topic.
    kafka_dir = settings.stack_dir / "data" / "kafka"
    hits = [p for p in kafka_dir.glob(f"*{settings.namespace}*/*.log") if marker.encode() in p.read_bytes()]
    assert all(".turns-" in str(p.parent.name) for p in hits), hits
    turns_hits = sum(p.read_bytes().count(marker.encode()) for p in hits)
    assert turns_hits == 1, "only the test's own raw malformed record may hold the marker"
    # Worker logs and the services' own logs (Kafka, Postgres, Neo4j) never saw the plaintext.
    for log in Path(settings.stack_dir / "logs").glob("*.log"):
        assert marker.encode() not in log.read_bytes(), log


def test_user_erased_event_is_in_the_memory_log(settings, keys):
    user = unique_user("erase2")
    pos = erase_user(settings, user)
    (m,) = [m for m in read_all(settings, settings.topic("memory")) if m.key() == user.encode()]
    assert (m.partition(), m.offset()) == (pos.partition, pos.offset)
    assert orjson.loads(m.value())["type"] == "user.erased"


def test_a_forged_user_erased_is_dead_lettered_and_erases_nothing(settings, client, keys, pipeline):
    """Control events carry an HMAC of the key store's control key. A user.erased produced straight
    to Kafka without it (or with a made-up one) goes to the dead-letter topic, and the user's
    memories, preferences, graph and data key all stay."""
    from query.recall import RecallRequest, recall
    from query.store import ReadModels
    from schemas.codec import control_mac, encode, make_envelope
    from schemas.events import UserErased

    user = unique_user("forged")
    client.record_turn(user, "s1", "user", "I live in Reykjavik.")
    client.record_turn(user, "s1", "user", "I like chess")
    wait_for(lambda: len(memories(settings, user)) == 2 and graph_nodes(settings, user) == 2, what=f"{user} projected")

    unsigned = orjson.loads(encode(make_envelope(UserErased(requested_by="mallory"), user=user), keys))
    del unsigned["auth"]
    made_up = orjson.loads(encode(make_envelope(UserErased(requested_by="mallory"), user=user), keys))
    made_up["auth"]["mac"] = control_mac(b"\x07" * 32, b"guess")
    # Written with the admin principal: the SDK's publisher may not write the memory topic at all
    # (tests/test_kafka_acl.py); the MAC is what stops anyone who can.
    forger = EventProducer(settings, ADMIN)
    for wire in (unsigned, made_up):
        forger.send(settings.topic("memory"), user, orjson.dumps(wire)).result(10)
    forger.close()

    def dead() -> list[dict]:
        return [d for d in dead_letters(settings) if d["key"] == user and d["source"]["topic"] == settings.topic("memory")]
    # every projector of the memory topic dead-letters both, with the reason
    from projections.registry import PROJECTOR_TYPES
    readers = sum("memory" in p.topics for p in PROJECTOR_TYPES.values())
    assert readers >= 7
    wait_for(lambda: len(dead()) >= 2 * readers and len({d["consumer"] for d in dead()}) == readers,
             what="the forged erasures' dead letters")
    reasons = {d["reason"] for d in dead()}
    assert any("no proof of origin" in r for r in reasons) and any("fails its MAC" in r for r in reasons), reasons
    # a later turn is projected (so every consumer has read past the forgeries) ...
    client.record_turn(user, "s1", "user", "My name is Zebulon.")
    wait_for(lambda: len(memories(settings, user)) == 3 and graph_nodes(settings, user) == 3, what="the later turn")
    # ... and nothing was erased: rows, graph, key, and recall all still there
    assert keys.has_key(user)
    assert len(preferences(settings, user)) >= 2
    models = ReadModels(settings)
    try:
        hits = recall(models, RecallRequest(user, "Which city does the user live in?", k=3, expand=False))
    finally:
        models.close()
    assert any("Reykjavik" in h.content for h in hits), [h.content for h in hits]
    # the memory processor kept its state: the new memory FOLLOWS the earlier ones (a dropped
    # state would start a fresh chain)
    wait_for(lambda: follows_edges(settings, user) == 2, what="the new memory linked to the old ones")


def test_erasure_stays_erased_while_the_user_keeps_publishing(settings, client, keys, pipeline):
    """A user keeps publishing while being erased, and turns sealed before the erasure arrive after
    it: no key is ever re-created for them (the SDK refuses once the erasure's notification has
    dropped its cached key), and no memory, preference or graph row of theirs reappears."""
    import time

    from kernel.errors import UserErased as Erased
    from schemas.codec import encode, make_envelope
    from schemas.events import TurnRecorded

    user, bystander = unique_user("race"), unique_user("race-keep")
    client.record_turn(user, "s1", "user", "My name is Ottoline.")
    wait_for(lambda: len(memories(settings, user)) == 1, what="the user's first memory")
    # in flight: sealed with the user's key before the erasure, produced after it
    in_flight = [encode(make_envelope(TurnRecorded(session="s1", role="user", content=f"I like sport number {i}"),
                                      user=user), keys) for i in range(5)]
    with KeepsPublishing(settings, user, "s1", "I live in Town{i}") as publisher:
        wait_for(lambda: len(publisher.published) >= 10, what="the user publishing")
        erase_user(settings, user, requested_by="test")
        for raw in in_flight:
            client._producer.send(settings.topic("turns"), user, raw).result(10)
        wait_for(lambda: len(publisher.refused) >= 10, timeout=10,
                 what="the SDK to refuse the erased user (no key re-created)")
    assert not keys.has_key(user) and keys.is_erased(user)
    with pytest.raises(Erased):
        keys.key_for_write(user)

    # The rows go, and stay gone while everything published around the erasure is processed
    # (a bystander's later turns go all the way through meanwhile).
    wait_for(lambda: not memories(settings, user) and not preferences(settings, user) and graph_nodes(settings, user) == 0,
             what="the erased user's rows gone")
    client.record_turn(bystander, "s1", "user", "I live in Elsewhere.")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert not memories(settings, user) and not preferences(settings, user) and graph_nodes(settings, user) == 0
        time.sleep(0.5)
    wait_for(lambda: memories(settings, bystander), what="the bystander's turn projected")
    assert not memories(settings, user) and not preferences(settings, user) and graph_nodes(settings, user) == 0
    assert not keys.has_key(user)
    # the extractor counted the erased user's turns it dropped (at least the 5 in flight)
    from adapters.resilience import read_health
    wait_for(lambda: read_health(settings).get("extractor", {}).get("components", {}).get("extractor", {})
             .get("dropped_erased", 0) >= len(in_flight), what="the extractor's dropped_erased count in its health")


def test_erasure_reaches_the_namespaces_shadows(settings, client, keys, pipeline):
    """A shadow made before the erasure (what `replay verify --keep` or a what-if leaves: read
    models no live projector keeps, so they never read `user.erased`) loses the user's rows too."""
    from adapters.erasure import erase_from_shadows
    from projections import pg
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from replay.stores import drop_schema, shadow_settings

    victim, bystander = unique_user("shadow"), unique_user("shadowkeep")
    for user in (victim, bystander):
        client.record_turn(user, "s1", "user", "I like sailing and my favourite colour is teal")
    for user in (victim, bystander):
        wait_for(lambda: len(memories(settings, user)) == 2, what=f"{user} projected")
    shadow = shadow_settings(settings, "erasetest")
    pg.ensure_schema(shadow)
    try:
        for name in ("pgvector-items", "kv-preferences", "neo4j-graph"):
            ProjectorRunner(build_projector(name, shadow), shadow, keys, principal=ADMIN).run(idle_exit_after=2.0)
        assert len(memories(shadow, victim)) == 2 and preferences(shadow, victim) and graph_nodes(shadow, victim) == 2

        erase_user(settings, victim, requested_by="test")

        assert memories(shadow, victim) == [] and preferences(shadow, victim) == [] and graph_nodes(shadow, victim) == 0
        assert len(memories(shadow, bystander)) == 2 and graph_nodes(shadow, bystander) == 2
        assert erase_from_shadows(settings, victim) == {}, "a second pass finds nothing left"
    finally:
        drop_schema(settings, shadow.namespace)
        with neo4j_auth.driver(settings) as driver, driver.session() as s:
            s.run("MATCH (m:Memory {ns: $ns}) DETACH DELETE m", ns=shadow.namespace)
