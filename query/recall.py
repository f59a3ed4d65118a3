"""Recall, layered: filters → vector search → keyword path → time path → rerank → diversify → 1-hop graph expansion → top-k.

Filtered ANN: an HNSW scan followed by a user filter can return nothing when the user's rows are
a tiny share of the index. We rely on pgvector 0.8's iterative index scans
(`hnsw.iterative_scan = relaxed_order`), which keep scanning until enough rows pass the filter,
plus a btree on (user_id, created_at) that the planner picks for users with few memories (an
exact scan). tests/test_recall.py shows both a 10-memory and a 100,000-memory user get k results.

Since the HNSW index holds only the rows of users with many memories (`ann`, projections/pg.py),
a user below vector_index_min_rows is always served by the btree and an exact scan; each vector
statement names the user's flag (index_scope) so the planner can use the partial index.

Two tiers: active memories, and the archive (rows that forgetting archived: status `archived`,
or `expired` in projections older than the archive). Both are searched; an archived hit's score
is multiplied by `recall_archived_penalty`, so it ranks below an active memory of the same
relevance, and it is marked (`archived: true`, and in `why`). The `memory.recalled` event names
the archived ones (`archived_ids`): the memory processor revives them. `archived=False` on the
request searches the active tier only.

What the LoCoMo harness (bench/locomo.py) measured for each stage is in docs/calibration.md.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone

import numpy as np
from psycopg import sql
from psycopg.rows import dict_row

from projections.importance import importance_now
from projections.memory_filters import compile_filter_named

from domain.subjects import question_names, third_party
from domain.text import bm25, bm25_ceiling, date_ranges, tokens
from adapters.metrics import timed_query
from query.store import ReadModels

def columns(decay_rate: float, now: datetime) -> str:
    """What every candidate read selects; importance as of `now` (decay is a function: projections/importance.py)."""
    return ("memory_id, content, category, tags, " + importance_now(decay_rate, now) + " AS importance, created_at, "
            "access_count, last_accessed_at, status, terms, embedding, agent_id, run_id, metadata, "
            "1 - (embedding <=> %(q)s) AS sim")
ARCHIVED = ("archived", "expired")     # `expired`: what projections said before forgetting archived
ACTIVE_TIER = ("active",)
BOTH_TIERS = ("active",) + ARCHIVED
KEYWORD_LIMIT = 200                    # keyword candidates per query, the semantically closest first


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
    archived: bool = True                    # search the archive tier too (ranked below active memories)
    aliases: tuple[str, ...] = ()            # names the user goes by: read as "the user" in the query
    filters: Any = None                      # Mem0-style filters (projections/memory_filters.py), in SQL


def rewrite_query(query: str, aliases: tuple[str, ...] | list[str]) -> str:
    """The query as memory words it: memories say "User …" (the extractor writes facts in the third
    person), so a name the user goes by becomes "the user" ("What did Caroline paint?" asked of
    Caroline's memory → "What did the user paint?"). Whole words only, longest name first."""
    for name in sorted({a.strip() for a in aliases if a and a.strip()}, key=len, reverse=True):
        query = re.sub(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", "the user", query, flags=re.I)
    return query


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
    archived: bool = False
    agent_id: str | None = None     # the memory's scope, as the memory list shows it
    run_id: str | None = None
    metadata: dict | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Weights:
    similarity: float = 0.7
    importance: float = 0.3
    recency: float = 0.0          # × exp(-age / recency_half_life_days)
    frequency: float = 0.0        # × log1p(access_count) / log1p(100)
    recency_half_life_days: float = 30.0
    graph_score: float = 0.45     # a 1-hop SIMILAR_TO neighbour scores graph_score × its seed's score
    sim_floor: float = 0.0        # similarities are rescaled from [floor, 1] to [0, 1]
    keyword: float = 0.5          # match = 1 - (1 - sim') × (1 - keyword × bm25 / ceiling): a noisy-or
    time: float = 0.2             # + time when the memory's event time falls on a date the query names
    redundancy: float = 1.0       # − redundancy × max(0, cos(hit, a better hit) − redundancy_threshold)
    redundancy_threshold: float = 0.9
    archived: float = 0.8         # an archived memory's score × this (< 1: below active ones of equal relevance)
    candidates: int = 50          # vector candidates taken before the rerank (at least 4 × k)
    graph_follows: float = 0.7    # a 1-hop FOLLOWS neighbour (said right before/after the seed) × its seed's score
    third_party: float = 0.8      # a third party's fact the question does not name × this (the user first)


def weights_from(settings) -> Weights:
    return Weights(settings.recall_w_similarity, settings.recall_w_importance, settings.recall_w_recency,
                   settings.recall_w_frequency, settings.recall_recency_half_life_days, settings.recall_graph_score,
                   settings.recall_sim_floor, keyword=settings.recall_w_keyword, time=settings.recall_w_time,
                   redundancy=settings.recall_w_redundancy, redundancy_threshold=settings.recall_redundancy_threshold,
                   archived=settings.recall_archived_penalty, candidates=settings.recall_candidates,
                   graph_follows=settings.recall_graph_score_follows, third_party=settings.recall_third_party)


# -- keyword matching with light stemming ------------------------------------------------------
# Questions and memories inflect the same word differently ("dance" / "dancing", "turtles" /
# "turtle", "painted" / "painting"); the stored `terms` are the plain tokens. A crude English
# suffix stripper (no dictionary) puts inflections on one stem for BM25, and the GIN prefilter is
# given every inflection of a query word that strips back to the same stem.

_SUFFIXES = (("ies", "y"), ("ied", "y"), ("ing", ""), ("edly", ""), ("ed", ""), ("ers", "er"), ("es", ""), ("s", ""),
             ("ly", ""))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    if len(word) <= 3 or not (word.isascii() and word.isalpha()):
        return word
    for suf, rep in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            word = word[: len(word) - len(suf)] + rep
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":   # running → runn → run
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):                                # dance, danced → danc
        word = word[:-1]
    return word


def inflections(word: str) -> set[str]:
    """`word` and the inflections of it that stem() maps to the same stem (for the GIN prefilter)."""
    s = stem(word)
    if s == word and not (word.isascii() and word.isalpha() and len(word) > 3):
        return {word}
    bases = {s, s + "e", word}
    if s.endswith("y"):
        bases.add(s[:-1] + "i")
    out = set()
    for b in bases:
        out.update((b, b + "s", b + "es", b + "ed", b + "ing", b + "er", b + "ers", b + "ly", b + "d"))
        if b.endswith("i"):
            out.update((b + "es", b + "ed"))
        if b and b[-1] not in "aeiouy":
            out.update((b + b[-1] + "ing", b + b[-1] + "ed", b + b[-1] + "er"))
    return {v for v in out if stem(v) == s} | {word}


def keyword_scores(query: str, terms: dict[str, list[str]]) -> dict[str, float]:
    """BM25 of each memory for the query on stemmed tokens, divided by the BM25 ceiling: an absolute
    [0, 1] scale on which a memory sharing only a common word with the query stays a weak match.
    `terms`: each memory's stored distinct tokens (the projector's `terms` column), so nothing is
    re-tokenised per query; term frequencies are taken as 1, which short memories mostly are."""
    q = [stem(t) for t in tokens(query)]
    docs = {mid: [stem(t) for t in toks] for mid, toks in terms.items()}
    docs = {mid: toks for mid, toks in docs.items() if set(q) & set(toks)}
    if not q or not docs:
        return {}
    avg = sum(map(len, docs.values())) / len(docs)
    scores = bm25(q, docs, len(docs) + 1, avg)
    ceiling = bm25_ceiling(q, docs, len(docs) + 1)
    return {mid: min(1.0, s / ceiling) for mid, s in scores.items()} if ceiling > 0 else {}


def _filters(req: RecallRequest, now: datetime) -> tuple[sql.Composable, dict]:
    where = [sql.SQL("user_id = %(u)s AND status = ANY(%(statuses)s)")]
    params: dict = {"u": req.user, "statuses": list(BOTH_TIERS if req.archived else ACTIVE_TIER)}
    if req.categories:
        where.append(sql.SQL("category = ANY(%(cats)s)"))
        params["cats"] = list(req.categories)
    if req.tags:
        where.append(sql.SQL("tags @> %(tags)s"))
        params["tags"] = list(req.tags)
    if req.max_age_hours is not None:
        where.append(sql.SQL("created_at >= %(since)s"))
        try:
            params["since"] = now - timedelta(hours=req.max_age_hours)
        except OverflowError:       # a window reaching before year 1 (an as-of near it) holds everything
            params["since"] = datetime.min.replace(tzinfo=timezone.utc)
    if req.filters:
        # in the WHERE of every candidate read (vector, keyword, expansion): filtered in SQL, by the
        # (user_id, agent_id …) btrees and the metadata GIN index, never after ranking
        condition, named = compile_filter_named(req.filters)
        where.append(condition)
        params.update(named)
    return sql.SQL(" AND ").join(where), params


def index_scope(cur, models: ReadModels, user: str) -> sql.Composable:
    """The condition that lets a user's `ORDER BY embedding <=>` use the index that holds their rows.

    The HNSW index is partial (`WHERE ann`, projections/pg.py): it holds the rows of users with at
    least vector_index_min_rows memories, and all of a user's rows carry the same flag, so adding
    it changes no result. Written as a literal (not a parameter) so the planner can prove the
    partial index's predicate from it; a flagged user then gets the HNSW scan or, where the
    planner finds it cheaper, the exact one, an unflagged user the btree and an exact sort.
    """
    if models.as_of is not None:
        return sql.SQL("")          # the past (query/as_of.py) is scanned exactly: versions carry no index flag
    cur.execute(models.q("SELECT ann FROM {s}.memory_items WHERE user_id = %s LIMIT 1"), (user,))
    row = cur.fetchone()
    flagged = bool(row and (row["ann"] if isinstance(row, dict) else row[0]))
    return sql.SQL(" AND ann") if flagged else sql.SQL(" AND NOT ann")


@timed_query("recall")   # memstream_query_seconds{query="recall"}
def recall(models: ReadModels, req: RecallRequest, weights: Weights | None = None,
           now: datetime | None = None) -> list[RecallHit]:
    w = weights or weights_from(models.settings)
    now = now or datetime.now(timezone.utc)
    original_query = req.query
    if req.aliases:
        req = replace(req, query=rewrite_query(req.query, req.aliases))
    q = np.asarray(req.query_embedding if req.query_embedding is not None else models.embed_query(req.query),
                   dtype=np.float32)
    where, params = _filters(req, now)
    # law 8 (docs/concepts.md#laws): a keyed memory that states another value than its slot's current one is history, never
    # recalled as current, even where no memory.superseded was recorded for it (memories decided
    # before the slot superseded; profile.py applies the same rule) — one primary-key probe a row
    where = where + sql.SQL(" AND NOT ") + models.slot_moved_on("memory_items")
    params["q"] = q
    cols = columns(models.settings.decay_rate, now)
    n_candidates = max(req.k * 4, w.candidates)
    qterms = sorted({v for t in set(tokens(req.query)) for v in inflections(t)})
    windows = date_ranges(req.query) if w.time else []
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur, conn.transaction():
        # One snapshot for the user's index flag and every read below: the projector flags all of
        # a user's rows in one transaction, which must not fall between the flag and a read.
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cur.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(models.settings.recall_ef_search)))
        indexed = index_scope(cur, models, req.user)
        # 1. vector search, user-scoped: the partial HNSW index (iterative scan) for a user whose
        #    rows it holds, else (or where the planner prefers it) an exact scan of the user's rows
        cur.execute(models.statement(models.q("SELECT " + cols + " FROM {items} AS memory_items WHERE ")
                    + where + indexed + sql.SQL(" ORDER BY embedding <=> %(q)s LIMIT %(n)s")),
                    {**params, "n": n_candidates}, binary=True)
        rows = {r["memory_id"]: r for r in cur.fetchall()}
        # 2. keyword path: names, numbers and dates that vectors miss (any inflection of a query word)
        keyword: dict[str, float] = {}
        if qterms:
            cur.execute(models.statement(models.q("SELECT " + cols + " FROM {items} AS memory_items WHERE ") + where + indexed
                        + sql.SQL(" AND terms && %(terms)s ORDER BY embedding <=> %(q)s LIMIT %(n)s")),
                        {**params, "terms": qterms, "n": KEYWORD_LIMIT}, binary=True)
            found = {r["memory_id"]: r for r in cur.fetchall()}
            keyword = keyword_scores(req.query, {mid: r["terms"] for mid, r in found.items()})
            for mid in keyword:
                rows.setdefault(mid, found[mid])
        # 3. time path: dates the query names ("on 8 May, 2023", "in June 2022") select memories
        #    by event time (the btree on (user_id, created_at)), best similarity first
        if windows:
            within = sql.SQL(" OR ").join(sql.SQL("(created_at >= {} AND created_at < {})").format(sql.Literal(a), sql.Literal(b))
                                          for a, b in windows)
            cur.execute(models.statement(models.q("SELECT " + cols + " FROM {items} AS memory_items WHERE ") + where + indexed
                        + sql.SQL(" AND (") + within + sql.SQL(") ORDER BY embedding <=> %(q)s LIMIT %(n)s")),
                        {**params, "n": n_candidates},
                        binary=True)
            for r in cur.fetchall():
                rows.setdefault(r["memory_id"], r)
        # 4. rerank
        hits = {mid: _score(r, keyword.get(mid), w, now, any(a <= r["created_at"] < b for a, b in windows))
                for mid, r in rows.items()}
        ranked = sorted(hits.values(), key=lambda h: (-h.score, h.memory_id))
        # 5. diversify: a hit nearly identical to a better one says little new (restatements, a merge's
        #    parts); it is lowered by how far its cosine to the closest better hit exceeds the threshold
        if w.redundancy and len(ranked) > 1:
            ranked = _diversify(ranked, {mid: r["embedding"] for mid, r in rows.items()}, w,
                                max(2 * req.k, 40))
            hits = {h.memory_id: h for h in ranked}
        # 6. 1-hop graph expansion from the best hits, in the same snapshot: a neighbour scores its
        #    edge's weight × its seed's score, or its own score if that is higher (merge, dedup)
        if req.expand and ranked:
            for hit in _expand(cur, models, ranked[: min(5, req.k)], where, params, w, cols):
                if hit.memory_id not in hits or hit.score > hits[hit.memory_id].score:
                    hits[hit.memory_id] = hit
            ranked = sorted(hits.values(), key=lambda h: (-h.score, h.memory_id))
    # 7. the user first: a third party's fact ("User's friend Tom lives in Paris") ranks below the
    #    user's own unless the question names that person (domain/subjects.py)
    if w.third_party < 1.0:
        ranked = _user_first(ranked, req.query, original_query, w.third_party)
    hits = ranked
    if req.min_score is not None:
        hits = [h for h in hits if h.score >= req.min_score]
    return hits[: req.k]


