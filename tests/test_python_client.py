"""memstream_client (clients/python), sync and async, against the real API (uvicorn in a subprocess):
the Mem0-like verbs end to end — add with scope and metadata, batches, lists with filters, get,
history, update, delete, search with filters, context — typed answers, a 422 naming its field, and
a user-bound key that cannot reach another user's memory."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from memstream_client import (AccessDenied, AsyncMemstreamClient, InvalidInput, Memory, MemstreamClient, NotFound,
                              Position, Turn)
from tests.auth_helpers import make_key
from tests.helpers import unique_user, wait_for
from tests.test_api import api_url  # noqa: F401  (the API in a subprocess, module-scoped)

WAIT = 60     # seconds a read may wait for `after` (the fixture's server allows 120)


@pytest.fixture
def mem(api_url, admin_key):  # noqa: F811
    with MemstreamClient(api_url, api_key=admin_key, timeout=30) as client:
        yield client


def contents(page) -> list[str]:
    return [m.content for m in page.memories]


def test_the_agent_scenario_sync(mem):
    user = unique_user("pyc")
    # add, kept as stated, with its scope and metadata
    added = mem.add("Prefers aisle seats", user=user, infer=False, agent_id="travel-bot", run_id="r1",
                    importance=0.7, metadata={"source": "settings", "priority": 2})
    assert isinstance(added, Position) and added.positions[-1].token == added.token
    # a batch of turns, in order (one a Turn model, one a plain dict)
    turns = mem.add_turns([Turn(user=user, session="s1", role="user", content="I live in Porto", agent_id="chat-bot"),
                           {"user": user, "session": "s1", "role": "assistant", "content": "Porto is lovely!"}])
    assert len(turns) == 2 and (turns[0].partition, turns[0].offset) < (turns[1].partition, turns[1].offset)

    page = mem.get_all(user, agent_id="travel-bot", after=added, wait_s=WAIT)
    [seat] = page.memories
    assert isinstance(seat, Memory) and page.next_cursor is None
    assert (seat.content, seat.agent_id, seat.run_id, seat.metadata, seat.importance) == (
        "Prefers aisle seats", "travel-bot", "r1", {"source": "settings", "priority": 2}, 0.7)
    porto = wait_for(lambda: next((m for m in mem.get_all(user, after=turns[0], wait_s=WAIT).memories
                                   if "Porto" in m.content), None), timeout=90, what="the batch's memory")
    assert porto.agent_id == "chat-bot"
    # filters: the agent, metadata comparisons (POST /v1/memories/search), both ANDed
    assert contents(mem.get_all(user, agent_id="other-bot")) == []
    assert contents(mem.get_all(user, filters={"metadata": {"priority": {"gte": 2}}})) == ["Prefers aisle seats"]
    assert contents(mem.get_all(user, filters={"metadata": {"priority": {"gt": 2}}})) == []
    assert contents(mem.get_all(user, agent_id="chat-bot", filters={"or": [{"run_id": "r1"}, {"agent_id": "chat-bot"}]})) \
        == [porto.content]
    assert {m.memory_id for m in mem.iter_all(user, limit=1)} == {seat.memory_id, porto.memory_id}

    got = mem.get(user, seat.memory_id)
    assert (got.memory_id, got.content, got.metadata, got.created_at) == (seat.memory_id, seat.content, seat.metadata,
                                                                      seat.created_at)
    history = mem.history(user, seat.memory_id, wait_s=WAIT)
    assert history.memory_id == seat.memory_id and history.versions[0]["type"] == "memory.created"
    assert history.versions[0]["caused_by"]["type"] == "fact.extracted"

    # search with filters: the category narrows what comes back
    hits = mem.search(user, "where does the user live?", k=3, categories=[porto.category])
    assert hits and hits[0].content == porto.content and {h.category for h in hits} == {porto.category}
    assert "similarity" in hits[0].why and hits[0].created_at.tzinfo is not None
    if "filters" in mem.request("GET", "/openapi.json")["components"]["schemas"]["RecallIn"]["properties"]:
        scoped = mem.search(user, "what does the user prefer?", k=5, filters={"agent_id": "travel-bot"})
        assert [h.memory_id for h in scoped] == [seat.memory_id]            # Mem0-style filters on recall
        assert mem.search(user, "what does the user prefer?", filters={"metadata": {"priority": {"gt": 2}}}) == []
    ctx = mem.context(user, "plan a weekend trip", session="s1", budget=400)
    assert "Porto" in ctx.text and ctx.slots["total"]["budget"] == 400
    assert [m.content for m in mem.session(user, "s1").messages] == ["I live in Porto", "Porto is lovely!"]

    # delete one, then all
    forgotten = mem.delete(user, seat.memory_id, reason="user asked")
    assert seat.memory_id in forgotten.memory_ids
    wait_for(lambda: contents(mem.get_all(user)) == [porto.content], timeout=60, what="the deleted memory to go")
    gone = mem.delete_all(user)
    assert mem.get_all(user, after=gone, wait_s=WAIT).memories == []


def test_update_a_memory(mem, api_url):  # noqa: F811
    spec = httpx.get(api_url + "/openapi.json").json()
    if "patch" not in spec["paths"].get("/v1/users/{user}/memories/{memory_id}", {}):
        pytest.skip("PATCH /v1/users/{user}/memories/{memory_id} is not in /openapi.json yet (being added "
                    "by another change); remove this skip when it lands")
    user = unique_user("pycupd")
    added = mem.add("Prefers aisle seats", user=user, infer=False, metadata={"source": "settings"})
    [seat] = mem.get_all(user, after=added, wait_s=WAIT).memories
    updated = mem.update(user, seat.memory_id, content="Prefers window seats", importance=0.9,
                         metadata={"source": "chat"})
    assert updated.memory_id and updated.token
    now = wait_for(lambda: (lambda ms: ms if contents_of(ms) == ["Prefers window seats"] else None)(
        mem.get_all(user, after=updated, wait_s=WAIT).memories), timeout=60, what="the updated memory")
    assert (now[0].memory_id, now[0].importance, now[0].metadata) == (updated.memory_id, 0.9, {"source": "chat"})
    wait_for(lambda: mem.get(user, seat.memory_id).status == "outdated", timeout=60, what="the old version outdated")
    assert len(mem.history(user, seat.memory_id).versions) >= 2
    cleared = mem.update(user, updated.memory_id, metadata=None)          # None clears; left out keeps
    last = wait_for(lambda: (lambda ms: ms if [m.memory_id for m in ms] == [cleared.memory_id] else None)(
        mem.get_all(user, after=cleared, wait_s=WAIT).memories), timeout=60, what="the second edit")
    assert (last[0].content, last[0].importance, last[0].metadata in (None, {})) == ("Prefers window seats", 0.9, True)


def contents_of(memories) -> list[str]:
    return [m.content for m in memories]


def test_the_agent_scenario_async(api_url, admin_key):  # noqa: F811
    async def go():
        user = unique_user("apyc")
        async with AsyncMemstreamClient(api_url, api_key=admin_key) as mem:
            added = await mem.add([{"role": "user", "content": "I live in Porto."},
                                   {"role": "assistant", "content": "Nice city!"}], user=user, run_id="onboarding")
            assert len(added.positions) == 2
            page = await mem.get_all(user, run_id="onboarding", after=added, wait_s=WAIT)
            assert contents(page) == ["User lives in Porto"] and page.memories[0].run_id == "onboarding"
            batch = await mem.add_turns([{"user": user, "session": "s", "role": "user", "content": "My name is Kari"}])
            await mem.get_all(user, after=batch[0], wait_s=WAIT)
            every = [m async for m in mem.iter_all(user, limit=1)]
            filtered = await mem.get_all(user, filters={"run_id": {"in": ["onboarding"]}})
            hits = await mem.search(user, "where does the user live?", k=3)
            ctx = await mem.context(user, "what is my name and where do I live?", budget=300)
            porto = page.memories[0]
            history = await mem.history(user, porto.memory_id)
            await mem.delete(user, porto.memory_id)
            profile = await mem.profile(user)
            return every, filtered, hits, ctx, history, profile, porto
    every, filtered, hits, ctx, history, profile, porto = asyncio.run(go())
    assert porto.memory_id in {m.memory_id for m in every} and len(every) >= 2
    assert contents(filtered) == ["User lives in Porto"]
    assert hits[0].content == "User lives in Porto"
    assert "Porto" in ctx.text and "Kari" in ctx.text
    assert history.versions[0]["type"] == "memory.created"
    assert any(m.content == "User's name is Kari" or "Kari" in m.content for m in profile.identity)


def test_a_422_names_the_field_and_a_bound_key_cannot_reach_another_user(mem, settings, api_url):  # noqa: F811
    user, other = unique_user("pycb"), unique_user("pycb")
    with pytest.raises(InvalidInput) as bad:
        mem.search(user, "tea", k=0)
    assert bad.value.status == 422 and any(p.startswith("k:") for p in bad.value.problems), bad.value.problems
    with pytest.raises(InvalidInput) as bad:
        mem.add("Likes tea", user=user, metadata={"k": [1, 2]})          # type: ignore[dict-item]
    assert any(p.startswith("metadata") for p in bad.value.problems), bad.value.problems

    mine = mem.add("Keeps bees", user=user, infer=False)
    theirs = mem.add("Owns a red van", user=other, infer=False)
    [m_mine] = mem.get_all(user, after=mine, wait_s=WAIT).memories
    [m_theirs] = mem.get_all(other, after=theirs, wait_s=WAIT).memories
    key = make_key(settings, scopes=("memory:read", "memory:write"), user=user, name="tests-pyclient-bound")
    with MemstreamClient(api_url, api_key=key) as bound:
        assert bound.get(user, m_mine.memory_id).content == "Keeps bees"
        with pytest.raises(NotFound):
            bound.get(user, m_theirs.memory_id)           # another user's memory: as if it did not exist
        with pytest.raises((NotFound, AccessDenied)):
            bound.get(other, m_theirs.memory_id)
        with pytest.raises(NotFound):
            bound.history(user, m_theirs.memory_id)
    with MemstreamClient(api_url, api_key="msk_not_a_key") as stranger, pytest.raises(AccessDenied) as denied:
        stranger.get_all(user)
    assert denied.value.status == 401
