"""memory_links (projections/pg.py): the graph's FOLLOWS and SIMILAR_TO edges as the pgvector
projector keeps them, and recall's 1-hop expansion reading them in its own Postgres snapshot.

Only the pgvector-items projector runs here, never the graph's: recall expands without Neo4j."""
from __future__ import annotations

import numpy as np
import psycopg
from psycopg import sql

from adapters.privacy.keystore import KeyStore
from query.recall import RecallRequest, Weights, recall
from query.store import ReadModels
from replay import stores
from replay.rebuild import rebuild
from schemas.codec import make_envelope
from schemas.events import MemoryCreated, MemoryForgotten, MemoryLinked, UserForgotten
from tests.test_partial_index import project, unit
from tests.test_replay import checksums, namespace, publish_all

# Ranked by similarity alone: a neighbour orthogonal to the query scores 0 on its own, so what
# it scores in the result comes from its edge.
SIMILARITY_ONLY = Weights(similarity=1.0, importance=0.0, sim_floor=0.0, keyword=0.0, time=0.0, redundancy=0.0)


def _created(user: str, mid: str, v: np.ndarray, category: str = "fact"):
    return "memory", make_envelope(MemoryCreated(memory_id=mid, fact_id="f", content=f"note {mid}", category=category,
                                                 importance=0.5, embedding=v.tolist()), user=user)


def _linked(user: str, a: str, b: str, kind: str, weight: float = 1.0):
    return "memory", make_envelope(MemoryLinked(from_id=a, to_id=b, kind=kind, weight=weight), user=user)


def _links(ns) -> set[tuple]:
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        return set(conn.execute(sql.SQL("SELECT memory_id, other_id, kind, user_id, weight FROM {}.memory_links").format(
            sql.Identifier(ns.namespace))).fetchall())


def _orthogonal(rng, dim: int, to: np.ndarray) -> np.ndarray:
    v = unit(rng, dim)
    v = v - (v @ to) * to
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_links_are_kept_from_both_ends_and_recall_expands_over_them_without_the_graph(settings):
    ns = namespace(settings, "mlk")
    keys = KeyStore(ns)
    rng = np.random.default_rng(17)
    dim = ns.embed_dim
    q = unit(rng, dim)
    seed, after, alike, other = (f"lk-{n}" for n in ("seed", "after", "alike", "other"))
    log = [_created("lk-a", seed, q), _created("lk-a", after, _orthogonal(rng, dim, q), category="episodic"),
           _created("lk-a", alike, _orthogonal(rng, dim, q)), _created("lk-a", other, _orthogonal(rng, dim, q)),
           _linked("lk-a", seed, after, "FOLLOWS", 0.5), _linked("lk-a", alike, seed, "SIMILAR_TO", 0.9),
           _linked("lk-a", seed, after, "FOLLOWS", 1.0),                  # again: one edge, the latest weight
           _created("lk-b", "lk-b1", unit(rng, dim)), _created("lk-b", "lk-b2", unit(rng, dim)),
           _linked("lk-b", "lk-b1", "lk-b2", "FOLLOWS")]
    publish_all(ns, keys, log)
    project(ns, keys, batch_size=3)          # links and creations in mixed batches
    assert _links(ns) == {(seed, after, "FOLLOWS", "lk-a", 1.0), (after, seed, "FOLLOWS", "lk-a", 1.0),
                          (alike, seed, "SIMILAR_TO", "lk-a", 0.9), (seed, alike, "SIMILAR_TO", "lk-a", 0.9),
                          ("lk-b1", "lk-b2", "FOLLOWS", "lk-b", 1.0), ("lk-b2", "lk-b1", "FOLLOWS", "lk-b", 1.0)}
    models = ReadModels(ns, pool_size=1)
    try:
        def ask(**kw) -> dict:
            return {h.memory_id: h for h in recall(models, RecallRequest("lk-a", "zzz", k=4, query_embedding=q.tolist(),
                                                                         **kw), weights=SIMILARITY_ONLY)}
        hits = ask()
        assert hits[seed].score == 1.0
        # each neighbour inherits its edge kind's share of the seed's score; `other` has no edge
        assert hits[after].why["expanded_from"] == seed and hits[after].score == SIMILARITY_ONLY.graph_follows
        assert hits[alike].why["expanded_from"] == seed and hits[alike].score == SIMILARITY_ONLY.graph_score
        assert "expanded_from" not in hits[other].why
        assert all("expanded_from" not in h.why for h in ask(expand=False).values())
        # a filter holds for expanded neighbours too
        assert after not in ask(categories=["fact"])
    finally:
        models.close()
    # the same log, one event per batch, into a shadow: the same rows
    shadow = stores.shadow_settings(ns, "onebyone")
    project(shadow, keys, batch_size=1)
    assert checksums(shadow, ["pgvector-items"]) == checksums(ns, ["pgvector-items"])
    stores.drop_schema(ns, shadow.namespace)
    # forgetting a memory takes its edges from both ends; forgetting a user takes all of theirs
    publish_all(ns, keys, [("memory", make_envelope(MemoryForgotten(memory_id=seed, memory_ids=[seed]), user="lk-a")),
                           ("memory", make_envelope(UserForgotten(), user="lk-b"))])
    project(ns, keys)
    assert _links(ns) == set()
    live = checksums(ns, ["pgvector-items"])
    rebuild(ns, ["pgvector-items"], keys=keys, progress=False)
    assert checksums(ns, ["pgvector-items"]) == live
    keys.close()
    stores.drop_schema(ns, ns.namespace)


def test_a_namespace_with_memories_and_no_links_table_is_told_to_rebuild(settings, caplog):
    """memory_links is filled from the log: a namespace projected before it gets the table empty,
    and the operator is told how to fill it (a live projector never re-reads applied events)."""
    from projections import pg
    ns = settings.model_copy(update={"namespace": f"{settings.namespace}_mlko"})
    stores.drop_schema(ns, ns.namespace)
    old_ddl = pg.DDL.split("-- memory.linked")[0]
    assert "memory_links" not in old_ddl
    pg.ensure_ddl(ns, old_ddl, dim=ns.embed_dim)
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("INSERT INTO {}.memory_items (memory_id, user_id, content, category, importance, embedding, "
                             "event_id, created_at, updated_at) VALUES ('o1', 'u', 'x', 'fact', 0.5, %s, 'e', now(), "
                             "now())").format(sql.Identifier(ns.namespace)), ("[" + ",".join(["0.1"] * ns.embed_dim) + "]",))
    with caplog.at_level("WARNING", logger="memstream.projections"):
        pg.ensure_schema(ns)
        assert pg.REBUILD_ITEMS in caplog.text
        assert "replay rebuild --projection pgvector-items" in caplog.text
        caplog.clear()
        pg.ensure_schema(ns)                      # said once: the table exists now
        assert "memory_links" not in caplog.text
    assert _links(ns) == set()
    stores.drop_schema(ns, ns.namespace)