def _user_first(ranked: list[RecallHit], query: str, original_query: str, factor: float) -> list[RecallHit]:
    """Third parties' facts the question does not name, scored × factor; the order re-sorted."""
    changed = False
    for h in ranked:
        about = third_party(h.content)
        if about and not (question_names(query, *about) or question_names(original_query, *about)):
            h.score = round(h.score * factor, 6)
            h.why["third_party"] = about[0]
            changed = True
    return sorted(ranked, key=lambda h: (-h.score, h.memory_id)) if changed else ranked


def _diversify(ranked: list[RecallHit], vectors: dict, w: Weights, window: int) -> list[RecallHit]:
    """Greedy: repeatedly take the best of the top `window` hits after its redundancy penalty
    against those already taken. The penalised scores come out non-increasing; hits past the
    window keep their order below."""
    head, tail = ranked[:window], ranked[window:]
    E = np.asarray([_array(vectors[h.memory_id]) for h in head], dtype=np.float32)
    base = np.asarray([h.score for h in head])
    closest = np.full(len(head), -1.0)
    left = list(range(len(head)))
    out: list[RecallHit] = []
    while left:
        pen = w.redundancy * np.maximum(0.0, closest[left] - w.redundancy_threshold)
        vals = base[left] - pen
        j = int(np.argmax(vals))
        i = left.pop(j)
        h = head[i]
        if pen[j] > 0:
            h.score = round(float(vals[j]), 6)
            h.why["redundancy"] = round(float(pen[j]), 4)
        out.append(h)
        if left:
            closest[left] = np.maximum(closest[left], E[left] @ E[i])
    # a penalised pick can fall below hits past the window: one stable sort keeps scores in order
    return sorted(out + tail, key=lambda h: (-h.score, h.memory_id))


