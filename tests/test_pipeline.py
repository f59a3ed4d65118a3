"""The first vertical slice on the real stack: turn → fact → decisions → read models."""
from __future__ import annotations

import orjson
from confluent_kafka import Producer

from adapters import neo4j_auth
from adapters.bus import producer_config
from adapters.kafka_auth import ADMIN
from projections.queries import memories, preferences
from schemas.codec import encode, make_envelope
from schemas.events import TurnRecorded
from tests.helpers import unique_user, wait_for
from tests.kafka_helpers import dead_letters, read_all


def prefs_by_key(settings, user):
    return {p["key"]: p for p in preferences(settings, user)}


def test_chinese_turns_become_preferences_and_memories(settings, client, pipeline):
    user = unique_user("zh")
    client.record_turn(user, "s1", "user", "你好，我叫张三，我住在北京。")
    client.record_turn(user, "s1", "assistant", "你好张三，我叫小助手。")  # assistant turns are not about the user
    client.record_turn(user, "s1", "user", "我喜欢喝咖啡")
    prefs = wait_for(lambda: (p := prefs_by_key(settings, user)) and len(p) == 3 and p, what="3 preferences")
    assert {k: p["value"] for k, p in prefs.items()} == {"name": "张三", "location": "北京", "likes:咖啡": "true"}
    mems = wait_for(lambda: len(m := memories(settings, user)) == 3 and m, what="3 memories")
    assert sorted(m["content"] for m in mems) == sorted(["用户叫张三", "用户住在北京", "用户喜欢喝咖啡"])
    assert {m["category"] for m in mems} == {"identity", "preference"}


def test_english_preference_is_superseded_with_a_version(settings, client, pipeline):
    user = unique_user("en")
    client.record_turn(user, "s1", "user", "My name is Alice and I live in Paris.")
    wait_for(lambda: prefs_by_key(settings, user).get("location"), what="location v1")
    client.record_turn(user, "s2", "user", "I moved to Berlin last month.")
    loc = wait_for(lambda: (p := prefs_by_key(settings, user).get("location")) and p["version"] == 2 and p,
                   what="location v2")
    assert loc["value"] == "Berlin"
    assert prefs_by_key(settings, user)["name"]["value"] == "Alice"


def test_memories_reach_neo4j_with_positions_stored(settings, client, pipeline):
    user = unique_user("g")
    client.record_turn(user, "s1", "user", "I like jazz")
    driver = neo4j_auth.driver(settings)
    try:
        def nodes():
            with driver.session() as s:
                return s.run("MATCH (m:Memory {ns: $ns, user: $u}) RETURN m.id AS id, keys(m) AS k",
                             ns=settings.namespace, u=user).data()
        (node,) = wait_for(nodes, what="a Memory node")
        # the graph holds the structure, never the text: that stays in Postgres (erasure scrubs it there)
        assert "content" not in node["k"]
        assert wait_for(lambda: [m["content"] for m in memories(settings, user) if m["memory_id"] == node["id"]],
                        what="its memory item") == ["User likes jazz"]
        with driver.session() as s:
            pos = s.run("MATCH (p:ProjectorPosition {ns: $ns, projector: 'neo4j-graph'}) RETURN sum(p.next_offset) AS n",
                        ns=settings.namespace).single()["n"]
        assert pos >= 1
    finally:
        driver.close()


def test_malformed_turn_goes_to_dead_letters_and_the_next_one_is_processed(settings, client, keys, pipeline):
    user = unique_user("bad")
    raw = Producer(producer_config(settings, ADMIN))
    topic = settings.topic("turns")
    delivered = []
    raw.produce(topic, key=user.encode(), value=b'{"id": "nope", "type": "turn.recorded"}',
                on_delivery=lambda err, msg: delivered.append((msg.partition(), msg.offset())))
    raw.produce(topic, key=user.encode(), value=b"\xff\xfe not json",
                on_delivery=lambda err, msg: delivered.append((msg.partition(), msg.offset())))
    # a well-formed envelope of an unknown version, and a known version missing a clear field
    good = orjson.loads(encode(make_envelope(TurnRecorded(session="s", role="user", content="x"), user=user), keys))
    for mutate in (lambda r: r.update(v=9), lambda r: r["data"].pop("session")):
        rec = orjson.loads(orjson.dumps(good))
        mutate(rec)
        raw.produce(topic, key=user.encode(), value=orjson.dumps(rec),
                    on_delivery=lambda err, msg: delivered.append((msg.partition(), msg.offset())))
    raw.flush(10)
    client.record_turn(user, "s1", "user", "I live in Lisbon")
    wait_for(lambda: prefs_by_key(settings, user).get("location"), what="the good turn after the bad ones")

    def mine():
        return [d for d in dead_letters(settings) if d["key"] == user and d["consumer"] == "extractor"]
    dls = wait_for(lambda: len(m := mine()) == 4 and m, what="4 dead letters")
    by_offset = {(d["source"]["partition"], d["source"]["offset"]): d for d in dls}
    assert set(by_offset) == set(delivered)
    reasons = [by_offset[p]["reason"] for p in delivered]
    assert "id: String should match pattern" in reasons[0]
    assert "Invalid JSON" in reasons[1] or "utf-8" in reasons[1].lower()
    assert "unknown event turn.recorded v9" in reasons[2]
    # a sealed event's clear data is authenticated (seal v2): a removed field is tampering
    assert "fails authentication against its clear envelope" in reasons[3]
    assert all(d["source"]["topic"] == topic for d in dls)
    # The original bytes are kept only sealed with the user's key, never in the clear.
    assert all(d["sealed_raw"] and d["sealed_raw"]["kid"] for d in dls)


def test_sealed_fields_never_travel_in_the_clear(settings, client, pipeline):
    user = unique_user("clear")
    marker = "Zanzibar" + user[-6:]
    client.record_turn(user, "s1", "user", f"I live in {marker}")
    wait_for(lambda: prefs_by_key(settings, user).get("location"), what="location")
    for name in ("turns", "facts", "memory"):
        records = [m for m in read_all(settings, settings.topic(name)) if m.key() == user.encode()]
        assert records, name
        assert not any(marker.encode() in m.value() for m in records), f"plaintext in {name}"


def test_a_reply_that_leans_on_the_assistants_question_keeps_it(settings, client, pipeline):
    """Issue 30: the live extractor reads the assistant's previous turn of the session, so a reply
    whose "it" only that question names is stored with it; another session's reply is not."""
    user = unique_user("reply")
    client.record_turn(user, "s1", "assistant", "Good to see you! How's it going with yoga? Have you noticed any improvements?")
    client.record_turn(user, "s1", "user", "Thanks! It's helped me improve my strength and flexibility during my workouts.")
    client.record_turn(user, "s2", "user", "It has really helped my back pain and my sleep.")
    mems = wait_for(lambda: len(m := memories(settings, user)) == 2 and m, what="2 memories")
    by_start = {m["content"].split(" ", 1)[0]: m["content"] for m in mems}
    assert by_start["It's"] == ("It's helped User improve their strength and flexibility during their workouts "
                                "(in reply to: How's it going with yoga? Has User noticed any improvements?)")
    assert by_start["It"] == "It has really helped User's back pain and their sleep"   # s2 asked nothing
