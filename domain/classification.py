"""Classification of a fact: rules first, the LLM as fallback, else `general`.

Pure functions, no I/O. The LLM's answer is passed in (it was produced once, by the caller, and
is recorded in the event it classifies), so the same inputs always give the same category.

Rules look at the fact's content sentence in Chinese or English. They are checked in a fixed
order, most specific first: a policy ("never call after 9pm") or a tool failure ("the deploy
timed out") says more than the identity/preference words that may also appear in it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("identity", "preference", "fact", "episodic", "tool_failure", "policy", "general")

# Kinds of statement the offline statement channel (domain/statements.py) recognises,
# each with the category it files under and its base importance. The category vocabulary above is
# part of the event contract (schemas/events.py `Category`, shared by every memory event), so a
# statement's finer kind travels as its slot_hint ("occupation", "event", "plan", …) instead of
# widening that contract: profile-by-category and recall filters keep working unchanged, and
# the kind is still there for anyone who wants it.
STATEMENT_KINDS: dict[str, tuple[str, float]] = {
    "health": ("fact", 0.85),          # conditions, injuries, diets: what an agent must not forget
    "occupation": ("identity", 0.8),   # job, studies, workplace
    "age": ("identity", 0.8),
    "relationship": ("identity", 0.7),  # married, engaged, "my husband is…"
    "possession": ("fact", 0.65),      # pets, a house, a car
    "plan": ("episodic", 0.6),         # intentions and upcoming events
    "event": ("episodic", 0.55),       # something that happened
    "habit": ("fact", 0.5),            # routines: "I run every morning", "我每天早上跑步"
    "family": ("fact", 0.55),          # a passing mention of family or friends
    "opinion": ("preference", 0.5),    # likes, beliefs, favourites
    "feeling": ("episodic", 0.4),      # how the user feels now
    "statement": ("fact", 0.35),       # anything else the user says about themselves
}


@dataclass(frozen=True, slots=True)
class Classification:
    category: str
    tags: tuple[str, ...] = field(default_factory=tuple)
    slot_hint: str | None = None
    source: str = "default"   # "rule", "llm" or "default": who decided, for logs and tests


@dataclass(frozen=True, slots=True)
class _Pattern:
    category: str
    slot_hint: str | None
    regex: re.Pattern[str]
    tag: str | None = None    # a fixed tag, or None: the matched signal word (normalised) is the tag


def _p(category: str, slot: str | None, regex: str, tag: str | None = None) -> _Pattern:
    return _Pattern(category, slot, re.compile(regex, re.IGNORECASE), tag)


# Clause start (English): the beginning, or after punctuation, with an optional subject that
# refers to the user in a fact sentence ("User never…", "用户不吃…").
_EN_CLAUSE = r"(?:^|[,.!?;:]\s*)(?:(?:the\s+)?user\s+|please\s+|you\s+)?"

# Order matters (see the module docstring).
_PATTERNS: tuple[_Pattern, ...] = (
    # policy: standing instructions and hard constraints
    _p("policy", "constraint", r"(必须|一定要|务必|不要|不准|不许|禁止|千万别|请勿|永远不|绝不|不吃|不能吃|不喝|不能喝|忌口|过敏)", "constraint"),
    _p("policy", "constraint", _EN_CLAUSE + r"(always|never|must(?:\s+not)?|don't\s+ever|do\s+not\s+ever|"
       r"please\s+don't|please\s+do\s+not|do\s+not|don't)\b", "constraint"),
    _p("policy", "constraint", r"\b(allergic\s+to|allergy|(?:does\s+not|doesn't|don't|do\s+not|never|can't|cannot)\s+(?:eats?|drinks?)|"
       r"asks?\s+(?:not\s+to|never\s+to|to\s+always)|must\s+not|must\s+never)\b", "constraint"),
    # tool_failure: something an agent ran went wrong
    _p("tool_failure", "tool", r"\b(errors?|failed|fails|failure|failing|time[sd]?\s*out|timeouts?|exceptions?|"
       r"crash(?:ed|es)?|traceback|stack\s*trace|segfault)\b"),
    _p("tool_failure", "tool", r"(报错|失败|超时|异常|崩溃|出错|错误)"),
    # identity: who the user is
    _p("identity", "name", r"(我叫|名字(?:是|叫)|用户叫|称呼)", "name"),
    _p("identity", "location", r"(住在|搬到|来自)", "location"),
    _p("identity", "occupation", r"(职业是|工作是|是一名|在.{1,12}工作)", "occupation"),
    _p("identity", "name", r"\b(my\s+name\s+is|name\s+is|called|call\s+me)\b", "name"),
    _p("identity", "location", r"\b(lives?\s+in|living\s+in|moved\s+to|is\s+from|am\s+from|based\s+in)\b", "location"),
    _p("identity", "occupation", r"\b(works?\s+(?:as|at|for)|is\s+an?\s+\w+(?:er|or|ist|ian|ant|ent)|occupation|job\s+is)\b",
       "occupation"),
    _p("identity", "age", r"(\d{1,3}\s*岁|\b\d{1,3}\s+years?\s+old\b)", "age"),
    # preference: likes and dislikes
    _p("preference", "likes", r"(不喜欢|喜欢|讨厌|爱吃|爱喝|偏好|更喜欢|最爱)", "likes"),
    _p("preference", "likes", r"\b(likes?|loves?|enjoys?|prefers?|hates?|dislikes?|favou?rite|fond\s+of)\b", "likes"),
)


def _norm_tag(word: str) -> str:
    return re.sub(r"\s+", " ", word.strip().lower())


def classify_rules(text: str) -> tuple[str, tuple[str, ...], str | None] | None:
    """(category, tags, slot_hint) from the first matching pattern, or None when no rule applies."""
    for p in _PATTERNS:
        m = p.regex.search(text)
        if m:
            tag = p.tag or _norm_tag(m.group(1))
            return p.category, (tag,), p.slot_hint
    return None


def classify(text: str, llm_result: dict[str, Any] | tuple[Any, ...] | None = None) -> Classification:
    """Rules first, then the LLM's answer (when it names a known category), else `general`.

    `llm_result` is what the LLM said: a mapping {category, tags, slot_hint} or a tuple in that
    order; None when there was no answer (endpoint off, down, or the output was invalid).
    """
    # 1. rules: deterministic, and consistent with the rule channel's own categories
    category: str | None   # the rules' answer, else the LLM's (checked against CATEGORIES below)
    tags: tuple[str, ...] | None
    slot: str | None
    ruled = classify_rules(text)
    if ruled is not None:
        category, tags, slot = ruled
        return Classification(category, tags, slot, "rule")
    # 2. the LLM's answer, if it is usable
    if llm_result is not None:
        if isinstance(llm_result, dict):
            category, tags, slot = llm_result.get("category"), llm_result.get("tags"), llm_result.get("slot_hint")
        else:
            category, tags, slot = (tuple(llm_result) + (None, None, None))[:3]
        if category in CATEGORIES and category != "general":
            return Classification(category, tuple(str(t) for t in (tags or ())), slot or None, "llm")
    # 3. nothing better known
    return Classification("general")
