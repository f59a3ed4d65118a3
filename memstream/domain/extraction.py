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


# Order matters: negative forms come before positive ones so "我不喜欢" is not read as "喜欢".
RULES: tuple[_Rule, ...] = (
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
            if not v:
                continue
            taken.append((start, end))
            found.append((start, FactDraft(
                rule=rule.name,
                key=rule.key.replace("{v}", _norm_key(v)),
                value=rule.value.replace("{v}", v),
                content=rule.content.replace("{v}", v),
                category=rule.category,
                importance=rule.importance,
                slot_hint=rule.slot_hint,
            )))
    return [d for _, d in sorted(found, key=lambda x: x[0])]
