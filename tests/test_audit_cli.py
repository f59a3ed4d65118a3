"""`memstream audit`: a memory's whole life with causation chains down to the turns, a user's
timeline, content unsealed (or shown as erased), on the command line and over HTTP."""
from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from adapters.bus import EventProducer
from adapters.erasure import erase_user
from kernel.ids import uuid7
from memstream.app.workers import worker_command
from adapters.kafka_auth import ADMIN
from projections.queries import audit_events, memories
from replay.audit import ERASED, NotFound, memory_audit, render_memory, user_timeline
from schemas.codec import encode, make_envelope
from schemas.events import REGISTRY, FactExtracted, TurnRecorded
from tests.helpers import unique_user, wait_for

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def cli(settings, *args) -> subprocess.CompletedProcess:
    return subprocess.run(worker_command("x")[:3] + ["audit", *args], capture_output=True, timeout=120,
                          env={**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace})


def by_content(settings, user) -> dict[str, dict]:
    return {m["content"]: m for m in memories(settings, user)}


@pytest.fixture(scope="module")
def moved(settings, client, pipeline):
    """Lisbon (turn 1), then Porto (turn 2) supersedes it, then Porto again (turn 3) reinforces it."""
    user = unique_user("aud")
    turns = [client.record_turn(user, "s1", "user", text, at=T0 + timedelta(hours=i))
             for i, text in enumerate(["I live in Lisbon", "I live in Porto", "I live in Porto"])]
    wait_for(lambda: (m := by_content(settings, user)) and m.get("User lives in Porto", {}).get("access_count") == 1
             and m["User lives in Lisbon"]["status"] == "outdated", what="Porto reinforced, Lisbon superseded")
    wait_for(lambda: sum(r["type"] == "memory.reinforced" for r in audit_events(settings, user)) == 1,
             what="the reinforcement indexed")
    mems = by_content(settings, user)
    return user, turns, mems["User lives in Porto"]["memory_id"], mems["User lives in Lisbon"]["memory_id"]


def position(e: dict) -> tuple:
    return e["topic"], e["partition"], e["offset"]


def test_a_reinforced_superseding_memory_shows_its_parents_and_their_turns(settings, moved):
    user, turns, porto, lisbon = moved
    a = memory_audit(settings, porto)
    assert (a["memory_id"], a["user"], a["status"]) == (porto, user, "active")
    # where it came from: created ← fact ← turn 2, with content unsealed
    assert [e["type"] for e in a["origin"]] == ["memory.created", "fact.extracted", "turn.recorded"]
    assert position(a["origin"][-1]) == (turns[1].topic, turns[1].partition, turns[1].offset)
    assert a["origin"][-1]["content"] == {"content": "I live in Porto"}
    assert a["origin"][0]["content"]["content"] == "User lives in Porto"
    # its life: every event with time, position and causation chain
    [reinforced] = [e for e in a["events"] if e["type"] == "memory.reinforced"]
    assert [c["type"] for c in reinforced["causes"]] == ["fact.extracted", "turn.recorded"]
    assert position(reinforced["causes"][-1]) == (turns[2].topic, turns[2].partition, turns[2].offset)
    assert {"memory.created", "memory.superseded", "memory.reinforced", "preference.set"} <= {e["type"] for e in a["events"]}
    assert all({"time", "topic", "partition", "offset", "causation_id", "summary"} <= e.keys() for e in a["events"])
    # its parent: the memory it superseded, and the turn that one came from
    [parent] = a["parents"]
    assert (parent["memory_id"], parent["relation"], parent["status"]) == (lisbon, "supersedes", "outdated")
    assert [e["type"] for e in parent["origin"]] == ["memory.created", "fact.extracted", "turn.recorded"]
    assert parent["origin"][-1]["content"] == {"content": "I live in Lisbon"}
    text = render_memory(a)
    assert "supersedes" in text and "I live in Lisbon" in text and "I live in Porto" in text

    old = memory_audit(settings, lisbon)
    assert old["status"] == "outdated" and old["children"][0]["memory_id"] == porto
    assert old["children"][0]["relation"] == "superseded_by"


