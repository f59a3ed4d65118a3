"""The partial HNSW index (projections/pg.py, `ann`): only users with at least
vector_index_min_rows memories pay HNSW inserts; recall gives every user the same results as an
exact scan; the flag follows from the log alone (any batching, a rebuild: the same values); an
old namespace with the index over every row is converted in place."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest
from psycopg import sql

from adapters.bus import ensure_topics
from adapters.privacy.keystore import KeyStore
from projections import pg
from projections.registry import build_projector
from projections.runner import ProjectorRunner
from query.recall import RecallRequest, Weights, index_scope, recall
from query.store import ReadModels
from replay import stores
from replay.rebuild import rebuild
from schemas.events import MemoryCreated, MemoryForgotten
from schemas.codec import make_envelope
from tests.test_replay import checksums, namespace, publish_all

T = 30   # the threshold these tests run with (the default is far above their users)
# Ranked by similarity alone, so the vector stage's order is the result's order.
SIMILARITY_ONLY = Weights(similarity=1.0, importance=0.0, sim_floor=0.0, keyword=0.0, time=0.0, redundancy=0.0)


def unit(rng, dim: int) -> np.ndarray:
    v = rng.normal(size=dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def created(user: str, n: int, rng, dim: int, vectors: dict | None = None) -> list:
    out = []
    for i in range(n):
        v = unit(rng, dim)
        env = make_envelope(MemoryCreated(memory_id=f"{user}-{len(vectors or ()) + i}-{rng.integers(1 << 40)}",
                                          fact_id="f", content=f"note {i} of {user}", category="fact",
                                          importance=0.5, embedding=v.tolist()), user=user)
        if vectors is not None:
            vectors[env.data.memory_id] = v
        out.append(("memory", env))
    return out


def forgotten(user: str, envs: list) -> tuple[str, object]:
    ids = [e.data.memory_id for _, e in envs]
    return "memory", make_envelope(MemoryForgotten(memory_id=ids[0], memory_ids=ids), user=user)


def ann_by_user(ns) -> dict[str, set[bool]]:
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT user_id, ann FROM {}.memory_items").format(sql.Identifier(ns.namespace)))
        out: dict[str, set[bool]] = {}
        for user, ann in rows:
            out.setdefault(user, set()).add(ann)
        return out


def index_def(ns, index: str) -> str | None:
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT pg_get_indexdef(to_regclass(%s))", (f'"{ns.namespace}"."{index}"',)).fetchone()
        return row[0] if row else None


def project(ns, keys, batch_size: int = 2000) -> None:
    ProjectorRunner(build_projector("pgvector-items", ns), ns, keys, batch_size=batch_size).run(idle_exit_after=2.0)


@pytest.fixture(scope="module")
def crossed(settings):
    """One user above the threshold (projected in small batches, so it is crossed mid-stream), one below."""
    ns = namespace(settings, "pix", vector_index_min_rows=T)
    keys = KeyStore(ns)
    rng = np.random.default_rng(7)
    vectors: dict[str, dict] = {"pix-big": {}, "pix-small": {}}
    log = created("pix-big", T + 15, rng, ns.embed_dim, vectors["pix-big"])
    log += created("pix-small", 12, rng, ns.embed_dim, vectors["pix-small"])
    publish_all(ns, keys, log)
    project(ns, keys, batch_size=7)
    yield ns, vectors
    keys.close()


def test_a_user_crossing_the_threshold_enters_the_partial_index_and_no_one_else(crossed):
    ns, _ = crossed
    assert ann_by_user(ns) == {"pix-big": {True}, "pix-small": {False}}
    assert index_def(ns, pg.ANN_INDEX).endswith("USING hnsw (embedding vector_cosine_ops) WHERE ann")
    assert index_def(ns, pg.FULL_INDEX) is None


@pytest.mark.parametrize("planner", ["default", "index-forced"])
def test_recall_equals_an_exact_scan_for_users_on_either_side(crossed, planner, monkeypatch):
    ns, vectors = crossed
    if planner == "index-forced":   # sorting made dear: a flagged user's statements take the HNSW index
        monkeypatch.setenv("PGOPTIONS", "-c enable_sort=off -c enable_seqscan=off")
    models = ReadModels(ns, pool_size=1)
    try:
        rng = np.random.default_rng(11)
        for user, vecs in vectors.items():
            ids = list(vecs)
            E = np.stack([vecs[i] for i in ids])
            for _ in range(5):
                q = unit(rng, ns.embed_dim)
                exact = [ids[j] for j in np.argsort(-(E @ q), kind="stable")[:10]]
                hits = recall(models, RecallRequest(user, "zzz", k=10, expand=False, query_embedding=q.tolist()),
                              weights=SIMILARITY_ONLY)
                assert [h.memory_id for h in hits] == exact, (user, planner)
            with models.pool.connection() as conn, conn.cursor() as cur:
                scope = index_scope(cur, models, user)
                plan = "\n".join(r[0] for r in conn.execute(
                    models.q("EXPLAIN SELECT memory_id FROM {s}.memory_items WHERE user_id = %(u)s") + scope
                    + sql.SQL(" ORDER BY embedding <=> %(q)s LIMIT 10"), {"u": user, "q": q}).fetchall())
            if user == "pix-big" and planner == "index-forced":
                assert pg.ANN_INDEX in plan, plan      # the literal flag lets the planner prove `WHERE ann`
            if user == "pix-small":
                assert pg.ANN_INDEX not in plan, plan  # nothing of theirs is in it
    finally:
        models.close()


def test_the_flag_follows_from_the_log_whatever_the_batching_and_survives_a_rebuild(settings):
    ns = namespace(settings, "pixd", vector_index_min_rows=T)
    keys = KeyStore(ns)
    rng = np.random.default_rng(3)
    dim = ns.embed_dim
    log = []
    # crossed, then a forget takes it below the threshold: unflagged, and so are its later memories
    a = created("d-a", T + 5, rng, dim)
    log += a + [forgotten("d-a", a[:10])] + created("d-a", 3, rng, dim)
    # crossed, then a forget that leaves it above: stays flagged
    e = created("d-e", T + 5, rng, dim)
    log += e + [forgotten("d-e", e[:3])]
    # reaches the threshold only after a forget and two more creations
    b = created("d-b", T - 1, rng, dim)
    log += b + [forgotten("d-b", b[:1])] + created("d-b", 2, rng, dim)
    # crossed, then every memory forgotten: starts again unflagged
    c = created("d-c", T + 1, rng, dim)
    log += c + [forgotten("d-c", c)] + created("d-c", 5, rng, dim)
    log += created("d-d", T - 10, rng, dim)                         # never crosses
    published_from = datetime.now(UTC) - timedelta(seconds=5)
    publish_all(ns, keys, log)
    project(ns, keys, batch_size=1)                                 # every event its own batch
    expected = {"d-a": {False}, "d-b": {True}, "d-c": {False}, "d-d": {False}, "d-e": {True}}
    assert ann_by_user(ns) == expected
    one_by_one = checksums(ns, ["pgvector-items"])
    # the same log in one batch, into a shadow schema
    shadow = stores.shadow_settings(ns, "onebatch")
    project(shadow, keys, batch_size=5000)
    assert ann_by_user(shadow) == expected
    assert checksums(shadow, ["pgvector-items"]) == one_by_one
    # a rebuild (bulk load, the HNSW index deferred and built after) swaps in the same rows and index
    rebuild(ns, ["pgvector-items"], keys=keys, progress=False)
    assert checksums(ns, ["pgvector-items"]) == one_by_one
    assert index_def(ns, pg.ANN_INDEX).endswith("WHERE ann")
    # a --from rebuild re-applies the whole log over a copy of the rows: forgotten memories come
    # back for a moment (d-c holds 5 + T + 1 rows until the forget is re-applied)
    rebuild(ns, ["pgvector-items"], keys=keys, since=published_from, progress=False)
    assert checksums(ns, ["pgvector-items"]) == one_by_one
    stores.drop_schema(ns, shadow.namespace)
    keys.close()


def test_an_old_namespace_is_converted_in_place(settings):
    """The schema as it was (no `ann`, HNSW over every row) with rows in it: ensure_schema adds the
    flag, flags the users at or above the threshold, swaps the indexes; again, it changes nothing;
    cut short after dropping the old index, the next run finishes it."""
    ns = settings.model_copy(update={"namespace": f"{settings.namespace}_pixm", "vector_index_min_rows": T})
    stores.drop_schema(ns, ns.namespace)
    old_ddl = pg.DDL.split("-- `ann`")[0]
    assert "EXISTS ann " not in old_ddl
    pg.ensure_ddl(ns, old_ddl, dim=ns.embed_dim)
    s = sql.Identifier(ns.namespace)
    rng = np.random.default_rng(5)
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE INDEX {i} ON {s}.memory_items USING hnsw (embedding vector_cosine_ops)").format(
            i=sql.Identifier(pg.FULL_INDEX), s=s))
        for user, n in (("m-big", T + 2), ("m-edge", T), ("m-small", T - 1)):
            for i in range(n):
                conn.execute(sql.SQL(
                    "INSERT INTO {s}.memory_items (memory_id, user_id, content, category, importance, embedding, "
                    "event_id, created_at, updated_at) VALUES (%s, %s, 'x', 'fact', 0.5, %s, 'e', now(), now())").format(s=s),
                    (f"{user}-{i}", user, "[" + ",".join(map(str, unit(rng, ns.embed_dim))) + "]"))
    expected = {"m-big": {True}, "m-edge": {True}, "m-small": {False}}

    def converted() -> None:
        assert ann_by_user(ns) == expected
        assert index_def(ns, pg.FULL_INDEX) is None
        assert index_def(ns, pg.ANN_INDEX).endswith("WHERE ann")

    pg.ensure_schema(ns)
    converted()
    pg.ensure_schema(ns)
    converted()
    # cut short: the old index dropped and the rows flagged, the partial one not built yet
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP INDEX {s}.{i}").format(s=s, i=sql.Identifier(pg.ANN_INDEX)))
    pg.ensure_schema(ns)
    converted()
    # the projector role writes the converted table (the new column carries the table's grants)
    ensure_topics(ns)
    keys = KeyStore(ns)
    try:
        publish_all(ns, keys, created("m-small", 1, rng, ns.embed_dim))
        project(ns, keys)
    finally:
        keys.close()
    assert ann_by_user(ns) == {"m-big": {True}, "m-edge": {True}, "m-small": {True}}
    stores.drop_schema(ns, ns.namespace)
