"""Relational memory end to end (#26), on the real stack: turns through the API → extractor →
memory processor (relations decided once) → pg-relations and the Neo4j graph → the relation
routes, the thin client and the CLI; replay verify stays exact and what-if reproduces the live
relation decisions."""
from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.auth_helpers import bearer
from tests.helpers import unique_user
from tests.test_api import api_url  # noqa: F401  (the API in a subprocess, module-scoped)

WAIT = {"wait_s": 90}
SAID = [("2026-05-02T10:00:00Z", "My sister is called Ana."),
        ("2026-05-02T10:01:00Z", "She lives in Rome."),
        ("2026-05-02T10:02:00Z", "Last year I moved from Paris to Berlin.")]


@pytest.fixture(scope="module")
def told(api_url, admin_key):  # noqa: F811
    """One user who said SAID in one session; the token of the last turn."""
    user = unique_user("rel")
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=120) as http:
        token = None
        for at, text in SAID:
            r = http.post("/v1/turns", json={"user": user, "session": "s1", "role": "user", "content": text, "at": at})
            assert r.status_code in (200, 201, 202), r.text
            token = r.json()["token"]
        yield http, user, token


def test_family_where_the_sister_lives_and_where_the_user_lived_before_the_move(told):
    http, user, token = told
    fam = http.get(f"/v1/users/{user}/relations", params={"group": "family", "after": token, **WAIT})
    assert fam.status_code == 200, fam.text
    assert [(r["predicate"], r["object_name"]) for r in fam.json()["relations"]] == [("sister", "Ana")]
    where = http.get(f"/v1/users/{user}/relations", params={"subject": "role:sister", "predicate": "lives_in"}).json()
    assert [r["object_name"] for r in where["relations"]] == ["Rome"]
    # the user: Berlin now, since last year; Paris as of a date before the move
    now = http.get(f"/v1/users/{user}/relations", params={"subject": "self", "predicate": "lives_in"}).json()
    assert [r["object_name"] for r in now["relations"]] == ["Berlin"]
    assert now["relations"][0]["valid_from"].startswith("2025-")
    before = http.get(f"/v1/users/{user}/relations",
                      params={"subject": "self", "predicate": "lives_in", "as_of": "2024-06-01T00:00:00Z"}).json()
    assert [r["object_name"] for r in before["relations"]] == ["Paris"]
    assert before["relations"][0]["ended"]["reason"] == "stated"
    # a path: the user → Ana → Rome, two hops
    path = http.get(f"/v1/users/{user}/relations/path", params={"from": "self", "to": "Rome"}).json()
    assert path["found"] and path["hops"] == 2


def test_the_thin_client_and_the_cli_answer_the_same(told, api_url, admin_key, settings):  # noqa: F811
    from memstream_client import MemstreamClient
    http, user, token = told
    http.get(f"/v1/users/{user}/relations", params={"after": token, **WAIT}).raise_for_status()
    with MemstreamClient(api_url, api_key=admin_key) as c:
        ans = c.relations(user, subject="role:sister", predicate="lives_in")
        assert [r.object_name for r in ans.relations] == ["Rome"]
    out = subprocess.run([sys.executable, "-m", "memstream.app.cli", "relations", user, "--as-of", "2024-06-01T00:00:00+00:00"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Paris" in out.stdout and "Berlin" not in out.stdout


def test_replay_verify_is_exact_and_whatif_reproduces_the_live_relation_decisions(told, settings):
    from replay.verify import verify
    from replay.whatif import whatif
    http, user, token = told
    http.get(f"/v1/users/{user}/relations", params={"after": token, **WAIT}).raise_for_status()
    report = verify(settings, ["pg-relations", "neo4j-graph"], progress=False)
    assert report.ok, report
    # What-if under the live rules over the whole test namespace (other tests' users included):
    # every relational decision is made again, the same number of each kind.
    wi = whatif(settings, "relations", {}, progress=False, project=False)
    assert wi.live_counts.get("relation.asserted", 0) >= 4
    for kind in ("entity.observed", "relation.asserted", "relation.ended"):
        assert wi.whatif_counts.get(kind, 0) == wi.live_counts.get(kind, 0), (kind, wi.as_dict())


def test_the_prompt_context_tells_the_agent_about_the_people_a_question_names(told):
    http, user, token = told
    http.get(f"/v1/users/{user}/relations", params={"after": token, **WAIT}).raise_for_status()
    r = http.post("/v1/context", json={"user": user, "query": "Where does my sister live?"})
    assert r.status_code == 200, r.text
    ctx = r.json()
    assert "People and places" in ctx["text"] and "Ana lives in Rome" in ctx["text"], ctx["text"]
    assert "Ana is the user's sister" in ctx["text"]
    # by name too, and a question naming no one leaves the slot empty
    by_name = http.post("/v1/context", json={"user": user, "query": "Is Ana doing well?"}).json()
    assert "Ana lives in Rome" in by_name["text"]
    nobody = http.post("/v1/context", json={"user": user, "query": "what should I cook tonight?"}).json()
    assert "People and places" not in nobody["text"]
