"""The scenario suite of #30 over the pure extraction and memory rules (bench/scenarios.py): every
stated fact of tests/fixtures/scenarios/ is current after the conversation, no superseded state is
served as current, and the ontology's kinds behave as one slot each."""
from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from bench.scenarios import load, score, simulate
from domain import ontology
from domain.extraction import extract_facts
from domain.memory_rules import decide
from domain.memory_state import Rules, UserState
from kernel.ids import derived_id, uuid7
from schemas.events import FactExtracted

AT = datetime(2026, 11, 30, tzinfo=timezone.utc)


def test_scenario_suite_keeps_every_stated_fact_current():
    results = [(s["id"], score(s, simulate(s))) for s in load()]
    total = {k: sum(r[k] for _, r in results) for k in ("correct", "wrong", "missing")}
    n = sum(total.values())
    assert n >= 40
    bad = {sid: [d for d in r["details"] if d[0] != "correct"] for sid, r in results if r["wrong"] or r["missing"]}
    assert total["correct"] >= 0.9 * n, bad
    assert total["wrong"] <= 0.02 * n, bad
    served = [d for r in (r for _, r in results) for d in r["details"] if d[1].startswith("served as current")]
    assert served == []


def _keys(text):
    return {d.key: d.value for d in extract_facts(text, at=AT) if d.key}


def test_each_single_valued_attribute_is_a_slot():
    assert _keys("I now work as a nurse at St. Mary's.")["occupation"] == "nurse"
    assert _keys("I work for Acme Corp.")["employer"] == "Acme Corp"
    assert _keys("I'm a student at Stanford.")["school"] == "Stanford"
    assert _keys("My title is senior analyst.")["role"] == "senior analyst"
    assert _keys("We broke up last month.")["relationship_status"] == "single"
    assert _keys("I went vegan this year.")["diet"] == "vegan"
    assert _keys("我离婚了")["relationship_status"] == "divorced"
    assert _keys("我吃素")["diet"] == "vegetarian"
    assert _keys("I'm not into horror movies anymore.")["likes:horror movies"] == "false"
    assert _keys("我受不了香菜")["likes:香菜"] == "false"


def test_introductions_are_names_but_states_are_not():
    assert _keys("Hey, I'm Frank.")["name"] == "Frank"
    assert _keys("大家好，我是张伟。")["name"] == "张伟"
    for text in ("I'm tired.", "I'm French.", "I'm Catholic, so no.", "我是学生。", "我是北京人。"):
        assert "name" not in _keys(text), text


def test_negated_possession_and_habits_are_negative_facts():
    facts = {d.key: d for d in extract_facts("I don't have a car and I don't smoke.", at=AT) if d.key}
    assert facts["has:car"].value == "false" and facts["has:car"].content == "User does not have a car"
    assert facts["does:smoke"].value == "false"
    assert _keys("I started smoking again.")["does:smoke"] == "true"


def test_mixed_language_clauses_are_read_each_in_its_language():
    contents = [d.content for d in extract_facts("我喜欢游泳, but I really hate running. 平时 I play chess with my dad.",
                                                 at=AT)]
    assert "User does not like running" in contents
    assert not any("I really" in c or " I " in c for c in contents), contents


def test_compound_statements_split_into_propositions():
    contents = [d.content for d in extract_facts("I live in Lisbon and I play the violin every day.", at=AT)]
    assert "User lives in Lisbon" in contents
    assert not any("Lisbon" in c and "violin" in c for c in contents), contents


def _fact(key, value, content, vec):
    fid = uuid7()
    return FactExtracted(fact_id=fid, source_turn=fid, channel="rule", key=key, value=value, content=content,
                         category="fact", importance=0.7, embedding=vec, embed_model="m")


def test_ontology_cardinality_in_the_memory_rules():
    assert ontology.supersedes("occupation") and ontology.supersedes("likes:tea") and ontology.supersedes("unknown")
    assert not ontology.same_value_same_memory("has:dog") and ontology.same_value_same_memory("location")
    rules = Rules()
    state = UserState()
    events = []
    for i, (value, content) in enumerate((("false", "User does not have a dog"), ("true", "User adopted a dog named Max"),
                                          ("true", "User has a dog named Rex"))):
        vec = np.zeros(8, dtype=np.float32)
        vec[i] = 1.0
        f = _fact("has:dog", value, content, vec.tolist())
        state, decisions = decide(state, f, rules, lambda tag, f=f: derived_id(f.fact_id, tag))
        events.append([d.data.TYPE for d in decisions])
    assert "memory.superseded" in events[1]                        # the dog supersedes "no dog"
    assert events[2][0] == "memory.created" and "memory.superseded" not in events[2]   # a second dog, kept
