"""The read path on the real stack: recall strategies and filters, profile, context, read-your-writes, isolation."""
from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from query.context import ContextRequest, build_context
from query.profile import profile
from query.recall import RecallRequest, recall, recalled_event, weights_from
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
    # a FOLLOWS neighbour (said right after the seed) inherits recall_graph_score_follows of its score
    assert abs(hits[1].score - models.settings.recall_graph_score_follows * hits[0].score) < 1e-4
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


# -- pure parts of the rerank --------------------------------------------------------------------


# -- the archive tier --------------------------------------------------------------------------

def _archive(settings, user, memory_id, status="archived"):
    from psycopg import sql as _sql

    from projections import pg
    with pg.connect(settings, autocommit=True) as conn:
        conn.execute(_sql.SQL("UPDATE {s}.memory_items SET status = %s WHERE user_id = %s AND memory_id = %s")
                     .format(s=pg.schema(settings)), (status, user, memory_id))


def test_recall_searches_the_archive_below_active_memories_and_names_the_archived(settings, keys, pipeline, models):
    user = seeded(settings, keys, [
        {"content": "User keeps the spare house key under the blue flowerpot", "key": "spare_key", "value": "blue flowerpot"},
        {"content": "User hides the garage key under the doormat", "key": "garage_key", "value": "doormat"},
        {"content": "User's favourite dish is mushroom risotto"},
    ])
    q = "Where is the user's spare key?"
    flat = replace(weights_from(settings), redundancy=0.0)   # scores without the diversity step
    before = {h.memory_id: h for h in recall(models, RecallRequest(user, q, k=3, expand=False), flat)}
    first, second = sorted(before.values(), key=lambda h: -h.score)[:2]
    assert first.content.startswith("User keeps the spare house key") and not first.archived
    # Forgetting archived the best match (a row kept with its embedding, status archived):
    _archive(settings, user, first.memory_id)
    hits = recall(models, RecallRequest(user, q, k=3, expand=False), flat)
    got = {h.memory_id: h for h in hits}
    assert first.memory_id in got, "archived memories are still recalled"
    arch = got[first.memory_id]
    assert arch.archived and arch.why["archived"] is True and arch.as_dict()["archived"] is True
    assert arch.score == pytest.approx(settings.recall_archived_penalty * first.score, abs=1e-5)
    assert not got[second.memory_id].archived and got[second.memory_id].score == pytest.approx(second.score, abs=1e-6)
    # rows of projections older than the archive say `expired`: the same tier
    _archive(settings, user, first.memory_id, "expired")
    again = {h.memory_id: h for h in recall(models, RecallRequest(user, q, k=3, expand=False), flat)}
    assert again[first.memory_id].archived
    # the active tier alone, on request
    assert first.memory_id not in {h.memory_id for h in recall(models, RecallRequest(user, q, k=3, archived=False))}
    # superseded (outdated) and retired (merged) memories are never recalled
    _archive(settings, user, first.memory_id, "outdated")
    assert first.memory_id not in {h.memory_id for h in recall(models, RecallRequest(user, q, k=3))}
    _archive(settings, user, first.memory_id, "archived")
    # the memory.recalled event names the archived hits so the processor can revive them
    hits = recall(models, RecallRequest(user, q, k=3))
    event = recalled_event(hits, "test")
    assert set(event.memory_ids) == {h.memory_id for h in hits}
    assert event.archived_ids == [first.memory_id]
    assert recalled_event([h for h in hits if not h.archived], "test").archived_ids == []


def test_an_archived_memory_ranks_below_an_equally_similar_active_one(settings, keys, pipeline, models):
    # Two memories equally similar to the query: the same text, told on two days (different keys,
    # so write-time dedup keeps both); archive either one and the active one comes first.
    text = "User's passport number ends in 7781"
    user = seeded(settings, keys, [{"content": text, "key": "passport_a", "value": "7781"},
                                   {"content": text, "key": "passport_b", "value": "7781"}])
    q = "What does the user's passport number end in?"
    w = replace(weights_from(settings), redundancy=0.0)
    both = recall(models, RecallRequest(user, q, k=2, expand=False), w)
    assert len(both) == 2 and both[0].score == pytest.approx(both[1].score, abs=1e-6)
    for victim in (both[0].memory_id, both[1].memory_id):
        _archive(settings, user, victim)
        hits = recall(models, RecallRequest(user, q, k=2, expand=False), w)
        assert [h.archived for h in hits] == [False, True] and hits[1].memory_id == victim
        _archive(settings, user, victim, "active")


def test_the_users_own_facts_rank_above_a_third_partys_unless_the_question_names_them(settings, client, pipeline, models):
    """#30 item 6, through extraction: "My friend Tom lives in Paris" is kept, but "Where does the
    user live?" is answered by the user's own city first; asked about Tom, Tom's city comes first."""
    from query.consistency import wait_until_applied
    user = unique_user("first")
    client.record_turn(user, "s", "user", "My friend Tom lives in Paris and works as a chef.")
    client.record_turn(user, "s", "user", "My sister is a nurse in Porto and she loves jazz.")
    pos = client.record_turn(user, "s", "user", "I live in Madrid.")
    wait_until_applied(models, pos.token(), ("pgvector-items",), timeout=60)
    mine = recall(models, RecallRequest(user, "Where does the user live?", k=3, expand=False))
    assert "Madrid" in mine[0].content, contents(mine)
    assert all(h.why.get("third_party") for h in mine[1:] if "User's" in h.content), [h.why for h in mine]
    toms = recall(models, RecallRequest(user, "Where does Tom live?", k=3, expand=False))
    assert "Paris" in toms[0].content and "third_party" not in toms[0].why, contents(toms)
    sisters = recall(models, RecallRequest(user, "What does my sister do for work?", k=3, expand=False))
    assert "nurse" in sisters[0].content, contents(sisters)
    # the factor 1 is the ranking without the rule: a third party's fact is then first for the user's city
    plain = recall(models, RecallRequest(user, "Where does the user live?", k=3, expand=False),
                   weights=replace(weights_from(settings), third_party=1.0))
    assert not any(h.why.get("third_party") for h in plain)


def test_a_keyed_memory_stating_another_value_than_its_slot_is_never_recalled_as_current(settings, keys, pipeline, models):
    """Law 8 on rows an older version left active (decided before the slot superseded): recall and
    profile serve the slot's current value only, whatever the memory's status says."""
    import psycopg
    from psycopg import sql as pgsql
    t0 = datetime.now(timezone.utc) - timedelta(days=2)
    user = seeded(settings, keys, [
        {"content": "User works as a software engineer", "category": "identity", "key": "occupation",
         "value": "software engineer", "importance": 0.8, "at": t0},
        {"content": "User works as a product manager", "category": "identity", "key": "occupation",
         "value": "product manager", "importance": 0.6, "at": t0 + timedelta(days=1)},
    ], prefix="legacy")
    old = next(m for m in memories(settings, user) if m["value"] == "software engineer")
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:   # as an older projection left it
        conn.execute(pgsql.SQL("UPDATE {}.memory_items SET status = 'active', superseded_by = NULL WHERE memory_id = %s")
                     .format(pgsql.Identifier(settings.namespace)), (old["memory_id"],))
    hits = recall(models, RecallRequest(user, "What does the user work as?", k=5, expand=False))
    assert [h.content for h in hits] == ["User works as a product manager"]
    assert [m["content"] for m in profile(models, user)["identity"]] == ["User works as a product manager"]
