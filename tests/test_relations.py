"""Relational memory's read side (#26) on the real stack: synthetic entity.observed / relation.asserted /
relation.ended events for two users, projected by pg-relations and neo4j-graph; the Postgres rows,
the graph (ids only, no names), the queries (family, as-of before and after a move, paths), the
HTTP routes, erasure, and a rebuild equal to live."""
from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from fastapi.testclient import TestClient

from memstream.app.api import create_app
from memstream_client import MemstreamClient, NotFound, Relations
from adapters.privacy.keystore import KeyStore
from services import relations as svc
from projections.registry import build_projector, checksums
from projections.runner import ProjectorRunner
from query.store import ReadModels
from replay import stores
from replay.rebuild import rebuild
from replay.verify import verify
from schemas.codec import make_envelope
from schemas.events import EntityObserved, RelationAsserted, RelationEnded, UserErased
from tests.auth_helpers import admin_headers
from tests.helpers import unique_user
from tests.test_replay import namespace, publish_all

NAMES = ("pg-relations", "neo4j-graph")


def t(y: int, m: int = 1, d: int = 1) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def ent(user, eid, etype, name, aliases=(), at=None):
    return ("memory", make_envelope(EntityObserved(entity_id=eid, entity_type=etype, name=name, aliases=list(aliases),
                                                   source_turn=f"turn-{eid}"), user=user, time=at or t(2023)))


def rel(user, rid, s, p, o, since, at=None):
    return ("memory", make_envelope(RelationAsserted(relation_id=rid, subject_id=s, predicate=p, object_id=o,
                                                     valid_from=since, source_turn=f"turn-{rid}",
                                                     evidence=f"evidence of {rid}"), user=user, time=at or t(2023)))


def end(user, rid, until, by=None, reason="superseded"):
    return ("memory", make_envelope(RelationEnded(relation_id=rid, valid_to=until, reason=reason, ended_by=by,
                                                  source_turn=f"turn-end-{rid}"), user=user, time=t(2023, 2)))


def project(ns, keys) -> None:
    for name in NAMES:
        ProjectorRunner(build_projector(name, ns), ns, keys).run(idle_exit_after=2.0)


@pytest.fixture(scope="module")
def world(settings):
    ns = namespace(settings, "rel")
    keys = KeyStore(ns)
    a, b = unique_user("rela"), unique_user("relb")
    log = [
        ent(a, "ana", "person", "Ana", ["Annie"]), ent(a, "rome", "place", "Rome"), ent(a, "berlin", "place", "Berlin"),
        ent(a, "google", "organisation", "Google"), ent(a, "bob", "person", "Bob"),
        rel(a, "r1", "self", "sister", "ana", t(2001)),
        rel(a, "r2", "ana", "lives_in", "rome", t(2020, 2)),
        rel(a, "r3", "self", "works_at", "google", t(2020, 3)),
        rel(a, "r5", "self", "friend", "bob", t(2015)),
        rel(a, "r4", "ana", "lives_in", "berlin", t(2022, 6)), end(a, "r2", t(2022, 6), by="r4"),
        rel(a, "r4", "ana", "lives_in", "berlin", t(2022, 6)),      # re-emitted: changes nothing
        ent(b, "ana", "person", "Ana"), rel(b, "r1", "self", "mother", "ana", t(1970)),
    ]
    publish_all(ns, keys, [e for e in log])
    project(ns, keys)
    models = ReadModels(ns)
    yield ns, keys, models, a, b
    models.close()
    keys.close()


