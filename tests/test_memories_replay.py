"""Replay stays exact after every write issue 25 added (issue 25: "replay verify exact after a run
that used every new write"): through the HTTP API, an add kept as stated (with agent_id and
metadata), an inferred add, a batch of turns, an edit, a deleted memory, a second user's memories
all deleted, and a cleared session. Once every projector has applied every position those writes
answered, `replay verify` over every projector rebuilds each read model from the log in a shadow
and finds it equal to the live one."""
from __future__ import annotations

import time

import httpx
import pytest

from adapters.bus import Position
from projections.registry import PROJECTORS
from query.consistency import PROJECTOR_TOPICS, _stored, wait_until_applied
from query.store import ReadModels
from replay.verify import verify
from tests.auth_helpers import bearer
from tests.helpers import unique_user
from tests.test_api import api_url  # noqa: F401  (the API in a subprocess, module-scoped)

pytestmark = pytest.mark.timeout(600)
WAIT = {"wait_s": 60}


@pytest.fixture(scope="module")
def http(api_url, admin_key):  # noqa: F811
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=90) as c:
        yield c


def _ok(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    return resp.json()


def _memories(http, user: str, token: str, status: str = "active") -> list[dict]:
    return _ok(http.get(f"/v1/users/{user}/memories", params={"after": token, "status": status, **WAIT}),
               200)["memories"]


def caught_up(models: ReadModels, token: str, timeout: float = 120) -> None:
    """Every projector has applied `token`: those query/consistency.py knows wait as a read would
    (a turn's effects behind its watermark); the audit index, which indexes every topic's records
    and is waited for only on turn tokens there, reads the token's own position."""
    wait_until_applied(models, token, tuple(PROJECTOR_TOPICS), timeout=timeout)
    pos = Position.parse(token)
    deadline = time.monotonic() + timeout
    while _stored(models, "audit-index", pos.topic, pos.partition) <= pos.offset:
        assert time.monotonic() < deadline, f"audit-index has not applied {token}"
        time.sleep(0.2)


def test_replay_verify_is_exact_after_every_new_write(settings, http):
    alice, bob = unique_user("rv-alice"), unique_user("rv-bob")
    tokens: list[str] = []      # every position a write answered: each projector must pass them all

    def wrote(answer: dict) -> dict:
        tokens.extend(p["token"] for p in answer.get("positions", [answer]))
        return answer

    # 1. adds: kept as stated (scoped), and inferred from messages
    stated = wrote(_ok(http.post("/v1/memories", json={
        "user": alice, "content": "Prefers metric units", "infer": False, "agent_id": "travel-bot",
        "metadata": {"source": "settings", "priority": 2}}), 202))
    inferred = wrote(_ok(http.post("/v1/memories", json={"user": alice, "messages": [
        {"role": "user", "content": "I live in Porto."}, {"role": "assistant", "content": "Nice city!"}]}), 202))
    # 2. a batch of turns in two sessions
    batch = wrote(_ok(http.post("/v1/turns/batch", json={"turns": [
        {"user": alice, "session": "trip", "role": "user", "content": "I have a dog named Rex"},
        {"user": alice, "session": "trip", "role": "assistant", "content": "Rex is a good name."},
        {"user": alice, "session": "hobbies", "role": "user", "content": "I like kayaking", "agent_id": "a1"}]}), 201))
    mems = {m["content"]: m for m in _memories(http, alice, batch["positions"][-1]["token"])}
    assert {"Prefers metric units", "User lives in Porto", "User likes kayaking"} <= mems.keys(), mems.keys()
    assert any("Rex" in c for c in mems), mems.keys()      # learnt in the session cleared below
    assert _memories(http, alice, inferred["token"]) and stated["token"]
    # 3. an edit (a new version) and a deleted memory
    edited = wrote(_ok(http.patch(f"/v1/users/{alice}/memories/{mems['Prefers metric units']['memory_id']}",
                                  json={"content": "Prefers imperial units", "metadata": None}), 202))
    wrote(_ok(http.delete(f"/v1/users/{alice}/memories/{mems['User lives in Porto']['memory_id']}"), 202))
    # 4. all of a second user's memories
    bobs = wrote(_ok(http.post("/v1/memories", json={"user": bob, "messages": [
        {"role": "user", "content": "Likes green tea"}, {"role": "user", "content": "Works in Oslo"}],
        "infer": False}), 202))
    assert len(_memories(http, bob, bobs["token"])) == 2
    wrote(_ok(http.delete(f"/v1/users/{bob}/memories"), 202))
    # 5. a cleared session: its window and the memories learned in it
    cleared = wrote(_ok(http.delete(f"/v1/users/{alice}/sessions/trip", params={"reason": "user asked"}), 202))

    models = ReadModels(settings)
    try:
        assert set(PROJECTORS) == {*PROJECTOR_TOPICS, "audit-index"}     # no projector left unwaited for
        for token in tokens:
            caught_up(models, token)
    finally:
        models.close()

    # what the live read models hold now, as the writes said
    left = {m["content"] for m in _memories(http, alice, cleared["token"], "all")}
    assert "User lives in Porto" not in left and "Prefers imperial units" in left, left
    assert not any("Rex" in c for c in left) and "User likes kayaking" in left, left
    assert edited["memory_id"] in {m["memory_id"] for m in _memories(http, alice, cleared["token"])}
    assert _memories(http, bob, cleared["token"], "all") == []
    trip = _ok(http.get(f"/v1/users/{alice}/sessions/trip", params={"after": cleared["token"], **WAIT}), 200)
    assert trip["messages"] == []
    hobbies = _ok(http.get(f"/v1/users/{alice}/sessions/hobbies"), 200)
    assert [m["content"] for m in hobbies["messages"]] == ["I like kayaking"]

    report = verify(settings, "all", progress=False)
    assert report.ok, [c.as_dict() for c in report.checks if not c.equal]   # the differing ones, with their rows
    assert {c.name for c in report.checks} == set(PROJECTORS)
