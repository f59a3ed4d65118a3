"""The rule channel of extraction: synchronous, zero-latency patterns in Chinese and English.

Each rule turns one clause of a user turn into a FactDraft with a preference-table key, a value,
a short content sentence in the turn's language, a category and an importance. Raw turns never
become memories; only these drafts (and, later, the LLM channel's) do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_STOP = r"[，,。.!！?？;；\n]"
_VALUE_ZH = rf"([^，,。.!！?？;；\n]{{1,40}}?)(?={_STOP}|$|，|而且|并且|还)"
# English values end at a clause boundary or a word that starts a new thought ("… last month").
_VALUE_EN = rf"([^,.!?;\n]{{1,60}}?)(?={_STOP}|$|\s+(?:and|but|because|since|last|next|now|today|yesterday|these days|for|with|when)\b)"


@dataclass(frozen=True, slots=True)
class FactDraft:
    rule: str
    key: str
    value: str
    content: str
    category: str
    importance: float
    slot_hint: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    pattern: re.Pattern
    key: str                 # preference key; "{v}" is replaced by the normalised value
    value: str               # preference value; "{v}" is the captured text
    content: str             # content sentence template
    category: str
    importance: float
    slot_hint: str | None = None


def _zh(name, regex, key, value, content, category, importance, slot=None):
    return _Rule(name, re.compile(regex + _VALUE_ZH), key, value, content, category, importance, slot)


def _en(name, regex, key, value, content, category, importance, slot=None):
    return _Rule(name, re.compile(r"(?i)\b" + regex + r"\s+" + _VALUE_EN), key, value, content, category, importance, slot)


# Constraints and standing instructions ("policy"): a clause that starts with the imperative.
# The look-behind keeps "I don't like…" (a preference) out of "don't …" (an instruction).
_CLAUSE_EN = r"(?im)(?:^|(?<=[,.!?;:\n]))\s*"
_CLAUSE_ZH = r"(?:^|(?<=[，,。.!！?？;；：:\n\s]))"


def _zh_clause(name, regex, key, content):
    return _Rule(name, re.compile(_CLAUSE_ZH + regex + _VALUE_ZH), key, "true", content, "policy", 0.9, "constraint")


def _en_clause(name, regex, key, content):
    return _Rule(name, re.compile(_CLAUSE_EN + regex + r"\s+" + _VALUE_EN), key, "true", content, "policy", 0.9,
                 "constraint")


def _policy(name, regex, key, content):
    return _Rule(name, re.compile(regex), key, "true", content, "policy", 0.9, "constraint")


# Order matters: constraints come first (so "Never call me Bob" is an instruction, not a name),
# and negative forms before positive ones so "我不喜欢" is not read as "喜欢".
# Constraint keys are "constraint:<kind>:<normalised value>" with value "true"; the kind is the
# same in both languages, so 我对花生过敏 and "I'm allergic to peanuts" differ only by the value.
RULES: tuple[_Rule, ...] = (
    _policy("zh.allergy", r"我对([^，,。.!！?？;；\n]{1,20}?)(?:严重|有点|有些)?过敏", "constraint:allergy:{v}", "用户对{v}过敏"),
    _zh("zh.no_eat", r"我(?:从来|从|一直|也|都)?(?:不吃|不能吃|不碰|忌口)", "constraint:no-eat:{v}", "true", "用户不吃{v}",
        "policy", 0.9, "constraint"),
    _zh("zh.no_drink", r"我(?:从来|从|一直|也|都)?(?:不喝|不能喝)", "constraint:no-drink:{v}", "true", "用户不喝{v}",
        "policy", 0.9, "constraint"),
    _zh_clause("zh.dont", r"(?:你|您)?(?:请|以后|千万|永远|绝对|再也)?(?:不要再|别再|不要|请勿|不准|不许|禁止)",
               "constraint:dont:{v}", "用户要求不要{v}"),
    _zh_clause("zh.always", r"(?:你|您)?(?:请|以后)?(?:一定要|必须|务必|总是|始终|每次都要)", "constraint:always:{v}",
               "用户要求一定要{v}"),
    _en("en.allergy", r"(?:(?:i['’]m|i am)\s+(?:very\s+|severely\s+|a bit\s+)?allergic\s+to|i have an?\s+(?:\w+\s+)?allergy\s+to)",
        "constraint:allergy:{v}", "true", "User is allergic to {v}", "policy", 0.9, "constraint"),
    _en("en.no_eat", r"(?:i (?:don['’]t|do not|never|can['’]t|cannot) eat)", "constraint:no-eat:{v}", "true",
        "User does not eat {v}", "policy", 0.9, "constraint"),
    _en("en.no_drink", r"(?:i (?:don['’]t|do not|never|can['’]t|cannot) drink)", "constraint:no-drink:{v}", "true",
        "User does not drink {v}", "policy", 0.9, "constraint"),
    # "Don't worry", "never mind" … are small talk, not instructions.
    _en_clause("en.dont", r"(?:please\s+)?(?:don['’]t ever|do not ever|never ever|never|don['’]t|do not)"
               r"(?!\s+(?:worry|mind|know|think|care|be sorry|apologi[sz]e)\b)", "constraint:dont:{v}", "User asks not to {v}"),
    _en_clause("en.always", r"(?:please\s+)?always", "constraint:always:{v}", "User asks to always {v}"),
    _zh("zh.name", r"(?:我叫|我的名字是|我的名字叫)", "name", "{v}", "用户叫{v}", "identity", 0.9, "name"),
    _zh("zh.dislike", r"我(?:不喜欢|讨厌)", "likes:{v}", "false", "用户不喜欢{v}", "preference", 0.7, "likes"),
    _zh("zh.like", r"我(?:很|非常|最|也|还)?(?:喜欢|爱)", "likes:{v}", "true", "用户喜欢{v}", "preference", 0.7, "likes"),
    _zh("zh.location", r"我(?:现在)?住在", "location", "{v}", "用户住在{v}", "identity", 0.8, "location"),
    _en("en.name", r"(?:my name is|my name's|call me|i am called|i'm called)", "name", "{v}", "User's name is {v}", "identity", 0.9, "name"),
    _en("en.dislike", r"(?:i don't like|i do not like|i dislike|i hate)", "likes:{v}", "false", "User does not like {v}", "preference", 0.7, "likes"),
    _en("en.like", r"(?:i (?:really |also )?(?:like|love|enjoy|prefer))", "likes:{v}", "true", "User likes {v}", "preference", 0.7, "likes"),
    _en("en.location", r"(?:i live in|i'm living in|i am living in|i moved to)", "location", "{v}", "User lives in {v}", "identity", 0.8, "location"),
)


def _clean(value: str) -> str:
    return value.strip().strip("\"'“”‘’「」").strip()


def _norm_key(value: str) -> str:
    return re.sub(r"\s+", " ", value.lower())


_PARTICLES = re.compile(r"[了吧啊呀啦哦喔嘛哈]+$")
_EN_PERSON = {"me": "them", "my": "their", "mine": "theirs", "myself": "themselves", "i": "they"}


def _third_person(value: str) -> str:
    """Constraint values are often instructions about the speaker ("call me after 9pm", "给我打电话");
    the content sentence is about the user, so first-person words become third-person."""
    if re.search(r"[\u4e00-\u9fff]", value):
        return value.replace("我们", "用户们").replace("我", "用户")
    return re.sub(r"(?i)\b(me|my|mine|myself|i)\b", lambda m: _EN_PERSON[m.group(1).lower()], value)


def extract_rules(text: str) -> list[FactDraft]:
    """All rule facts in a user turn, left to right, one per matched span."""
    found: list[tuple[int, FactDraft]] = []
    taken: list[tuple[int, int]] = []
    for rule in RULES:
        for m in rule.pattern.finditer(text):
            start, end = m.span()
            if any(s < end and start < e for s, e in taken):
                continue  # a more specific rule (e.g. the negative form) already claimed this span
            v = _clean(m.group(1))
            if rule.category == "policy":
                v = _PARTICLES.sub("", v)  # "不要再推荐恐怖片了" → the instruction is "推荐恐怖片"
            if not v:
                continue
            taken.append((start, end))
            found.append((start, FactDraft(
                rule=rule.name,
                key=rule.key.replace("{v}", _norm_key(v)),
                value=rule.value.replace("{v}", v),
                content=rule.content.replace("{v}", _third_person(v) if rule.category == "policy" else v),
                category=rule.category,
                importance=rule.importance,
                slot_hint=rule.slot_hint,
            )))
    return [d for _, d in sorted(found, key=lambda x: x[0])]
