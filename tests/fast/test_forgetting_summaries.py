"""The forgetting summary keeps the point (issue 30 item 4): no summary drops the object of its
sentence's main verb. Over the contents the extraction makes of the scenario fixtures' turns and of
sentences of several kinds (possession, habit, third party, plan with a date, preference, health,
English, Chinese, mixed), at the default budget and a tight one."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from domain.consolidation import summarize_content
from domain.extraction import extract_facts
from domain.propositions import proposition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"

# (content, the object's head word that must stay, a word of subordinate detail that may go or None)
KINDS = [
    ("User owns a red bicycle that User rides to work every day", "bicycle", "rides"),
    ("User's friend Tom lives in Paris and works as a chef", "Paris", "chef"),
    ("User usually goes jogging in the park before breakfast", "jogging", "breakfast"),
    ("User has two kids, Emma and Leo, who both love soccer", "kids", "soccer"),
    ("User loves spicy food, the hotter the better", "food", "hotter"),
    ("User does not like running because User has bad knees", "running", "knees"),
    ("User is allergic to peanuts (severe, since childhood)", "allergic", "childhood"),
    ("User adopted a dog named Biscuit who loves long walks (week of 2026-07-05)", "dog", "walks"),
    ("User is going to Japan for a conference (in December 2026)", "Japan", None),
    ("User bought a car (on 2026-12-02)", "car", None),
    ("User works as a data analyst in 深圳 at a company that makes drones", "analyst", "drones"),
    ("User's sister is a nurse and she loves jazz and late-night radio", "nurse", "radio"),
    ("User plays the violin in an orchestra which rehearses on Tuesdays", "violin", "Tuesdays"),
    ("User moved to Berlin last month with a friend from school", "Berlin", None),
    ("User has been learning Spanish since January, when a colleague recommended an app", "Spanish", "colleague"),
    ("User's wife 韩梅梅 is a teacher at a middle school near their home", "teacher", None),
    ("用户每天骑自行车上班，因为路上不堵车", "自行车", "堵车"),
    ("用户下周要去北京出差，住在朝阳区的酒店", "北京", "酒店"),
    ("用户喜欢爬山，尤其是秋天的香山", "爬山", "秋天"),
    ("用户养了一只猫，名字叫咪咪，今年三岁了", "猫", "三岁"),
    ("上个月，用户搬到了上海", "上海", None),
    ("用户的妹妹是护士，她很喜欢爵士乐", "护士", "爵士"),
    ("用户买了一辆车（2026-12-02）", "车", None),
    ("User 喜欢喝咖啡, especially in the morning", "咖啡", "morning"),
]


@pytest.mark.parametrize("budget", [40, 24])
@pytest.mark.parametrize("content, head, detail", KINDS)
def test_no_summary_drops_the_object_of_its_main_verb(content, head, detail, budget):
    summary = summarize_content(content, budget)
    assert head in summary, summary
    assert not summary.endswith("…"), summary            # a readable clause is never truncated mid-way
    if detail is not None and len(content) > budget:
        assert detail not in summary, summary              # what goes is the subordinate detail


def fixture_contents() -> list[str]:
    out: list[str] = []
    for f in sorted(FIXTURES.glob("*.yaml")):
        for scenario in yaml.safe_load(f.read_text(encoding="utf-8")):
            for turn in scenario["turns"]:
                at = datetime.fromisoformat(str(turn["at"]).replace("Z", "+00:00")).astimezone(UTC)
                out += [d.content for d in extract_facts(turn["text"], at=at)]
    return sorted(set(out))


@pytest.mark.parametrize("budget", [40, 16])
def test_summaries_of_the_scenario_memories_keep_subject_predicate_and_object(budget):
    contents = fixture_contents() + [c for c, _, _ in KINDS]
    assert len(contents) >= 60
    for content in contents:
        summary = summarize_content(content, budget)
        before, after = proposition(content), proposition(summary)
        assert before is not None and after is not None, (content, summary)
        assert (after.subject, after.predicate) == (before.subject, before.predicate), (content, summary)
        if not before.predicate.startswith(("be:", "have:", "not:be:", "not:have:")):  # else the head is in it
            assert not before.objects or after.objects & before.objects, (content, summary)


def test_what_has_no_clause_is_still_cut_to_the_budget():
    assert summarize_content("x" * 100, 10) == "x" * 9 + "…"
    assert summarize_content("v1.2 is the version in use", 40) == "v1.2 is the version in use"
