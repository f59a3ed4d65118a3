"""Classification, in-process (no I/O): rules first, the LLM's answer as fallback, else general."""
import pytest

from domain.classification import classify, classify_rules
from domain.extraction import extract_rules


@pytest.mark.parametrize("text, category, slot", [
    # identity
    ("我叫张三", "identity", "name"),
    ("用户住在北京", "identity", "location"),
    ("用户是一名护士", "identity", "occupation"),
    ("User's name is Alice", "identity", "name"),
    ("User lives in Paris", "identity", "location"),
    ("User works as a nurse at the city hospital", "identity", "occupation"),
    # preference
    ("用户喜欢喝咖啡", "preference", "likes"),
    ("我讨厌下雨", "preference", "likes"),
    ("User likes jazz", "preference", "likes"),
    ("User prefers dark mode", "preference", "likes"),
    # tool_failure
    ("部署脚本报错了", "tool_failure", "tool"),
    ("调用天气接口超时", "tool_failure", "tool"),
    ("The deploy failed with exit code 2", "tool_failure", "tool"),
    ("pip install raised an exception", "tool_failure", "tool"),
    ("The search API timed out", "tool_failure", "tool"),
    # policy
    ("必须用中文回答", "policy", "constraint"),
    ("不要在晚上打电话", "policy", "constraint"),
    ("禁止使用表情符号", "policy", "constraint"),
    ("用户不吃香菜", "policy", "constraint"),
    ("Always answer in English", "policy", "constraint"),
    ("Never call after 9pm", "policy", "constraint"),
    ("You must cite sources", "policy", "constraint"),
    ("Don't ever share my address", "policy", "constraint"),
    ("User is allergic to peanuts", "policy", "constraint"),
])
def test_rule_categories_in_chinese_and_english(text, category, slot):
    got = classify_rules(text)
    assert got is not None and (got[0], got[2]) == (category, slot), (text, got)
    assert got[1], "a rule classification carries at least one tag"


def test_more_specific_rules_win():
    # An instruction that mentions a name, a like or a timeout is still an instruction.
    assert classify_rules("Never call me Bob")[0] == "policy"
    assert classify_rules("请不要推荐我喜欢的歌")[0] == "policy"
    assert classify_rules("Always retry when the request times out")[0] == "policy"
    # A failure report that mentions a location is still a failure.
    assert classify_rules("Geocoding Berlin failed")[0] == "tool_failure"


def test_tool_failures_are_tagged_with_the_signal():
    assert classify_rules("The search API timed out")[1] == ("timed out",)
    assert classify_rules("部署脚本报错了")[1] == ("报错",)


def test_no_rule_for_plain_facts():
    assert classify_rules("用户上个月去东京开会") is None
    assert classify_rules("User flew to Tokyo for a conference last month") is None
    assert classify_rules("") is None


def test_every_rule_channel_fact_is_classified_as_its_own_category():
    # The rule channel and classification agree on what a rule fact is.
    text = ("我叫张三，我住在北京。我喜欢喝咖啡，我不吃香菜，我对花生过敏。"
            "My name is Alice and I live in Paris. I like jazz! I'm allergic to peanuts. Please don't call me after 9pm.")
    drafts = extract_rules(text)
    assert len(drafts) == 10
    for d in drafts:
        assert classify(d.content).category == d.category, d


# -- the order: rules, then the LLM, else general ---------------------------------------------

def test_rules_come_before_the_llm():
    c = classify("User is allergic to peanuts", {"category": "fact", "tags": ["food"], "slot_hint": None})
    assert (c.category, c.slot_hint, c.source) == ("policy", "constraint", "rule")
    c = classify("用户喜欢喝咖啡", ("episodic", ["drink"], None))
    assert (c.category, c.source) == ("preference", "rule")


def test_the_llm_decides_when_no_rule_applies():
    c = classify("User flew to Tokyo for a conference last month", {"category": "episodic", "tags": ["travel"], "slot_hint": "trip"})
    assert (c.category, c.tags, c.slot_hint, c.source) == ("episodic", ("travel",), "trip", "llm")
    c = classify("用户上个月去东京开会", ("episodic", ["出差"], None))
    assert (c.category, c.tags, c.source) == ("episodic", ("出差",), "llm")


def test_general_when_neither_rules_nor_the_llm_know():
    assert (classify("用户上个月去东京开会").category, classify("用户上个月去东京开会").source) == ("general", "default")
    assert classify("User flew to Tokyo", None).category == "general"
    # An LLM answer that is not a known category (or says "general") is no better than none.
    assert classify("User flew to Tokyo", {"category": "hobby"}).category == "general"
    assert classify("User flew to Tokyo", {"category": "general", "tags": ["x"]}).source == "default"
    assert classify("User flew to Tokyo", {}).category == "general"