def test_audit_on_the_command_line(settings, moved):
    user, turns, porto, _ = moved
    done = cli(settings, "memory", porto, "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["parents"][0]["relation"] == "supersedes"
    human = cli(settings, "memory", porto)
    assert human.returncode == 0 and f"memory {porto} of {user}: active" in human.stdout.decode()
    done = cli(settings, "user", user, "--json", "--content")
    timeline = orjson.loads(done.stdout)
    times = [e["time"] for e in timeline["events"]]
    assert times == sorted(times) and not timeline["erased"]
    assert [e["content"]["content"] for e in timeline["events"] if e["type"] == "turn.recorded"] == \
        ["I live in Lisbon", "I live in Porto", "I live in Porto"]
    bare = orjson.loads(cli(settings, "user", user, "--json").stdout)
    assert len(bare["events"]) == len(timeline["events"]) and "content" not in bare["events"][0]
    missing = cli(settings, "memory", "no-such-memory")
    assert missing.returncode == 2 and b"no events of memory" in missing.stderr


def test_audit_over_http(settings, moved, admin_key):
    from fastapi.testclient import TestClient

    from memstream.app.api import create_app
    user, _, porto, lisbon = moved
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {admin_key}"}) as http:
        r = http.get(f"/v1/audit/memories/{porto}")
        assert r.status_code == 200 and r.json()["parents"][0]["memory_id"] == lisbon
        r = http.get(f"/v1/audit/users/{user}", params={"content": "true", "limit": 5})
        assert r.status_code == 200 and r.json()["count"] == 5 and "content" in r.json()["events"][0]
        assert http.get("/v1/audit/memories/no-such-memory").status_code == 404


def test_erased_content_reads_as_erased(settings, client, keys, pipeline):
    user = unique_user("auderase")
    client.record_turn(user, "s1", "user", "I live in Bergen", at=T0)
    mid = wait_for(lambda: (m := memories(settings, user)) and m[0]["memory_id"], what="the memory")
    wait_for(lambda: len(audit_events(settings, user)) >= 4, what="turn, fact, memory, preference indexed")
    keys.erase(user)                       # the key is gone before the projections heard of it
    a = memory_audit(settings, mid)
    assert a["origin"][-1]["type"] == "turn.recorded" and a["origin"][-1]["content"] == ERASED
    assert all(e.get("content") in (ERASED, None) for e in a["events"])
    erase_user(settings, user, requested_by="test")
    wait_for(lambda: [r["type"] for r in audit_events(settings, user)] == ["user.erased"], what="only the record left")
    t = user_timeline(settings, user, content=True)
    assert t["erased"] and t["count"] == 1
    with pytest.raises(NotFound):
        memory_audit(settings, mid)


@pytest.mark.skipif(("memory.merged", 1) not in REGISTRY, reason="memory.merged is not an event type yet")
def test_a_merged_memory_shows_both_parents_and_their_turns(settings, keys, pipeline):
    """Consolidation (every 5 stores) merges two memories in the merge band; the survivor's audit
    names the retired one and the turns both came from."""
    import numpy as np

    from tests.consolidation_helpers import basis, rot, unit
    user = unique_user("audmerge")
    dim = settings.embed_dim
    vecs = [basis(0, dim), rot(basis(0, dim), basis(1, dim), 15), basis(2, dim), basis(3, dim), basis(4, dim)]
    assert 0.95 <= float(np.dot(unit(vecs[0]), unit(vecs[1]))) < 0.98   # the merge band, below dedup
    producer = EventProducer(settings, ADMIN)
    turn_ids, fact_ids = [], []
    try:
        for i, vec in enumerate(vecs):
            at = T0 + timedelta(minutes=i)
            turn = make_envelope(TurnRecorded(session="s1", role="user", content=f"note {i}: ok"), user=user, time=at)
            producer.send(settings.topic("turns"), user, encode(turn, keys)).result(10)
            fid = uuid7(at)   # as the LLM channel writes a fact: caused by its turn
            fact = make_envelope(FactExtracted(fact_id=fid, source_turn=turn.id, session="s1", channel="llm",
                                               model="test", content=f"remembered note {i}", category="fact",
                                               importance=0.9 if i == 0 else 0.5, embedding=unit(vec),
                                               embed_model="synthetic"),
                                 user=user, time=at, id=fid, causation=turn.id, correlation=turn.id, producer="test")
            producer.send(settings.topic("facts"), user, encode(fact, keys)).result(10)
            turn_ids.append(turn.id)
            fact_ids.append(fid)
    finally:
        producer.close()
    survivor, retired = fact_ids[0], fact_ids[1]
    wait_for(lambda: any(r["type"] == "memory.merged" for r in audit_events(settings, user)), what="the merge indexed")
    a = memory_audit(settings, survivor)
    assert "memory.merged" in [e["type"] for e in a["events"]]
    [parent] = [p for p in a["parents"] if p["memory_id"] == retired]
    assert parent["relation"] == "merged_from" and parent["status"] == "merged"
    assert [e["type"] for e in parent["origin"]] == ["memory.created", "fact.extracted", "turn.recorded"]
    assert parent["origin"][-1]["event_id"] == turn_ids[1] and parent["origin"][-1]["content"] == {"content": "note 1: ok"}
    assert a["origin"][-1]["event_id"] == turn_ids[0]
    gone = memory_audit(settings, retired)
    assert gone["status"] == "merged" and gone["children"] == [
        {"memory_id": survivor, "relation": "merged_into", "event_id": gone["children"][0]["event_id"]}]