def pg_rows(ns, table, user):
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        cur = conn.execute(f'SELECT * FROM "{ns.namespace}".{table} WHERE user_id = %s ORDER BY 2', (user,))
        names = [c.name for c in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def graph(ns, user):
    with stores.graph_driver(ns) as driver, driver.session() as s:
        from projections.graph_generation import current
        gen = current(s, ns.namespace)
        nodes = s.run("MATCH (x:Entity {ns: $ns, user: $u}) RETURN x.id AS id, properties(x) AS p ORDER BY id",
                      ns=gen, u=user).data()
        edges = s.run("MATCH (a:Entity {ns: $ns, user: $u})-[e:RELATES]->(b) RETURN e.id AS id, a.id AS a, b.id AS b, "
                      "properties(e) AS p ORDER BY id", ns=gen, u=user).data()
    return nodes, edges


def test_rows_of_entities_and_relations_with_their_validity(world):
    ns, _, _, a, b = world
    ents = {r["entity_id"]: r for r in pg_rows(ns, "entities", a)}
    assert (ents["ana"]["name"], ents["ana"]["aliases"], ents["ana"]["entity_type"]) == ("Ana", ["Annie"], "person")
    rels = {r["relation_id"]: r for r in pg_rows(ns, "relations", a)}
    assert set(rels) == {"r1", "r2", "r3", "r4", "r5"}
    assert rels["r2"]["valid_to"] == t(2022, 6) and rels["r2"]["end_reason"] == "superseded"
    assert rels["r2"]["ended_by"] == "r4" and rels["r2"]["ended_turn"] == "turn-end-r2"
    assert rels["r4"]["valid_to"] is None and rels["r4"]["recorded_at"] == t(2023)
    assert rels["r1"]["evidence"] == "evidence of r1" and rels["r1"]["source_turn"] == "turn-r1"
    assert [r["relation_id"] for r in pg_rows(ns, "relations", b)] == ["r1"]   # the same ids, another user's


def test_the_graph_holds_ids_types_and_validity_never_names(world):
    ns, _, _, a, _ = world
    nodes, edges = graph(ns, a)
    assert {n["id"]: n["p"].get("type") for n in nodes} == {
        "self": "user", "ana": "person", "rome": "place", "berlin": "place", "google": "organisation", "bob": "person"}
    by_id = {e["id"]: e for e in edges}
    assert set(by_id) == {"r1", "r2", "r3", "r4", "r5"}
    assert (by_id["r1"]["a"], by_id["r1"]["p"]["predicate"], by_id["r1"]["b"]) == ("self", "sister", "ana")
    assert by_id["r2"]["p"]["valid_to"].startswith("2022-06-01") and "valid_to" not in by_id["r4"]["p"]
    blob = repr((nodes, edges))
    for personal in ("Ana", "Annie", "Rome", "Berlin", "Google", "Bob", "evidence"):
        assert personal not in blob, personal


def test_family_as_of_a_move_names_roles_and_paths(world):
    _, _, models, a, b = world
    fam = svc.find_relations(models, a, group="family")
    assert [r["relation_id"] for r in fam["relations"]] == ["r1"]
    assert fam["answer"] == "Ana is the user's sister"
    # where does the user's sister live, now and before the move (by role word, by name, by alias)
    now = svc.find_relations(models, a, subject="role:sister", predicate="lives_in")
    assert [r["object_name"] for r in now["relations"]] == ["Berlin"] and now["answer"] == "Ana lives in Berlin"
    before = svc.find_relations(models, a, subject="annie", predicate="lives_in", as_of=t(2021))
    assert [r["object_name"] for r in before["relations"]] == ["Rome"]
    assert before["relations"][0]["valid_to"] == t(2022, 6) and before["relations"][0]["ended"]["ended_by"] == "r4"
    assert svc.find_relations(models, a, subject="Ana", predicate="lives_in", as_of=t(2019))["relations"] == []
    # the other user's Ana is their own
    assert svc.find_relations(models, b, subject="ana")["relations"] == []
    assert [r["predicate"] for r in svc.find_relations(models, b, obj="Ana")["relations"]] == ["mother"]
    # one entity: both directions, current and ended
    ana = svc.one_entity(models, a, "ana")
    assert {(r["relation_id"], r["current"]) for r in ana["relations"]} == {("r1", True), ("r2", False), ("r4", True)}
    assert [r["relation_id"] for r in svc.one_entity(models, a, "ana", as_of=t(2021))["relations"]] == ["r1", "r2"]
    listed = {e["entity_id"]: e for e in svc.list_entities(models, a, "person")}
    assert set(listed) == {"ana", "bob"} and [r["predicate"] for r in listed["ana"]["relations_to_user"]] == ["sister"]
    # paths: two hops now, three before the move
    p = svc.find_path(models, a, "self", "Berlin")
    assert (p["found"], p["hops"], [r["relation_id"] for r in p["relations"]]) == (True, 2, ["r1", "r4"])
    p = svc.find_path(models, a, "Bob", "Rome", as_of=t(2021))
    assert [(r["relation_id"], r["forward"]) for r in p["relations"]] == [("r5", False), ("r1", True), ("r2", True)]
    assert not svc.find_path(models, a, "Bob", "Rome")["found"]          # Ana lives elsewhere now
    assert not svc.find_path(models, a, "Bob", "Rome", max_hops=2, as_of=t(2021))["found"]
    with pytest.raises(svc.UnknownEntity):
        svc.find_relations(models, a, subject="Carol")
    with pytest.raises(svc.UnknownEntity):
        svc.find_relations(models, a, subject="role:brother")


def test_the_http_routes(world):
    ns, _, _, a, _ = world
    with TestClient(create_app(ns), headers=admin_headers(ns)) as http:
        r = http.get(f"/v1/users/{a}/relations", params={"group": "family"})
        assert r.status_code == 200, r.text
        assert r.json()["answer"] == "Ana is the user's sister"
        r = http.get(f"/v1/users/{a}/relations", params={"subject": "role:sister", "predicate": "lives_in",
                                                         "as_of": "2021-01-01T00:00:00+00:00"})
        assert r.status_code == 200 and r.json()["relations"][0]["object_name"] == "Rome", r.text
        r = http.get(f"/v1/users/{a}/entities", params={"type": "place"})
        assert r.status_code == 200 and {e["name"] for e in r.json()["entities"]} == {"Rome", "Berlin"}, r.text
        r = http.get(f"/v1/users/{a}/entities/ana")
        assert r.status_code == 200 and r.json()["name"] == "Ana" and len(r.json()["relations"]) == 3, r.text
        r = http.get(f"/v1/users/{a}/relations/path", params={"from": "self", "to": "Berlin"})
        assert r.status_code == 200 and r.json()["hops"] == 2 and r.json()["from"] == "self", r.text
        r = http.get(f"/v1/users/{a}/entities/nobody")
        assert r.status_code == 404 and "nobody" in r.json()["error"], r.text
        r = http.get(f"/v1/users/{a}/relations", params={"as_of": "yesterday"})
        assert r.status_code == 422, r.text
        r = http.get(f"/v1/users/{a}/relations/path", params={"from": "self", "to": "Berlin", "max_hops": 9})
        assert r.status_code == 422, r.text
        r = http.get(f"/v1/users/{a}/relations", params={"group": "enemies"})
        assert r.status_code == 422, r.text
        # the Python client's typed answers, over the same in-process app
        mem = MemstreamClient("http://t")
        mem._http = http
        sister = mem.relations(a, subject="role:sister", predicate="lives_in")
        assert isinstance(sister, Relations) and [x.object_name for x in sister.relations] == ["Berlin"]
        assert sister.relations[0].valid_from == t(2022, 6) and sister.relations[0].source_turn == "turn-r4"
        before = mem.relations(a, subject="Ana", predicate="lives_in", as_of=t(2021))
        assert before.relations[0].ended is not None and before.relations[0].ended.ended_by == "r4"
        way = mem.relation_path(a, "self", "Berlin", max_hops=2)
        assert (way.found, way.hops, way.from_) == (True, 2, "self")
        assert {e.name for e in mem.entities(a, type="person").entities} == {"Ana", "Bob"}
        assert mem.entity(a, "role:sister").name == "Ana"
        with pytest.raises(NotFound):
            mem.entity(a, "nobody")


def test_the_cli(world, monkeypatch, capsys):
    from memstream.app import cli
    ns, _, _, a, _ = world
    monkeypatch.setattr(cli, "get_settings", lambda: ns)
    assert cli.main(["relations", a, "--group", "family"]) == 0
    assert "Ana is the user's sister  [sister] since 2001-01-01  (turn turn-r1)" in capsys.readouterr().out
    assert cli.main(["relations", a, "--subject", "role:sister", "--predicate", "lives_in",
                     "--as-of", "2021-01-01T00:00:00+00:00"]) == 0
    assert "Ana lives in Rome  [lives_in] since 2020-02-01 until 2022-06-01" in capsys.readouterr().out
    assert cli.main(["entities", a, "--type", "person"]) == 0
    out = capsys.readouterr().out
    assert "ana  [person] Ana (also Annie)" in out and "Bob is the user's friend" in out
    assert cli.main(["relations", a, "--subject", "Carol"]) == 4
    assert "no entity 'Carol'" in capsys.readouterr().err


def test_a_rebuild_equals_live_then_erasure_drops_the_users_rows(world, no_embedder):
    ns, keys, models, a, b = world
    before = checksums(ns, list(NAMES))
    assert "entities:0:" not in before["pg-relations"] and " entities:" in before["neo4j-graph"]
    report = rebuild(ns, list(NAMES), keys=keys, fresh=True, progress=False)
    assert report.swapped
    assert checksums(ns, list(NAMES)) == before
    assert verify(ns, list(NAMES), keys=keys, progress=False).ok
    # a rebuild --from now seeds the new tables and graph generation from live (entities and edges too)
    assert rebuild(ns, list(NAMES), keys=keys, since=datetime.now(UTC), progress=False).swapped
    assert checksums(ns, list(NAMES)) == before
    # user.erased (b): their rows and graph go, a's stay; a rebuild agrees
    publish_all(ns, keys, [("memory", make_envelope(UserErased(requested_by="test"), user=b))])
    project(ns, keys)
    assert pg_rows(ns, "entities", b) == [] and pg_rows(ns, "relations", b) == []
    assert graph(ns, b) == ([], [])
    assert len(pg_rows(ns, "relations", a)) == 5 and len(graph(ns, a)[1]) == 5
    after = checksums(ns, list(NAMES))
    assert rebuild(ns, list(NAMES), keys=keys, fresh=True, progress=False).swapped
    assert checksums(ns, list(NAMES)) == after


@pytest.fixture
def no_embedder(monkeypatch):
    import adapters.embedding as embedding

    def boom(*a, **k):
        raise AssertionError("a replay tried to build an embedder")
    monkeypatch.setattr(embedding, "make_embedder", boom)


def test_cli_times_read_a_bare_date_or_naive_time_as_utc():
    """`memstream relations u --as-of 2024-06-01` (and every CLI time option) reads a date or a
    time without a timezone as UTC; an explicit offset is kept; nonsense is one clear error."""
    from datetime import datetime, timedelta, timezone

    from memstream.app.cli import _time
    from kernel.errors import MemstreamError

    assert _time("2024-06-01") == datetime(2024, 6, 1, tzinfo=timezone.utc)
    assert _time("2024-06-01T10:30:00") == datetime(2024, 6, 1, 10, 30, tzinfo=timezone.utc)
    assert _time("2024-06-01T10:30:00+02:00").utcoffset() == timedelta(hours=2)
    assert _time(None) is None
    with pytest.raises(MemstreamError, match="not an ISO 8601"):
        _time("yesterday")


def test_the_mcp_tools(world):
    """list_entities, get_entity, query_relations, relation_path over MCP (in-process, the world's
    namespace): sentences first in the text, rows as structured content; an unknown entity and a bad
    as_of are one-line tool errors; a key bound to another user is refused as not found."""
    import anyio
    from mcp.client.client import Client
    from mcp.shared.exceptions import MCPError

    from memstream.app.mcp_server import NOT_FOUND, create_server
    from services.backend import Backend
    from tests.auth_helpers import make_key

    ns, _, _, a, b = world
    backend = Backend(ns)
    backend.open()

    async def go():
        async with Client(create_server(backend, "stdio", make_key(ns))) as c:
            async def ok(tool, **args):
                r = await c.call_tool(tool, args)
                assert not r.is_error, r.content[0].text
                return r.content[0].text.split("\n", 1)[0], r.structured_content

            lead, out = await ok("list_entities", user=a, type="person")
            assert {e["name"] for e in out["entities"]} == {"Ana", "Bob"}
            assert "Ana is the user's sister" in lead
            lead, out = await ok("get_entity", user=a, entity="role:sister")
            assert out["entity_id"] == "ana" and "Ana lives in Berlin" in lead
            lead, out = await ok("get_entity", user=a, entity="Ana", as_of="2021-01-01T00:00:00+00:00")
            assert "Ana lives in Rome" in lead and "Berlin" not in lead
            lead, out = await ok("query_relations", user=a, subject="role:sister", predicate="lives_in")
            assert lead == "Ana lives in Berlin" and out["answer"] == lead
            lead, out = await ok("query_relations", user=a, group="family", as_of="2021-06-01T00:00:00+00:00")
            assert "Ana is the user's sister" in lead
            lead, out = await ok("relation_path", user=a, to="Berlin", max_hops=2, **{"from": "self"})
            assert out["found"] and out["hops"] == 2 and lead == "Ana is the user's sister; Ana lives in Berlin"

            r = await c.call_tool("get_entity", {"user": a, "entity": "Zed"})
            assert r.is_error and "\n" not in r.content[0].text and "unknown entity" in r.content[0].text
            r = await c.call_tool("query_relations", {"user": a, "as_of": "2024-06-01"})
            assert r.is_error and "\n" not in r.content[0].text and "as_of" in r.content[0].text
        async with Client(create_server(backend, "stdio", make_key(ns, user=b))) as c:
            with pytest.raises(MCPError) as exc:
                await c.call_tool("list_entities", {"user": a})
            assert exc.value.code == NOT_FOUND

    try:
        anyio.run(go)
    finally:
        backend.close()
