"""Memories as a resource over HTTP (issue 25), on the real stack: add (as stated, or inferred from
messages), batches of turns, list with filters and cursors, get, history, delete one, delete all,
each within the key's reach."""
from __future__ import annotations

import httpx
import pytest

from tests.auth_helpers import bearer, make_key
from tests.helpers import unique_user, wait_for
from tests.test_api import api_url  # noqa: F401  (the API in a subprocess, module-scoped)

WAIT = {"wait_s": 60}


@pytest.fixture(scope="module")
def http(api_url, admin_key):  # noqa: F811
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=90) as c:
        yield c


def listed(http, user: str, **params) -> dict:
    r = http.get(f"/v1/users/{user}/memories", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_stated_memory_keeps_its_scope_and_is_listed_got_filtered_and_has_a_history(http):
    user = unique_user("res")
    r = http.post("/v1/memories", json={"user": user, "content": "Prefers metric units", "infer": False,
                                        "agent_id": "travel-bot", "run_id": "r1", "importance": 0.7,
                                        "metadata": {"source": "settings", "priority": 2}})
    assert r.status_code == 202, r.text
    token = r.json()["token"]
    page = listed(http, user, after=token, **WAIT)
    [m] = page["memories"]
    assert (m["content"], m["agent_id"], m["run_id"], m["metadata"]) == (
        "Prefers metric units", "travel-bot", "r1", {"source": "settings", "priority": 2})
    assert m["importance"] == 0.7 and page["next_cursor"] is None    # rounded: no float32 noise
    # filters: agent, metadata comparison, and one that matches nothing
    assert [x["memory_id"] for x in listed(http, user, agent_id="travel-bot")["memories"]] == [m["memory_id"]]
    assert listed(http, user, agent_id="other-bot")["memories"] == []
    for f, n in (({"metadata": {"priority": {"gte": 2}}}, 1), ({"metadata": {"priority": {"gt": 2}}}, 0),
                 ({"or": [{"run_id": "r9"}, {"metadata": {"source": "settings"}}]}, 1)):
        r = http.post("/v1/memories/search", json={"user": user, "filters": f})
        assert r.status_code == 200 and len(r.json()["memories"]) == n, (f, r.text)
    one = http.get(f"/v1/users/{user}/memories/{m['memory_id']}")
    assert one.status_code == 200 and one.json()["content"] == "Prefers metric units"
    hist = http.get(f"/v1/users/{user}/memories/{m['memory_id']}/history", params=WAIT)
    assert hist.status_code == 200, hist.text
    versions = hist.json()["versions"]
    assert versions[0]["type"] == "memory.created" and versions[0]["content"] == "Prefers metric units"
    assert versions[0]["caused_by"]["type"] == "fact.extracted"


def test_an_inferred_add_extracts_and_a_restated_memory_is_deduplicated(http):
    user = unique_user("res")
    r = http.post("/v1/memories", json={"user": user, "messages": [
        {"role": "user", "content": "I live in Porto."}, {"role": "assistant", "content": "Nice city!"}],
        "run_id": "onboarding"})
    assert r.status_code == 202 and len(r.json()["positions"]) == 2, r.text
    mems = listed(http, user, after=r.json()["token"], **WAIT)["memories"]
    assert [m["content"] for m in mems] == ["User lives in Porto"] and mems[0]["run_id"] == "onboarding"
    # the same memory stated again is decided like any fact: no second active memory
    r = http.post("/v1/memories", json={"user": user, "content": "User lives in Porto", "infer": False})
    again = listed(http, user, after=r.json()["token"], **WAIT)["memories"]
    assert [m["content"] for m in again] == ["User lives in Porto"]


def test_a_batch_is_checked_whole_then_published_in_order(http):
    user = unique_user("batch")
    bad = http.post("/v1/turns/batch", json={"turns": [
        {"user": user, "session": "s", "role": "user", "content": "I live in Oslo"},
        {"user": user, "session": "s", "role": "user", "content": "x", "metadata": {"k": [1, 2]}}]})
    assert bad.status_code == 422 and "turns.1" in bad.text, bad.text
    ok = http.post("/v1/turns/batch", json={"turns": [
        {"user": user, "session": "s", "role": "user", "content": f"I have a dog named Rex{i}", "agent_id": "a1"}
        for i in range(3)] + [{"user": user, "session": "s", "role": "user", "content": "My name is Kari"}]})
    assert ok.status_code == 201, ok.text
    offsets = [(p["partition"], p["offset"]) for p in ok.json()["positions"]]
    assert len(offsets) == 4 and len({p for p, _ in offsets}) == 1 and offsets == sorted(offsets)
    page = listed(http, user, after=ok.json()["positions"][-1]["token"], **WAIT)
    assert not [m for m in page["memories"] if "Oslo" in m["content"]]       # the refused batch left nothing
    session = http.get(f"/v1/users/{user}/sessions/s", params=WAIT)
    assert [m["content"] for m in session.json()["messages"]][:4] == [
        "I have a dog named Rex0", "I have a dog named Rex1", "I have a dog named Rex2", "My name is Kari"]


def test_cursor_pages_through_every_memory_once(http):
    user = unique_user("page")
    r = http.post("/v1/memories", json={"user": user, "infer": False, "messages": [
        {"content": t} for t in ("Likes green tea", "Owns a blue bicycle", "Plays chess on Sundays",
                                 "Is learning Norwegian", "Works night shifts")]})
    wait_for(lambda: len(listed(http, user, after=r.json()["token"], **WAIT)["memories"]) == 5, timeout=60,
             what="five stated memories")
    seen, cursor = [], None
    while True:
        page = listed(http, user, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [m["memory_id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 5 == len(set(seen))
    bad = http.get(f"/v1/users/{user}/memories", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422 and "cursor" in bad.text


def test_delete_one_then_all_within_a_user_bound_write_key(settings, http, api_url):  # noqa: F811
    user, other = unique_user("del"), unique_user("del")
    r = http.post("/v1/memories", json={"user": user, "infer": False, "messages": [
        {"content": "Is allergic to cats"}, {"content": "Drives a red van"}]})
    http.post("/v1/memories", json={"user": other, "infer": False, "content": "Keeps bees"})
    mems = wait_for(lambda: (lambda ms: ms if len(ms) == 2 else None)(
        listed(http, user, after=r.json()["token"], **WAIT)["memories"]), timeout=60, what="two memories")
    key = make_key(settings, scopes=("memory:read", "memory:write"), user=user, name="tests-bound")
    with httpx.Client(base_url=api_url, headers=bearer(key), timeout=90) as bound:
        # another user's memory is outside the key's reach: as if it did not exist
        theirs = wait_for(lambda: listed(http, other, **WAIT)["memories"], timeout=60, what="the other's memory")
        assert bound.get(f"/v1/users/{other}/memories").status_code in (403, 404)
        assert bound.get(f"/v1/users/{user}/memories/{theirs[0]['memory_id']}").status_code == 404
        assert bound.delete(f"/v1/users/{user}/memories/{theirs[0]['memory_id']}").status_code in (404, 202)
        d = bound.delete(f"/v1/users/{user}/memories/{mems[0]['memory_id']}", params={"reason": "user asked"})
        assert d.status_code == 202, d.text
        wait_for(lambda: [m["content"] for m in listed(bound, user)["memories"]] == [mems[1]["content"]],
                 timeout=60, what="the deleted memory to leave the list")
        gone = bound.delete(f"/v1/users/{user}/memories")
        assert gone.status_code == 202, gone.text
        assert listed(bound, user, after=gone.json()["token"], **WAIT)["memories"] == []
    assert [m["content"] for m in listed(http, other)["memories"]] == ["Keeps bees"]   # untouched


def test_an_edit_is_a_new_version_with_history_and_only_an_active_memory_of_ones_own_can_be_edited(http):
    user, other = unique_user("edit"), unique_user("edit")
    r = http.post("/v1/memories", json={"user": user, "content": "Prefers aisle seats", "infer": False,
                                        "agent_id": "travel-bot", "importance": 0.7, "metadata": {"source": "chat"}})
    [old] = listed(http, user, after=r.json()["token"], **WAIT)["memories"]
    # content and metadata change; category, importance and scope stay the memory's own
    e = http.patch(f"/v1/users/{user}/memories/{old['memory_id']}",
                   json={"content": "Prefers window seats", "metadata": {"source": "settings", "v": 2}})
    assert e.status_code == 202, e.text
    new_id, token = e.json()["memory_id"], e.json()["token"]
    assert new_id != old["memory_id"] and token.count(":") == 2
    [new] = wait_for(lambda: (lambda ms: ms if ms and ms[0]["memory_id"] == new_id else None)(
        listed(http, user, after=token, **WAIT)["memories"]), timeout=60, what="the new version listed")
    assert (new["content"], new["metadata"], new["agent_id"], new["category"], new["importance"]) == (
        "Prefers window seats", {"source": "settings", "v": 2}, "travel-bot", old["category"], 0.7)
    was = http.get(f"/v1/users/{user}/memories/{old['memory_id']}").json()
    assert (was["status"], was["superseded_by"], was["content"]) == ("outdated", new_id, "Prefers aisle seats")
    # both histories show the two versions: the old one's creation and its supersession by the new one
    h_old = http.get(f"/v1/users/{user}/memories/{old['memory_id']}/history", params={"after": token, **WAIT}).json()
    assert [v["type"] for v in h_old["versions"]][:1] == ["memory.created"]
    assert h_old["versions"][0]["content"] == "Prefers aisle seats" and h_old["status"] == "outdated"
    [sup] = [v for v in h_old["versions"] if v["type"] == "memory.superseded"]
    assert (sup["superseded_by"], sup["reason"]) == (new_id, "edited")
    h_new = wait_for(lambda: (lambda h: h if h.status_code == 200 else None)(
        http.get(f"/v1/users/{user}/memories/{new_id}/history", params={"after": token, **WAIT})),
        timeout=60, what="the new version's history").json()
    assert h_new["versions"][0]["type"] == "memory.created" and h_new["versions"][0]["content"] == "Prefers window seats"
    assert any(v["type"] == "memory.superseded" and v.get("reason") == "edited" for v in h_new["versions"])
    assert old["memory_id"] in h_new["parents"] and h_new["origin"]
    # the outdated version cannot be edited: its active version can
    stale = http.patch(f"/v1/users/{user}/memories/{old['memory_id']}", json={"importance": 0.9})
    assert stale.status_code == 409 and "outdated" in stale.json()["error"], stale.text
    # another user's memory is as if it did not exist; an empty, unknown-field or null-only body is a 422
    r = http.post("/v1/memories", json={"user": other, "content": "Keeps bees", "infer": False})
    [theirs] = listed(http, other, after=r.json()["token"], **WAIT)["memories"]
    nope = http.patch(f"/v1/users/{user}/memories/{theirs['memory_id']}", json={"content": "Keeps wasps"})
    assert (nope.status_code, nope.json()) == (404, {"error": "not found"})
    for body in ({}, {"colour": "red"}, {"content": None}, {"importance": 2}):
        bad = http.patch(f"/v1/users/{user}/memories/{new_id}", json=body)
        assert bad.status_code == 422, (body, bad.text)
    assert [m["content"] for m in listed(http, other)["memories"]] == ["Keeps bees"]     # untouched
