"""The LoCoMo harness (bench/locomo.py) without services: its metric on hand-made examples, the
recall helpers it motivated (domain/text.py), loading; the real runs are
tests/test_locomo_harness.py."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from bench.locomo import DEFAULT_DATA, clean_dia_ids, coverage, parse_session_time, recall_at, summarize
from domain.text import bm25, bm25_ceiling, date_ranges


def test_coverage_is_the_share_of_evidence_turns_the_retrieved_items_cover():
    evidence = {"D1:3", "D2:8", "D5:1"}
    retrieved = [frozenset({"D1:3"}), frozenset(), frozenset({"D2:8", "D9:9"}), frozenset({"D1:3"})]
    assert coverage(evidence, []) == 0.0
    assert coverage(evidence, retrieved[:1]) == pytest.approx(1 / 3)
    assert coverage(evidence, retrieved) == pytest.approx(2 / 3)          # the repeat of D1:3 counts once
    assert coverage(evidence, retrieved + [frozenset({"D5:1"})]) == 1.0
    with pytest.raises(ValueError):
        coverage(set(), retrieved)


def test_recall_at_k_takes_the_top_k_items_only():
    ranked = [frozenset({"D1:1"}), frozenset({"D7:7"}), frozenset({"D1:2"})] + [frozenset()] * 30
    assert recall_at({"D1:1", "D1:2"}, ranked, ks=(1, 2, 3, 25)) == {1: 0.5, 2: 0.5, 3: 1.0, 25: 1.0}
    assert recall_at({"D3:3"}, ranked[:2]) == {5: 0.0, 10: 0.0, 25: 0.0}   # fewer items than k is fine


def test_summarize_means_in_percent_overall_and_per_category():
    rows = [(1, {5: 0.0, 10: 0.5, 25: 1.0}), (1, {5: 1.0, 10: 1.0, 25: 1.0}), (2, {5: 0.5, 10: 0.5, 25: 0.5})]
    s = summarize(rows)
    assert s["all"]["n"] == 3 and s["all"][5] == pytest.approx(50.0) and s["all"][10] == pytest.approx(200 / 3)
    assert s["multi-hop"] == {"n": 2, 5: 50.0, 10: 75.0, 25: 100.0}
    assert s["temporal"] == {"n": 1, 5: 50.0, 10: 50.0, 25: 50.0}


def test_evidence_ids_and_session_dates_are_cleaned():
    assert clean_dia_ids("D8:6; D9:17") == {"D8:6", "D9:17"}
    assert clean_dia_ids("D:11:26") == {"D11:26"}
    assert clean_dia_ids(["D30:05", "D"]) == {"D30:5"}
    assert clean_dia_ids("D15:3,D15:5") == {"D15:3", "D15:5"}
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert parse_session_time("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9, tzinfo=timezone.utc)


def test_date_ranges_reads_absolute_dates_months_and_years():
    day = lambda text: [(a.date().isoformat(), b.date().isoformat()) for a, b in date_ranges(text, timedelta(0))]
    assert day("What did Nate make on 9 November, 2022?") == [("2022-11-09", "2022-11-10")]
    assert day("What painting did she show on October 13, 2023?") == [("2023-10-13", "2023-10-14")]
    assert day("on the 8th of May 2023") == [("2023-05-08", "2023-05-09")]
    assert day("What is Nate organizing in June 2022?") == [("2022-06-01", "2022-07-01")]
    assert day("How many times in 2023?") == [("2023-01-01", "2024-01-01")]
    assert day("用户2023年5月8日去了哪里？") == [("2023-05-08", "2023-05-09")]
    assert day("deadline 2024-02-29") == [("2024-02-29", "2024-03-01")]
    assert day("may 2023 be kind to us") == [] and day("locker 4471") == [] and day("last week") == []
    (a, b), = date_ranges("on 9 November, 2022")                          # padded a day each side by default
    assert (a, b) == (datetime(2022, 11, 8, tzinfo=timezone.utc), datetime(2022, 11, 11, tzinfo=timezone.utc))


def test_bm25_ceiling_puts_a_full_match_at_one_and_a_common_word_low():
    docs = {"a": ["locker", "number", "4471"], "b": ["walk", "beach"], "c": ["caroline", "walk", "beach"],
            "d": ["caroline", "paint"]}
    q = ["caroline", "locker", "4471"]
    ceiling = bm25_ceiling(q, docs, len(docs) + 1)
    scores = bm25(q, docs, len(docs) + 1, sum(map(len, docs.values())) / len(docs))
    assert ceiling > 0 and scores["a"] / ceiling > 0.6 > scores["d"] / ceiling
    only = {"a": ["4471"]}
    assert math.isclose(bm25(["4471"], only, 2, 1.0)["a"] / bm25_ceiling(["4471"], only, 2), 1.0)


@pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not at {DEFAULT_DATA}")
def test_turns_load_in_order_with_their_dia_ids_times_and_captions():
    from bench.locomo import load_turns, speaker_user, turn_text
    turns = load_turns(DEFAULT_DATA, conversations=1, sessions=2)
    (cid, ts), = turns.items()
    assert [t.dia_id for t in ts[:3]] == ["D1:1", "D1:2", "D1:3"] and {t.session for t in ts} == {1, 2}
    assert all(a.time < b.time for a, b in zip(ts, ts[1:]))
    assert ts[0].time == parse_session_time("1:56 pm on 8 May, 2023")
    assert turn_text({"text": "Look!", "blip_caption": "a photo of a dog"}) == "Look! [shared a photo of a dog]"
    assert speaker_user("conv-26", "Caroline") == "locomo-conv-26-caroline"


def test_the_speakers_name_is_read_as_the_user_when_asking_their_memory():
    from query.recall import rewrite_query
    assert rewrite_query("What did Caroline paint for Melanie?", ["Caroline"]) == "What did the user paint for Melanie?"
    assert rewrite_query("Where is Nate's turtle tank?", ("Nate",)) == "Where is the user's turtle tank?"
    assert rewrite_query("Did Natalie call?", ("Nat",)) == "Did Natalie call?"      # whole words only
