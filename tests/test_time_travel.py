"""Time travel on the real pipeline: publish at t1, change at t2, ask as of a time in between."""
from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta

import orjson
import psycopg
import pytest

from adapters.erasure import erase_user
from memstream.app.workers import worker_command
from projections.queries import audit_events, preferences
from projections import queries
from query.recall import RecallRequest, recall
from query.store import ReadModels
from replay.timetravel import memories_as_of, preferences_as_of, profile_as_of, recall_as_of
from tests.helpers import unique_user, wait_for

T1 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
T2 = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)
BETWEEN = T1 + timedelta(days=2)


def location(rows: list[dict]) -> str | None:
    return next((p["value"] for p in rows if p["key"] == "location"), None)


@pytest.fixture(scope="module")
def moved(settings, client, pipeline):
    """A user who lived in Paris (t1), then moved to Berlin (t2)."""
    user = unique_user("tt")
    client.record_turn(user, "s1", "user", "I live in Paris", at=T1)
    client.record_turn(user, "s1", "user", "I live in Berlin", at=T2)
    wait_for(lambda: location(preferences(settings, user)) == "Berlin", what="live preference Berlin")
    wait_for(lambda: sum(r["type"] == "preference.set" for r in audit_events(settings, user)) == 2,
             what="both preference versions in the audit index")
    return user


def shadows_left(settings) -> list[str]:
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                                           (settings.namespace + "\\_\\_asof\\_%",))]


def test_preferences_and_profile_as_of(settings, moved):
    assert location(preferences_as_of(settings, moved, T1 - timedelta(seconds=1))) is None, "nothing before t1"
    then = preferences_as_of(settings, moved, BETWEEN)
    assert [(p["key"], p["value"], p["version"]) for p in then] == [("location", "Paris", 1)]
    assert location(preferences_as_of(settings, moved, T2)) == "Berlin", "inclusive of the moment itself"
    assert location(preferences(settings, moved)) == "Berlin", "the live read model is untouched"

    profile = profile_as_of(settings, moved, BETWEEN)
    assert [m["content"] for m in profile["identity"]] == ["User lives in Paris"]
    assert profile["preferences"]["location"] == {"value": "Paris", "version": 1}
    now = profile_as_of(settings, moved, T2 + timedelta(days=1))
    assert [m["content"] for m in now["identity"]] == ["User lives in Berlin"], "Paris was superseded by then"
    mems = memories_as_of(settings, moved, T2)
    assert {m["content"]: m["status"] for m in mems} == {"User lives in Paris": "outdated", "User lives in Berlin": "active"}
    assert shadows_left(settings) == []


def test_preferences_as_of_from_history_equal_the_replayed_ones(settings, moved):
    """The services read preferences as of a time from the history table (no replay): at every
    boundary it answers what a replay of the log up to then answers."""
    for at in (T1 - timedelta(seconds=1), T1, BETWEEN, T2 - timedelta(microseconds=1), T2, T2 + timedelta(days=1)):
        fast = queries.preferences_as_of(settings, moved, at)
        assert fast == preferences_as_of(settings, moved, at), at
    assert [(p["key"], p["value"], p["version"]) for p in queries.preferences_as_of(settings, moved, BETWEEN)] == [
        ("location", "Paris", 1)]


def test_recall_as_of_answers_from_the_past_and_publishes_nothing(settings, moved):
    models = ReadModels(settings, pool_size=2)
    try:
        req = RecallRequest(moved, "where do I live?", k=3)
        then = recall_as_of(models, req, BETWEEN)
        assert [h.content for h in then] == ["User lives in Paris"]
        assert recall_as_of(models, req, T1 - timedelta(hours=1)) == []
        live = recall(models, req)
        assert live[0].content == "User lives in Berlin" and "User lives in Paris" not in [h.content for h in live]
    finally:
        models.close()
    assert not [r for r in audit_events(settings, moved) if r["type"] == "memory.recalled"], \
        "an as-of recall is not a use of the memories"


def test_as_of_on_the_command_line(settings, moved):
    env = {**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace}
    base = worker_command("x")[:3]
    done = subprocess.run(base + ["prefs", "--user", moved, "--as-of", BETWEEN.isoformat(), "--json"],
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert location(orjson.loads(done.stdout)) == "Paris"
    done = subprocess.run(base + ["recall", "--user", moved, "--query", "where do I live", "--as-of", BETWEEN.isoformat(),
                                  "--json"], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)[0]["content"] == "User lives in Paris"
    done = subprocess.run(base + ["profile", "--user", moved, "--as-of", "2026-03-02T00:00:00"], env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 2 and b"timezone" in done.stderr


def test_as_of_over_http(settings, moved, admin_key):
    from fastapi.testclient import TestClient

    from memstream.app.api import create_app
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {admin_key}"}) as http:
        r = http.post("/v1/recall", json={"user": moved, "query": "where do I live?", "k": 3, "as_of": BETWEEN.isoformat()})
        assert r.status_code == 200, r.text
        assert [h["content"] for h in r.json()] == ["User lives in Paris"]
        r = http.get(f"/v1/users/{moved}/preferences", params={"as_of": BETWEEN.isoformat()})
        assert r.json()["location"] == {"value": "Paris", "version": 1}
        r = http.get(f"/v1/users/{moved}/profile", params={"as_of": (T2 + timedelta(hours=1)).isoformat()})
        assert r.json()["preferences"]["location"]["value"] == "Berlin"
        # a time without a timezone is refused as the OpenAPI says (422), naming the field
        r = http.get(f"/v1/users/{moved}/profile", params={"as_of": "2026-03-02T00:00:00"})
        assert r.status_code == 422 and "as_of" in r.text, r.text
        r = http.post("/v1/recall", json={"user": moved, "query": "x", "as_of": "2026-03-02T00:00:00"})
        assert r.status_code == 422 and "as_of" in r.text, r.text
    assert shadows_left(settings) == []


def test_erasure_holds_for_the_past_too(settings, client, pipeline):
    user = unique_user("tterase")
    client.record_turn(user, "s1", "user", "I live in Oslo", at=T1)
    wait_for(lambda: location(preferences(settings, user)) == "Oslo", what="live preference Oslo")
    wait_for(lambda: location(preferences_as_of(settings, user, BETWEEN)) == "Oslo", what="as-of sees Oslo")
    erase_user(settings, user, requested_by="test")
    wait_for(lambda: [r["type"] for r in audit_events(settings, user)] == ["user.erased"], what="only the erasure record")
    assert preferences_as_of(settings, user, BETWEEN) == []
