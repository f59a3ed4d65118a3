"""Memory decisions carry the pipeline's decision MAC (#28 item 1): only a holder of the decision key
can write one that consumers accept; older logs (appended before the key) still read."""
from __future__ import annotations

import dataclasses
import os
import stat
from datetime import UTC, datetime

import orjson
import pytest

from adapters.privacy import decision_key
from kernel.config import SecretStr, Settings
from kernel.errors import ConfigError, InvalidEvent, MemstreamError
from schemas.codec import CONTROL_TYPES, DECISION_TYPES, decode, encode, make_envelope
from schemas.events import (ALL_EVENTS, DecisionData, MemoryCreated, MemoryDecayed, MemoryExpired,
                            MemorySuperseded, TurnRecorded)
from tests.fast.inmemory import DECISION_KEY, KeyRing

T0 = datetime(2026, 12, 1, tzinfo=UTC)
AFTER = int(T0.timestamp() * 1000)            # a broker append time after the key was made
BEFORE_KEY = dataclasses.replace(DECISION_KEY, since_ms=AFTER + 1)


def created(user: str = "alice") -> MemoryCreated:
    return MemoryCreated(memory_id="m1", fact_id="f1", content="User lives in Lisbon", category="fact",
                         importance=0.6, embedding=[1.0, 0.0, 0.0])


def forged_kinds():
    return [MemorySuperseded(memory_id="m1", superseded_by="m2", reason="mallory"),
            MemoryDecayed(memory_id="m1", importance=0.0, previous=0.6, reason="decay", age_days=1.0),
            MemoryExpired(memory_id="m1", reason="ttl", importance=0.0, age_days=1.0, idle_days=1.0, in_degree=0)]


def test_every_decision_type_is_signed_and_nothing_from_outside_the_pipeline_is():
    decisions = {c.TYPE for c in ALL_EVENTS if issubclass(c, DecisionData)}
    assert decisions <= DECISION_TYPES
    assert {"memory.superseded", "memory.decayed", "memory.expired", "memory.created", "relation.ended",
            "rules.adopted", "session.summarized"} <= DECISION_TYPES
    # what the API, MCP and CLI write (recalls, control events) and the inputs are not decisions
    assert not DECISION_TYPES & (CONTROL_TYPES | {"memory.recalled", "turn.recorded", "memory.stated", "fact.extracted"})


@pytest.mark.parametrize("data", [created(), *forged_kinds()], ids=lambda d: d.TYPE)
def test_a_signed_decision_reads_and_an_unsigned_or_made_up_one_is_poison(data):
    keys = KeyRing()
    raw = encode(make_envelope(data, user="alice", time=T0, producer="memory-processor/1"), keys)
    wire = orjson.loads(raw)
    assert wire["auth"]["kid"] == DECISION_KEY.kid
    assert decode(raw, keys, AFTER).type == data.TYPE

    unsigned = {k: v for k, v in wire.items() if k != "auth"}
    with pytest.raises(InvalidEvent, match="no proof of origin"):
        decode(orjson.dumps(unsigned), keys, AFTER)
    with pytest.raises(InvalidEvent, match="no proof of origin"):
        decode(orjson.dumps(unsigned), keys, None)          # no append time: not provably old
    other = KeyRing()
    other.decision_key = lambda: dataclasses.replace(DECISION_KEY, key=b"\x07" * 32)   # type: ignore[method-assign]
    made_up = orjson.loads(encode(make_envelope(data, user="alice", time=T0), other))
    made_up["sealed"] = wire.get("sealed")            # decodable by `keys` apart from the MAC
    if made_up["sealed"] is None:
        del made_up["sealed"]
    with pytest.raises(InvalidEvent, match="fails its decision MAC"):
        decode(orjson.dumps({**made_up, "id": wire["id"]}), keys, AFTER)
    renamed = {**wire, "auth": {**wire["auth"], "kid": "elsewhere"}}
    with pytest.raises(InvalidEvent, match="unknown decision key"):
        decode(orjson.dumps(renamed), keys, AFTER)


def test_the_mac_covers_the_clear_fields_and_the_sealed_part():
    keys = KeyRing()
    raw = encode(make_envelope(created(), user="alice", time=T0), keys)
    wire = orjson.loads(raw)
    altered = {**wire, "data": {**wire["data"], "importance": 1.0}}
    with pytest.raises(InvalidEvent, match="fails its decision MAC"):
        decode(orjson.dumps(altered), keys, AFTER)
    # The user's data key seals another content under the same clear envelope (anyone who can read
    # the key store can): the seal opens, the decision MAC does not.
    resealed = orjson.loads(encode(make_envelope(created().model_copy(update={"content": "User lives in Mordor"}),
                                                 user="alice", time=T0, id=wire["id"]), keys))
    assert resealed["data"] == wire["data"] and resealed["sealed"]["ct"] != wire["sealed"]["ct"]
    with pytest.raises(InvalidEvent, match="fails its decision MAC"):
        decode(orjson.dumps({**wire, "sealed": resealed["sealed"]}), keys, AFTER)


def test_an_unsigned_decision_appended_before_the_key_existed_reads_as_before():
    keys = KeyRing()
    wire = orjson.loads(encode(make_envelope(forged_kinds()[0], user="alice", time=T0), keys))
    del wire["auth"]
    keys.decision_key = lambda: BEFORE_KEY              # type: ignore[method-assign]
    assert decode(orjson.dumps(wire), keys, AFTER).data.superseded_by == "m2"
    with pytest.raises(InvalidEvent, match="no proof of origin"):
        decode(orjson.dumps(wire), keys, BEFORE_KEY.since_ms)   # at or after `since`: must be signed


def test_a_process_without_the_key_writes_no_decision_and_checks_none():
    keys = KeyRing()
    raw = encode(make_envelope(forged_kinds()[1], user="alice", time=T0), keys)
    keyless = KeyRing()
    keyless.decision_key = lambda: None                 # type: ignore[method-assign]
    with pytest.raises(MemstreamError, match="holds none"):
        encode(make_envelope(forged_kinds()[1], user="alice", time=T0), keyless)
    # what it is not asked to sign, it writes as ever
    encode(make_envelope(TurnRecorded(session="s", role="user", content="hi"), user="alice", time=T0), keyless)
    # reading: a serving process's as-of replays only what the audit index (verified) points at
    assert decode(raw, keyless, AFTER).type == "memory.decayed"
    with pytest.raises(ConfigError, match="no decision key"):
        decision_key.check_held(keyless)


def test_the_key_file_is_made_once_private_and_read_back(tmp_path):
    s = Settings(stack_dir=tmp_path)
    assert decision_key.load(s) is None
    with pytest.raises(ConfigError, match="stack up"):
        decision_key.require(s)
    assert decision_key.ensure(s) == "created"
    first = decision_key.require(s)
    assert decision_key.ensure(s) == "present" and decision_key.require(s) == first
    assert stat.S_IMODE(os.stat(decision_key.path(s)).st_mode) == 0o600
    assert len(first.key) == 32 and first.key.hex() not in repr(first)
    # the setting wins over the file, in the same one-line form
    line = decision_key.new_line(now_ms=5)
    from_env = decision_key.require(Settings(stack_dir=tmp_path, decision_key=SecretStr(line)))
    assert from_env.since_ms == 5 and from_env.key != first.key
    for bad in ("", "memstream-decision-key/1 5", "other 5 AAAA", "memstream-decision-key/1 x AAAA",
                "memstream-decision-key/1 5 c2hvcnQ="):
        with pytest.raises(ConfigError):
            decision_key.parse(bad, "test")
