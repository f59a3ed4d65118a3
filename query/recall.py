"""Recall, layered: filters → vector search → keyword path → time path → rerank → 1-hop graph expansion → top-k.

Filtered ANN: an HNSW scan followed by a user filter can return nothing when the user's rows are
a tiny share of the index. We rely on pgvector 0.8's iterative index scans
(`hnsw.iterative_scan = relaxed_order`), which keep scanning until enough rows pass the filter,
plus a btree on (user_id, created_at) that the planner picks for users with few memories (an
exact scan). tests/test_recall.py shows both a 10-memory and a 100,000-memory user get k results.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
from psycopg import sql
from psycopg.rows import dict_row

from memstream.domain.text import bm25, bm25_ceiling, date_ranges, tokens
from projections.graph_generation import RESOLVE
from query.store import ReadModels

COLUMNS = ("memory_id, content, category, tags, importance, created_at, access_count, last_accessed_at, "
           "1 - (embedding <=> %(q)s) AS sim")


@dataclass(frozen=True)
class RecallRequest:
    user: str
    query: str
    k: int = 10
    categories: list[str] | None = None      # any of
    tags: list[str] | None = None            # all of
    max_age_hours: float | None = None       # by creation time
    min_score: float | None = None
    expand: bool = True
    query_embedding: list[float] | None = None  # skip embedding the query (precomputed)


@dataclass
class RecallHit:
    memory_id: str
    content: str
    category: str
    tags: list[str]
    importance: float
    created_at: str
    score: float
    why: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Weights:
    similarity: float = 0.7
    importance: float = 0.3
    recency: float = 0.0          # × exp(-age / recency_half_life_days)
    frequency: float = 0.0        # × log1p(access_count) / log1p(100)
    recency_half_life_days: float = 30.0
    graph_score: float = 0.45     # a 1-hop neighbour scores graph_score × its seed's score
    sim_floor: float = 0.0        # similarities are rescaled from [floor, 1] to [0, 1]
    keyword: float = 0.5          # match = 1 - (1 - sim') × (1 - keyword × bm25 / ceiling): a noisy-or
    time: float = 0.2             # + time when the memory's event time falls on a date the query names


def weights_from(settings) -> Weights:
    return Weights(settings.recall_w_similarity, settings.recall_w_importance, settings.recall_w_recency,
                   settings.recall_w_frequency, settings.recall_recency_half_life_days, settings.recall_graph_score,
                   settings.recall_sim_floor,
                   # not settings yet (memstream/config.py): the defaults above until they are
                   keyword=settings.recall_w_keyword, time=settings.recall_w_time)


def _filters(req: RecallRequest, now: datetime) -> tuple[sql.Composable, dict]:
    where = [sql.SQL("user_id = %(u)s AND status = 'active'")]
    params: dict = {"u": req.user}
    if req.categories:
        where.append(sql.SQL("category = ANY(%(cats)s)"))
        params["cats"] = list(req.categories)
    if req.tags:
        where.append(sql.SQL("tags @> %(tags)s"))
        params["tags"] = list(req.tags)
    if req.max_age_hours is not None:
        where.append(sql.SQL("created_at >= %(since)s"))
        params["since"] = now - timedelta(hours=req.max_age_hours)
    return sql.SQL(" AND ").join(where), params


def recall(models: ReadModels, req: RecallRequest, weights: Weights | None = None,
           now: datetime | None = None) -> list[RecallHit]:
    w = weights or weights_from(models.settings)
    now = now or datetime.now(timezone.utc)
    q = np.asarray(req.query_embedding if req.query_embedding is not None else models.embed_query(req.query),
                   dtype=np.float32)
    where, params = _filters(req, now)
    params["q"] = q
    n_candidates = max(req.k * 4, 40)
    qterms = sorted(set(tokens(req.query)))
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        # 1. vector search, user-scoped, iterative HNSW scan (or the planner's exact scan)
        with conn.transaction():
            cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cur.execute("SET LOCAL hnsw.ef_search = 100")
            cur.execute(models.q("SELECT " + COLUMNS + " FROM {s}.memory_items WHERE ")
                        + where + sql.SQL(" ORDER BY embedding <=> %(q)s LIMIT %(n)s"), {**params, "n": n_candidates})
            rows = {r["memory_id"]: r for r in cur.fetchall()}
        # 2. keyword path: names, numbers and dates that vectors miss
        keyword: dict[str, float] = {}
        if qterms:
            cur.execute(models.q("SELECT " + COLUMNS + " FROM {s}.memory_items WHERE ") + where
                        + sql.SQL(" AND terms && %(terms)s LIMIT 200"), {**params, "terms": qterms})
            found = {r["memory_id"]: r for r in cur.fetchall()}
            if found:
                docs = {mid: tokens(r["content"]) for mid, r in found.items()}
                avg = sum(map(len, docs.values())) / len(docs)
                scores = bm25(tokens(req.query), docs, len(docs) + 1, avg)
                # Absolute scale (not "best match = 1"): a memory sharing only a common word with a
                # question stays a weak keyword match even when nothing matches better.
                ceiling = bm25_ceiling(tokens(req.query), docs, len(docs) + 1)
                keyword = {mid: min(1.0, s / ceiling) for mid, s in scores.items()} if ceiling > 0 else {}
                for mid in keyword:
                    rows.setdefault(mid, found[mid])
        # 3. time path: dates the query names ("on 8 May, 2023", "in June 2022") select memories
        #    by event time (the btree on (user_id, created_at)), best similarity first
        windows = date_ranges(req.query) if w.time else []
        if windows:
            within = sql.SQL(" OR ").join(sql.SQL("(created_at >= {} AND created_at < {})").format(sql.Literal(a), sql.Literal(b))
                                          for a, b in windows)
            cur.execute(models.q("SELECT " + COLUMNS + " FROM {s}.memory_items WHERE ") + where + sql.SQL(" AND (")
                        + within + sql.SQL(") ORDER BY embedding <=> %(q)s LIMIT %(n)s"), {**params, "n": n_candidates})
            for r in cur.fetchall():
                rows.setdefault(r["memory_id"], r)
    # 4. rerank
    hits = {mid: _score(r, keyword.get(mid), w, now, any(a <= r["created_at"] < b for a, b in windows))
            for mid, r in rows.items()}
    ranked = sorted(hits.values(), key=lambda h: (-h.score, h.memory_id))
    # 5. 1-hop graph expansion from the best hits: a neighbour scores graph_score × its seed's
    #    score, or its own score if that is higher (merge, dedup)
    if req.expand and ranked:
        for hit in _expand(models, req, ranked[: min(5, req.k)], where, params, w):
            if hit.memory_id not in hits or hit.score > hits[hit.memory_id].score:
                hits[hit.memory_id] = hit
        ranked = sorted(hits.values(), key=lambda h: (-h.score, h.memory_id))
    hits = ranked
    if req.min_score is not None:
        hits = [h for h in hits if h.score >= req.min_score]
    return hits[: req.k]


def _rescale(sim: float, floor: float) -> float:
    return min(1.0, max(0.0, (sim - floor) / (1.0 - floor))) if floor > 0 else sim


def _score(r: dict, keyword: float | None, w: Weights, now: datetime, in_time: bool = False) -> RecallHit:
    sim = float(r["sim"])
    s = _rescale(sim, w.sim_floor)
    # Keyword evidence raises the match without replacing it (noisy-or): max(sim', keyword) let
    # any question's best keyword match (often just a name) outrank every semantic hit.
    match = 1.0 - (1.0 - s) * (1.0 - w.keyword * keyword) if keyword is not None else s
    score = w.similarity * match + w.importance * float(r["importance"])
    why = {"similarity": round(sim, 4), "importance": round(float(r["importance"]), 4)}
    if keyword is not None:
        why["keyword"] = round(keyword, 4)
    if in_time:
        score += w.time
        why["time"] = 1.0
    if w.recency:
        age_days = (now - r["created_at"]).total_seconds() / 86400
        rec = math.exp(-max(age_days, 0) / w.recency_half_life_days)
        score += w.recency * rec
        why["recency"] = round(rec, 4)
    if w.frequency:
        freq = min(1.0, math.log1p(r["access_count"]) / math.log1p(100))
        score += w.frequency * freq
        why["frequency"] = round(freq, 4)
    return RecallHit(r["memory_id"], r["content"], r["category"], list(r["tags"]), float(r["importance"]),
                     r["created_at"].isoformat(), round(score, 6), why)


def _expand(models: ReadModels, req: RecallRequest, seeds: list[RecallHit],
            where: sql.Composable, params: dict, w: Weights) -> list[RecallHit]:
    with models.graph.session() as s:
        # the namespace's current graph generation, resolved in the same query (replay swaps it)
        pairs = s.run(RESOLVE + "UNWIND $ids AS sid MATCH (m:Memory {ns: gen, id: sid})-[:FOLLOWS|SIMILAR_TO]-(n:Memory) "
                      "WHERE n.user = $u AND n.status = 'active' RETURN sid, n.id AS nid",
                      ids=[h.memory_id for h in seeds], ns=models.settings.namespace, u=req.user).data()
    origin: dict[str, str] = {}
    for p in pairs:
        origin.setdefault(p["nid"], p["sid"])  # seeds come best first, so the best seed wins
    if not origin:
        return []
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        # the same filters apply to expanded items: a filter is a promise about every result
        cur.execute(models.q("SELECT " + COLUMNS + " FROM {s}.memory_items WHERE ") + where
                    + sql.SQL(" AND memory_id = ANY(%(ids)s)"), {**params, "ids": list(origin)})
        rows = cur.fetchall()
    # A neighbour scores relative to its seed: with rescaled similarities a typical direct hit
    # scores ~0.4, so the seed design's fixed 0.45 would rank neighbours above the hits they came
    # from (docs/calibration.md).
    seed_score = {h.memory_id: h.score for h in seeds}
    return [RecallHit(r["memory_id"], r["content"], r["category"], list(r["tags"]), float(r["importance"]),
                      r["created_at"].isoformat(), round(w.graph_score * seed_score[origin[r["memory_id"]]], 6),
                      {"expanded_from": origin[r["memory_id"]], "similarity": round(float(r["sim"]), 4),
                       "importance": round(float(r["importance"]), 4)})
            for r in rows]


def recalled_event(hits: list[RecallHit], source: str):
    """The `memory.recalled` event for one recall call (None when nothing was returned).

    Published by the query side (API, CLI) on the memory topic, keyed by the user: the memory
    processor refreshes the returned memories' access (count, last access) from it.
    """
    from schemas.events import MemoryRecalled
    ids = list(dict.fromkeys(h.memory_id for h in hits))
    return MemoryRecalled(memory_ids=ids, source=source) if ids else None