def _array(v) -> np.ndarray:
    return v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v, dtype=np.float32)


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
    archived = r["status"] in ARCHIVED
    if archived:
        score *= w.archived
        why["archived"] = True
    return RecallHit(r["memory_id"], r["content"], r["category"], list(r["tags"]), float(r["importance"]),
                     r["created_at"].isoformat(), round(score, 6), why, archived,
                     r.get("agent_id"), r.get("run_id"), r.get("metadata"))


def _expand(cur, models: ReadModels, seeds: list[RecallHit], where: sql.Composable, params: dict,
            w: Weights, cols: str) -> list[RecallHit]:
    """The seeds' FOLLOWS and SIMILAR_TO neighbours (memory_links, kept by the pgvector projector
    from the same memory.linked events as the graph), with the same filters as every other hit:
    a filter is a promise about every result. One statement on recall's own snapshot."""
    cur.execute(models.statement(models.q(
                    "SELECT l.seed_id, l.kind, i.* FROM (SELECT memory_id AS seed_id, other_id, kind "
                    "FROM {links} AS memory_links WHERE memory_id = ANY(%(seeds)s)) AS l CROSS JOIN LATERAL (SELECT "
                    + cols + " FROM {items} AS memory_items WHERE ") + where
                + sql.SQL(" AND memory_id = l.other_id) AS i ORDER BY i.memory_id, l.seed_id, l.kind")),
                {**params, "seeds": [h.memory_id for h in seeds]}, binary=True)
    found = cur.fetchall()
    seed_score = {h.memory_id: h.score for h in seeds}
    origin: dict[str, str] = {}
    factor: dict[str, float] = {}     # the neighbour's best edge weight × seed score over its seeds
    rows: dict[str, dict] = {}
    for r in found:
        f = _edge_weight(r["kind"], w) * seed_score[r["seed_id"]]
        if f > factor.get(r["memory_id"], -1.0):
            origin[r["memory_id"]], factor[r["memory_id"]] = r["seed_id"], f
            rows[r["memory_id"]] = r
    # A neighbour scores relative to its seed: with rescaled similarities a typical direct hit
    # scores ~0.4, so the seed design's fixed 0.45 would rank neighbours above the hits they came
    # from (docs/calibration.md). An archived neighbour takes the archive's penalty as well.
    out = []
    for r in rows.values():
        archived = r["status"] in ARCHIVED
        why = {"expanded_from": origin[r["memory_id"]], "similarity": round(float(r["sim"]), 4),
               "importance": round(float(r["importance"]), 4)}
        if archived:
            why["archived"] = True
        score = factor[r["memory_id"]] * (w.archived if archived else 1.0)
        out.append(RecallHit(r["memory_id"], r["content"], r["category"], list(r["tags"]), float(r["importance"]),
                             r["created_at"].isoformat(), round(score, 6), why, archived,
                     r.get("agent_id"), r.get("run_id"), r.get("metadata")))
    return out


