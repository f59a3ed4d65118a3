"""Forged memory decisions on the real stack (#28 item 1): the control principal — what the API, MCP
and CLI write the memory topic with — produces memory.superseded, memory.decayed and memory.expired
for a user's memory, unsigned and with a made-up MAC. Every projector dead-letters every one of
them, and nothing changes: the memory stays active, at its importance, recalled as before."""
from __future__ import annotations

import orjson

from adapters.bus import EventProducer
from adapters.kafka_auth import CONTROL
from projections.queries import memories
from projections.registry import PROJECTOR_TYPES
from schemas.codec import decision_mac, encode, make_envelope
from schemas.events import MemoryDecayed, MemoryExpired, MemorySuperseded
from tests.helpers import unique_user, wait_for
from tests.kafka_helpers import dead_letters


def test_decisions_forged_with_the_control_principal_are_dead_lettered_and_change_nothing(settings, client, keys,
                                                                                          pipeline):
    user = unique_user("forgedecision")
    client.record_turn(user, "s1", "user", "I live in Reykjavik.")
    client.record_turn(user, "s1", "user", "I like chess")
    wait_for(lambda: len(memories(settings, user)) == 2, what=f"{user} projected")
    before = {m["memory_id"]: m for m in memories(settings, user)}
    target, other = sorted(before)

    forgeries = []
    for data in (MemorySuperseded(memory_id=target, superseded_by=other, reason="mallory"),
                 MemoryDecayed(memory_id=target, importance=0.0, previous=0.5, reason="decay", age_days=1.0),
                 MemoryExpired(memory_id=target, reason="ttl", importance=0.0, age_days=400.0, idle_days=400.0,
                               in_degree=0)):
        # the test's key store holds the decision key (one machine): what a forger would make is
        # the same event without the MAC, or with one made up
        wire = orjson.loads(encode(make_envelope(data, user=user), keys))
        forgeries.append({k: v for k, v in wire.items() if k != "auth"})
        wire = orjson.loads(encode(make_envelope(data, user=user), keys))
        wire["auth"]["mac"] = decision_mac(b"\x07" * 32, b"guess", None)
        forgeries.append(wire)
    forger = EventProducer(settings, CONTROL)   # the principal every API and MCP process holds
    try:
        for wire in forgeries:
            forger.send(settings.topic("memory"), user, orjson.dumps(wire)).result(10)
    finally:
        forger.close()

    def dead() -> list[dict]:
        return [d for d in dead_letters(settings) if d["key"] == user and d["source"]["topic"] == settings.topic("memory")]
    readers = sum("memory" in p.topics for p in PROJECTOR_TYPES.values())
    assert readers >= 7
    wait_for(lambda: len(dead()) >= len(forgeries) * readers and len({d["consumer"] for d in dead()}) == readers,
             what="every projector's dead letters of the forged decisions")
    reasons = {d["reason"] for d in dead()}
    assert any("no proof of origin" in r for r in reasons) and any("fails its decision MAC" in r for r in reasons), reasons
    # a later turn is projected, so every projector has read past the forgeries ...
    client.record_turn(user, "s1", "user", "My name is Zebulon.")
    wait_for(lambda: len(memories(settings, user)) == 3, what="the later turn")
    # ... and nothing changed: the target is active, not superseded, at its importance
    after = {m["memory_id"]: m for m in memories(settings, user)}
    for mid, was in before.items():
        now = after[mid]
        assert (now["status"], now["superseded_by"]) == (was["status"], was["superseded_by"]) == ("active", None), now
        assert abs(now["importance"] - was["importance"]) < 0.05, (was["importance"], now["importance"])
