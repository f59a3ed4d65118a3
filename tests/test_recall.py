"""The read path on the real stack: recall strategies and filters, profile, context, read-your-writes, isolation."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from query.context import ContextRequest, build_context
from query.profile import profile
from query.recall import RecallRequest, recall
from query.store import ReadModels
from projections.queries import memories
from tests.facts_helpers import publish_facts
from tests.helpers import unique_user, wait_for


@pytest.fixture(scope="module")
def models(settings):
    m = ReadModels(settings)
    yield m
    m.close()


def seeded(settings, keys, facts, prefix="r"):
    user = unique_user(prefix)
    publish_facts(settings, keys, user, facts)
    wait_for(lambda: len(memories(settings, user)) == len(facts), what=f"{len(facts)} memories")
    return user


def contents(hits):
    return [h.content for h in hits]


def test_vector_recall_ranks_the_relevant_memory_first_and_says_why(settings, keys, pipeline, models):
    user = seeded(settings, keys, [
        {"content": "User lives in Lisbon, Portugal", "category": "identity", "importance": 0.8},
        {"content": "User plays the cello in an orchestra", "importance": 0.5},
        {"content": "User is allergic to peanuts", "category": "policy", "importance": 0.9},
    ])
    hits = recall(models, RecallRequest(user, "Which city does the user live in?", k=3, expand=False))
    assert hits[0].content == "User lives in Lisbon, Portugal"
    assert set(hits[0].why) >= {"similarity", "importance"} and hits[0].why["similarity"] > 0.8
    zh = recall(models, RecallRequest(user, "用户住在哪里？", k=1, expand=False))
    assert contents(zh) == ["User lives in Lisbon, Portugal"]


def test_filters_categories_tags_age_and_min_score(settings, keys, pipeline, models):
    old = datetime.now(timezone.utc) - timedelta(hours=72)
    user = seeded(settings, keys, [
        {"content": "User prefers window seats on flights", "category": "preference", "tags": ["travel", "flights"]},
        {"content": "User flew to Tokyo for a conference", "category": "episodic", "tags": ["travel"], "at": old},
        {"content": "User's flight to Oslo was cancelled", "category": "episodic", "tags": ["travel", "flights"]},
    ])
    q = "flights"
    assert {h.category for h in recall(models, RecallRequest(user, q, categories=["preference"]))} == {"preference"}
    assert sorted(contents(recall(models, RecallRequest(user, q, tags=["travel", "flights"])))) == [
        "User prefers window seats on flights", "User's flight to Oslo was cancelled"]
    recent = contents(recall(models, RecallRequest(user, q, max_age_hours=24)))
    assert "User flew to Tokyo for a conference" not in recent and len(recent) == 2
    all_hits = recall(models, RecallRequest(user, q))
    cut = sorted(h.score for h in all_hits)[1]
    assert all(h.score >= cut for h in recall(models, RecallRequest(user, q, min_score=cut)))
    assert len(recall(models, RecallRequest(user, q, min_score=cut))) == 2


def test_keyword_path_finds_names_and_numbers(settings, keys, pipeline, models):
    user = seeded(settings, keys, [
        {"content": "User's project codename is ZX-81 Falcon", "importance": 0.3},
        {"content": "User enjoys long walks on the beach", "importance": 0.9},
        {"content": "User's locker number is 4471", "importance": 0.3},
    ])
    hits = recall(models, RecallRequest(user, "4471", k=1, expand=False))
    assert contents(hits) == ["User's locker number is 4471"] and hits[0].why["keyword"] == 1.0
    hits = recall(models, RecallRequest(user, "status of ZX-81?", k=1, expand=False))
    assert contents(hits) == ["User's project codename is ZX-81 Falcon"]


def test_graph_expansion_brings_a_linked_neighbour_and_names_its_seed(settings, keys, pipeline, models):
    user = seeded(settings, keys, [
        {"content": "User adopted a beagle named Rex", "importance": 0.9},
        {"content": "User bought a red bicycle", "importance": 0.05},   # FOLLOWS from the beagle
    ])
    seed_id = [m["memory_id"] for m in memories(settings, user) if "beagle" in m["content"]][0]
    wait_for(lambda: recall(models, RecallRequest(user, "What is the name of the user's dog?", k=2))[-1]
             .why.get("expanded_from") == seed_id, what="expanded neighbour")
    hits = recall(models, RecallRequest(user, "What is the name of the user's dog?", k=2))
    assert contents(hits) == ["User adopted a beagle named Rex", "User bought a red bicycle"]
    assert abs(hits[1].score - 0.45 * hits[0].score) < 1e-4
    flat = recall(models, RecallRequest(user, "What is the name of the user's dog?", k=2, expand=False))
    assert "expanded_from" not in flat[1].why


def test_profile_enumerates_categories_whatever_the_query(settings, client, pipeline, models):
    user = unique_user("prof")
    client.record_turn(user, "s", "user", "My name is Ingrid and I live in Bergen. I like knitting.")
    wait_for(lambda: len(profile(models, user)["preferences"]) == 3, what="3 preferences")
    p = profile(models, user)
    assert [m["content"] for m in p["identity"]] == ["User's name is Ingrid", "User lives in Bergen"]
    assert p["preferences"]["name"]["value"] == "Ingrid"


def test_read_your_writes_answers_at_once(settings, client, pipeline, models):
    from query.consistency import wait_until_applied
    user = unique_user("ryw")
    pos = client.record_turn(user, "s", "user", "我叫张三")
    wait_until_applied(models, pos.token(), ("pgvector-items", "kv-preferences", "neo4j-graph"), timeout=20)
    assert profile(models, user)["preferences"]["name"]["value"] == "张三"
    assert contents(recall(models, RecallRequest(user, "我叫什么", k=1))) == ["用户叫张三"]
    # a turn with nothing to extract still settles (its watermark passes through)
    pos = client.record_turn(user, "s", "user", "今天天气不错")
    wait_until_applied(models, pos.token(), ("pgvector-items",), timeout=20)


def test_one_users_memories_never_appear_for_another(settings, keys, pipeline, models):
    facts = [{"content": "User's secret recipe uses saffron"}, {"content": "User's bank is Nordbank"}]
    a = seeded(settings, keys, facts, "iso-a")
    b = seeded(settings, keys, [{"content": "User's favourite spice is saffron"}], "iso-b")
    for query in ("saffron", "bank", "recipe"):
        ids_b = {h.memory_id for h in recall(models, RecallRequest(b, query, k=50))}
        ids_a = {m["memory_id"] for m in memories(settings, a)}
        assert ids_b and not ids_b & ids_a


def test_context_fills_slots_within_budget_and_never_drops_constraints(settings, client, keys, pipeline, models):
    user = unique_user("ctx")
    client.record_turn(user, "chat", "user", "I'm allergic to peanuts. My name is Omar.")
    client.start_task(user, "trip", session="chat", goal="plan a trip")
    for i in range(6):
        client.record_step(user, "trip", f"searched flights, attempt {i}", status="failed" if i == 5 else "ok")
    publish_facts(settings, keys, user, [{"content": f"User visited city number {i} last year"} for i in range(12)])
    wait_for(lambda: len(memories(settings, user)) >= 14, what="memories")
    wait_for(lambda: len(__import__("projections.queries", fromlist=["x"]).task_steps(settings, user, "trip")) == 6,
             what="steps")
    roomy = asyncio.run(build_context(models, ContextRequest(user, "plan my trip", session="chat", task="trip", budget=2000)))
    assert "allergic to peanuts" in roomy["text"] and "Omar" in roomy["text"]
    assert roomy["slots"]["task"]["kept"] == 6 and roomy["slots"]["tool_state"]["kept"] >= 1
    assert roomy["slots"]["recent"]["kept"] == 1 and roomy["slots"]["recall"]["kept"] >= 1
    tight = asyncio.run(build_context(models, ContextRequest(user, "plan my trip", session="chat", task="trip", budget=60)))
    assert "allergic to peanuts" in tight["text"], "constraints are never dropped"
    assert tight["slots"]["constraints"]["cut"] == 0
    assert sum(s["cut"] for name, s in tight["slots"].items() if name != "total") > 0
    assert tight["slots"]["recall"]["kept"] < roomy["slots"]["recall"]["kept"]