def _edge_weight(rel: str, w: Weights) -> float:
    """How much of its seed's score a neighbour inherits, by edge kind. A FOLLOWS neighbour was
    said right before or after the seed: the context a strong hit often needs (the other half of
    a multi-hop answer, the event a date refers to), which vector search misses because its words
    differ. A SIMILAR_TO neighbour (cosine ≥ the link threshold) is close to the seed by
    construction: the vector search finds it on its own, and the redundancy rerank lowers it on
    purpose, so it stays at the lower weight."""
    return w.graph_follows if rel == "FOLLOWS" else w.graph_score


def recalled_event(hits: list[RecallHit], source: str):
    """The `memory.recalled` event for one recall call (None when nothing was returned).

    Published by the query side (API, CLI) on the memory topic, keyed by the user: the memory
    processor refreshes the returned memories' access (count, last access) from it, and revives
    the archived ones among them (`archived_ids`) whose score (`scores`) reaches its relevance bar.
    """
    from schemas.events import MemoryRecalled
    best: dict[str, float] = {}
    for h in hits:
        best[h.memory_id] = max(best.get(h.memory_id, h.score), h.score)
    ids = list(best)
    if not ids:
        return None
    archived = list(dict.fromkeys(h.memory_id for h in hits if h.archived))
    # each hit's score, so the processor revives only the archived ones above its relevance bar
    scores = [round(best[i], 6) for i in ids]
    if archived and "archived_ids" in MemoryRecalled.model_fields:
        return MemoryRecalled(memory_ids=ids, source=source, archived_ids=archived, scores=scores)
    return MemoryRecalled(memory_ids=ids, source=source, scores=scores)
