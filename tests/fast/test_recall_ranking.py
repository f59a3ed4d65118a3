"""Recall's ranking rules without services (query/recall.py): graph edge weights, keyword stems,
diversity. Recall against the real read models: tests/test_recall.py."""
from __future__ import annotations

from dataclasses import replace

import pytest

from query.recall import RecallHit, Weights, _diversify, _edge_weight, inflections, keyword_scores, stem, weights_from


def test_edge_weight_lifts_context_more_than_near_duplicates():
    w = Weights(graph_score=0.45, graph_follows=0.7)
    assert _edge_weight("FOLLOWS", w) == 0.7 and _edge_weight("SIMILAR_TO", w) == 0.45


def test_keyword_matching_folds_inflections_onto_one_stem():
    assert stem("dancing") == stem("dance") == stem("danced") == stem("dances")
    assert stem("turtles") == stem("turtle") and stem("hobbies") == stem("hobby") and stem("running") == stem("run")
    assert stem("4471") == "4471" and stem("咖啡") == "咖啡" and stem("was") == "was"
    assert {"dancing", "dances", "danced", "dance"} <= inflections("dance")    # what the GIN prefilter is given
    assert all(stem(v) == stem("turtles") for v in inflections("turtles"))
    scores = keyword_scores("What does Jon's dance make him feel?",
                            {"a": ["jon", "loves", "dancing"], "b": ["jon", "opened", "studio"], "c": ["gina", "sells", "clothes"]})
    assert scores["a"] > scores.get("b", 0) and "c" not in scores


def _hit(mid, score):
    return RecallHit(mid, mid, "fact", [], 0.5, "2026-01-01T00:00:00+00:00", score)


def test_a_near_copy_of_a_better_hit_gives_way_to_other_evidence():
    w = replace(weights_from(__import__("kernel.config", fromlist=["x"]).get_settings()),
                redundancy=1.0, redundancy_threshold=0.9)
    e1 = [1.0, 0.0, 0.0]
    near = [0.99, 0.141, 0.0]          # cos 0.99 to e1
    other = [0.0, 1.0, 0.0]
    ranked = [_hit("best", 0.60), _hit("copy", 0.58), _hit("other", 0.55)]
    out = _diversify(ranked, {"best": e1, "copy": near, "other": other}, w, window=40)
    assert [h.memory_id for h in out] == ["best", "other", "copy"]
    assert out[2].why["redundancy"] == pytest.approx(0.09, abs=1e-3) and out[2].score == pytest.approx(0.49, abs=1e-3)
    assert "redundancy" not in out[1].why
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)
