"""The LoCoMo harness (bench/locomo.py): small real runs (its metric on hand-made examples:
tests/fast/test_locomo_scoring.py)."""
from __future__ import annotations

import uuid

import pytest

from bench.locomo import DEFAULT_DATA, KS, load, parse_session_time

# -- one small real run ------------------------------------------------------------------------

@pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not at {DEFAULT_DATA}")
def test_harness_runs_one_conversation_through_the_real_pipeline(stack, settings):
    from bench.locomo import main
    convs = load(DEFAULT_DATA, conversations=1, sessions=3, questions=8)
    assert convs[0].observations and convs[0].questions
    assert all(o.time.date() == parse_session_time("1:56 pm on 8 May, 2023").date()
               for o in convs[0].observations if o.session == 1)
    ns = f"{settings.namespace}_locomo_{uuid.uuid4().hex[:4]}"
    result = main(["--conversations", "1", "--sessions", "3", "--questions", "8", "--namespace", ns])
    assert result["observations"] == len(convs[0].observations)
    assert result["questions"] == len(convs[0].questions)
    assert 0 < result["memories"] <= result["observations"]
    assert result["provenance_complete"], "every observation's turns must be reachable through some memory"
    assert sum(v for k, v in result["decisions"].items() if k in ("memory.created", "memory.reinforced")) \
        == result["observations"]
    for name in ("naive", "recall"):
        r = result[name]["all"]
        assert r["n"] == result["questions"]
        assert all(0.0 <= r[k] <= 100.0 for k in KS) and r[5] <= r[10] <= r[25]
    assert result["naive"]["all"][25] > 0, "plain cosine over a few sessions finds some evidence"


# -- from turns: the whole pipeline, extraction included ---------------------------------------


@pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not at {DEFAULT_DATA}")
def test_from_turns_runs_one_conversation_through_the_whole_pipeline(stack, settings):
    from bench.locomo import main
    convs = load(DEFAULT_DATA, conversations=1, sessions=3, questions=8)
    ns = f"{settings.namespace}_lturns_{uuid.uuid4().hex[:4]}"
    result = main(["--from-turns", "--conversations", "1", "--sessions", "3", "--questions", "8", "--namespace", ns])
    assert result["questions"] == len(convs[0].questions)
    assert result["facts"] > 0 and 0 < result["memories"] <= result["facts"]
    for name in ("naive_turns", "recall", "ceiling"):
        r = result[name]["all"]
        assert r["n"] == result["questions"] and all(0.0 <= r[k] <= 100.0 for k in KS) and r[5] <= r[10] <= r[25]
    assert result["recall"]["all"][25] <= result["ceiling"]["all"][25] + 1e-9, "recall cannot beat its provenance"
    assert result["recall"]["all"][25] > 0, "some evidence turn reaches memory through extraction"
    assert result["published"] == 2 * result["turns"] and result["resumed"] == 0 and result["pipeline_started"]
    # the same namespace again: nothing is published, no pipeline runs, provenance is rebuilt from the log
    again = main(["--from-turns", "--conversations", "1", "--sessions", "3", "--questions", "8", "--namespace", ns])
    assert again["recall"] == result["recall"] and again["facts"] == result["facts"]
    assert again["published"] == 0 and again["resumed"] == 2 * result["turns"] and not again["pipeline_started"]


@pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not at {DEFAULT_DATA}")
def test_from_turns_resumes_a_run_cut_short_after_publishing_part_of_its_turns(stack, settings):
    """A run that published some turns and died before any worker read them: the rerun publishes
    only the missing turns, runs the pipeline until every stage drained, and scores every turn."""
    from bench.locomo import expected_turns, load_turns, main, publish_turns, speaker_user
    ns = f"{settings.namespace}_lresume_{uuid.uuid4().hex[:4]}"
    part = load_turns(DEFAULT_DATA, conversations=1, sessions=1)
    convs = load(DEFAULT_DATA, conversations=1, sessions=1)
    users = {c.id: {sp: speaker_user(c.id, sp) for sp in c.speakers} for c in convs}
    first = publish_turns(settings.model_copy(update={"namespace": ns}), expected_turns(part, users))
    assert first == 2 * sum(map(len, part.values()))
    result = main(["--from-turns", "--conversations", "1", "--sessions", "2", "--questions", "4", "--namespace", ns])
    assert result["resumed"] == first and result["published"] == 2 * result["turns"] - first
    assert result["pipeline_started"], "turns nobody read: the rerun must run the pipeline"
    assert result["facts"] > 0 and result["recall"]["all"]["n"] == result["questions"]
    assert result["recall"]["all"][25] <= result["ceiling"]["all"][25] + 1e-9
