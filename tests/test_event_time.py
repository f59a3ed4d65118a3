"""One event-time policy, on write and on read, and one decode path for live and replay (real stack).

- before 1970-01-01: refused with the same words by the SDK, the HTTP API and the CLI;
- a record dated ahead of the broker's append time (produced raw, past every edge): poison for every
  stage — dead-lettered with its reason, nothing of it kept, the user's later facts unharmed;
- a record without its user as key: dead-lettered live, skipped by replay, so `replay verify` stays exact;
- a record sealed with a key id the key store never gave: a dead letter naming it, not "an erased user".
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

import orjson
import pytest
from fastapi.testclient import TestClient

from adapters.bus import EventProducer, ensure_topics
from kernel.errors import InvalidInput
from adapters.kafka_auth import ADMIN
from schemas.codec import encode, make_envelope
from schemas.events import FactExtracted, TurnRecorded
from tests.auth_helpers import bearer
from tests.helpers import unique_user, wait_for
from tests.kafka_helpers import dead_letters

pytestmark = pytest.mark.timeout(300)

MOON = "1969-07-20T20:17:00+00:00"


def _private(settings, tag: str):
    from projections import pg
    s = settings.model_copy(update={"namespace": f"{settings.namespace}_{tag}{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    pg.ensure_schema(s)
    return s


# -- the rule itself (pure) --------------------------------------------------------------------


# -- before 1970: refused at every edge, with one explanation ------------------------------------

def test_before_1970_the_sdk_refuses(client):
    with pytest.raises(InvalidInput, match="before 1970-01-01"):
        client.record_turn("moon-u", "s", "user", "we landed", at=datetime.fromisoformat(MOON))


def test_before_1970_the_api_answers_422(settings, admin_key):
    from memstream.app.api import create_app
    with TestClient(create_app(settings), raise_server_exceptions=False, headers=bearer(admin_key)) as api:
        resp = api.post("/v1/turns", json={"user": "moon-u", "session": "s", "role": "user", "content": "hi", "at": MOON})
    assert resp.status_code == 422, resp.text
    assert "before 1970-01-01" in orjson.dumps(resp.json()).decode()


def test_before_1970_the_cli_refuses_in_one_line(settings):
    proc = subprocess.run([sys.executable, "-m", "memstream.app.cli", "publish", "turn", "--user", "moon-u",
                           "--text", "hi", "--at", MOON], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace})
    assert proc.returncode == 2 and "before 1970-01-01" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


# -- a year ahead, produced raw: poison for every stage ------------------------------------------

def test_a_record_dated_a_year_ahead_is_dead_lettered_by_every_stage_and_changes_nothing(settings, keys, pipeline):
    from projections.queries import memories, preferences, session_window
    user = unique_user("ahead")
    ahead = datetime.now(timezone.utc) + timedelta(days=365)
    producer = EventProducer(settings, ADMIN)   # past every edge: what a forged or broken producer writes
    try:
        turn = producer.send(settings.topic("turns"), user, encode(make_envelope(
            TurnRecorded(session="s", role="user", content="My name is Tomorrow and I live in Futureville"),
            user=user, time=ahead), keys)).result(30)
        fact = producer.send(settings.topic("facts"), user, encode(make_envelope(FactExtracted(
            fact_id=str(uuid.uuid4()), source_turn=str(uuid.uuid4()), channel="rule", key="likes:time travel",
            value="true", content="User likes time travel", category="preference", importance=0.9,
            embedding=[0.1] * 384, embed_model="test"),
            user=user, time=ahead), keys)).result(30)
    finally:
        producer.close()

    def letters() -> dict[tuple, set]:
        out: dict[tuple, set] = {}
        for d in dead_letters(settings):
            src = d.get("source") or {}
            pos = (src.get("topic"), src.get("partition"), src.get("offset"))
            if pos in ((turn.topic, turn.partition, turn.offset), (fact.topic, fact.partition, fact.offset)):
                assert "after the broker appended the record" in d["reason"], d["reason"]
                out.setdefault(pos, set()).add(d.get("consumer"))
        return out
    turn_pos, fact_pos = (turn.topic, turn.partition, turn.offset), (fact.topic, fact.partition, fact.offset)
    wait_for(lambda: "extractor" in letters().get(turn_pos, set()) and "memory-processor" in letters().get(fact_pos, set())
             and any("session-windows" in c for c in letters().get(turn_pos, set())),
             timeout=120, what="the extractor, the memory processor and the projectors to dead-letter the records")
    # A legit turn of the same user afterwards goes through, at full importance, nothing aged by the future
    from adapters.sdk import MemoryClient
    with MemoryClient(settings) as c:
        c.record_turn(user, "s", "user", "I live in Lisbon")
    wait_for(lambda: preferences(settings, user), timeout=120, what="the legit turn's preference")
    assert [(p["key"], p["value"]) for p in preferences(settings, user)] == [("location", "Lisbon")]
    mems = memories(settings, user)
    assert all("time travel" not in m["content"] and "Futureville" not in m["content"] for m in mems)
    assert all(m["status"] == "active" and m["importance"] >= 0.5 for m in mems), mems
    assert [m["content"] for m in session_window(settings, user, "s")] == ["I live in Lisbon"]


# -- a key-less record: dead-lettered live, skipped by replay, verify exact -----------------------

def test_key_less_and_wrong_key_records_leave_replay_verify_exact(settings, keys):
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    from replay.verify import verify
    s = _private(settings, "kl")
    user = unique_user("keyless")
    producer = EventProducer(s, ADMIN)
    try:
        good = encode(make_envelope(TurnRecorded(session="s", role="user", content="kept"), user=user), keys)
        stray = encode(make_envelope(TurnRecorded(session="s", role="user", content="stray"), user=user), keys)
        producer._producer.produce(s.topic("turns"), value=stray, key=None)            # no key at all
        producer.send(s.topic("turns"), "someone-else", stray).result(30)              # another user's key
        producer.send(s.topic("turns"), user, good).result(30)
        producer.flush()
    finally:
        producer.close()
    names = ["session-windows", "audit-index"]
    dead = 0
    for name in names:
        runner = ProjectorRunner(build_projector(name, s), s, keys)
        runner.run(idle_exit_after=2.0)
        assert runner.error is None
        dead += runner.dead_lettered
    assert dead == 4   # two records, two projectors
    report = verify(s, names, keys=keys, progress=False)
    assert report.ok, report


# -- a key id the key store never gave: a dead letter, not an erased user --------------------------

def test_an_unknown_key_id_is_dead_lettered_with_its_reason(settings, keys):
    from projections.registry import build_projector
    from projections.runner import ProjectorRunner
    s = _private(settings, "uk")
    user = unique_user("unknownkid")
    wire = orjson.loads(encode(make_envelope(TurnRecorded(session="s", role="user", content="hi"), user=user), keys))
    wire["sealed"]["kid"] = "f" * 16
    producer = EventProducer(s, ADMIN)
    try:
        producer.send(s.topic("turns"), user, orjson.dumps(wire)).result(30)
    finally:
        producer.close()
    runner = ProjectorRunner(build_projector("session-windows", s), s, keys)
    runner.run(idle_exit_after=2.0)
    assert runner.error is None and runner.dead_lettered == 1
    reasons = [d["reason"] for d in dead_letters(s)]
    assert len(reasons) == 1 and "unknown key id" in reasons[0] and "'ffffffffffffffff'" in reasons[0], reasons


# -- the host's clock against the broker's ----------------------------------------------------------

def test_the_sdk_learns_the_brokers_clock_and_refuses_to_stamp_with_a_clock_ahead_of_it(settings):
    from kernel.errors import ClockAhead
    from adapters.metrics import CLOCK_AHEAD
    from adapters.sdk import MemoryClient
    with MemoryClient(settings) as c:
        c.record_turn(unique_user("clock"), "s", "user", "hello")
        producer = c._producer_for("turns")
        # the delivery report carried the broker's append time (LogAppendTime): this host is in step with it
        assert abs(producer.clock_ahead_s) < 5.0 and CLOCK_AHEAD._value.get() == producer.clock_ahead_s
        producer.clock_ahead_s = settings.max_future_skew_s + 60     # as a host whose clock runs ahead would see
        with pytest.raises(ClockAhead, match="ahead of the Kafka broker's"):
            c.record_turn(unique_user("clock"), "s", "user", "stamped in the future")
        # an explicit event time does not use the host's clock: still accepted (the consumers judge it)
        c.record_turn(unique_user("clock"), "s", "user", "back-filled", at=datetime(2026, 1, 1, tzinfo=timezone.utc))


def test_a_state_directory_that_cannot_take_files_is_named(settings, tmp_path):
    from kernel.errors import ConfigError
    from streams.app import make_app
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the stack directory should be")
    with pytest.raises(ConfigError, match="state directory .*not-a-dir.* is not writable"):
        make_app("memory", settings.model_copy(update={"stack_dir": blocker}))
