"""What a memory's sentence states: subject, main predicate, object — cheaply, English and Chinese.

Consolidation merges two memories only when they state the same proposition (consolidation.py):
the same subject (the user, or a named third party: "User's friend Tom", "用户的妹妹"), the same
predicate (the main verb's lemma, with its polarity (Chinese: the first verb of a small list after
the subject, modals like 要/想 skipped); for a copula or "have", the head of what
follows: "be:nurse", "have:cat") and compatible objects (they share a content word, or a CJK
bigram, or one has none). Memory contents are the extraction's third-person sentences ("User
lives in Lisbon", "User's sister is a nurse", "用户下个月要去日本旅游（2027年1月）"), so a
handful of word lists reads them; no parser, no segmenter. Unreadable content (no words) has no
proposition: it is never merged.

Also here: whether a content is a session digest ("Conversation on 2026-12-02: User: …", the
episodes of domain/sessions.py) and the event dates a content carries ("(on 2026-12-02)",
"（2027年1月）"). Pure and linear (fixed alternations, no nested repetition), cached per content.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from domain.ontology import PEOPLE_ZH

_DIGEST = re.compile(r"^Conversation on \d{4}-\d{2}-\d{2}: ")
# Dates the extraction writes into a content: ISO days, "May 2026", "2026年7月(3日)".
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{4}年\d{1,2}月(?:\d{1,2}日)?|(?:January|February|March|April|May|June|July|"
                   r"August|September|October|November|December) \d{4}")
# The date parenthetical the extraction appends: "(on 2026-11-28)", "(week of …)", "（2027年1月）".
DATE_TAIL = re.compile(r"\s*[(（][^()（）]{0,40}\d{4}[^()（）]{0,20}[)）]\s*$")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD_EN = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+|[\u3400-\u9fff\uf900-\ufaff]+")

# -- English -------------------------------------------------------------------------------------
_ADVERBS = frozenset("also now still just really usually often always sometimes currently recently finally actually "
                     "already even mostly generally normally regularly rarely seldom newly officially happily "
                     "definitely totally absolutely very so".split())
_NEGATIONS = frozenset("not never no n't doesn't don't didn't isn't aren't wasn't weren't won't can't cannot "
                       "hasn't haven't hadn't longer".split())
_MODALS = frozenset("do does did will would can could should may might must shall".split())
_BE = frozenset("is are am was were be been being 's".split())
_HAVE = frozenset("has have had having".split())
_DETERMINERS = frozenset("a an the their his her its our my your some any one two three four five several many "
                         "few more most this that these those another other".split())
FUNCTION_WORDS = _DETERMINERS | _ADVERBS | _NEGATIONS | _MODALS | _BE | _HAVE | frozenset(
    "user user's they them he she it and or but to of in on at for with as by from about into over after before "
    "during since until than then there here who which that when where while because so if".split())

# -- Chinese -------------------------------------------------------------------------------------
# Verbs a memory's clause turns on, longest first so that 住在 wins over 住, 喜欢 over 喜.
_VERBS_ZH = tuple(sorted((
    "喜欢 爱 讨厌 受不了 住在 住 搬到 搬 是 叫 有 养 领养 收养 去 来 回 工作 上班 上学 学习 学 读 研究 "
    "吃 喝 买 卖 骑 开 打 玩 做 当 参加 结婚 离婚 单身 已婚 订婚 跑 跑步 游泳 看 听 写 练 教 生 戒 "
    "得了 患有 过敏 毕业 加入 辞职 换 用 穿 带 种 弹 画 唱 跳 旅游 旅行 出差 生病 怀孕").split(), key=len, reverse=True))
_NEG_ZH = ("不再", "没有", "不", "没", "别", "未")
# 在 is a verb ("用户在北京") only when no other verb follows: mostly it is "at" ("在公司工作").
_WEAK_VERBS_ZH = ("在",)
# A third party named after 用户 ("用户哥哥住在罗马", "用户的男朋友是医生"): the ontology's people words,
# plus cousins it does not list.
_RELATIONS_ZH = tuple(sorted(set(PEOPLE_ZH) | {"表哥", "表姐", "表弟", "表妹", "堂哥", "堂姐", "好友", "太太"},
                             key=len, reverse=True))
# Particles and measure words: left out of the object ("一辆车" → 车).
_FILLER_ZH = frozenset("了的一个只辆位家条件张把种些台套双对头匹着过很也还最")


@dataclass(frozen=True, slots=True)
class Proposition:
    subject: str                 # "user", "user's friend tom", "user's 妹妹" (用户的妹妹)
    predicate: str               # "live", "not:like", "be:nurse", "have:cat", "去", "not:喜欢"
    objects: frozenset[str]      # content words (lemmas) or CJK bigrams after the predicate

    def same(self, other: Proposition) -> bool:
        """Same subject, same predicate, compatible objects (shared word, or one side has none)."""
        return (self.subject == other.subject and self.predicate == other.predicate
                and (not self.objects or not other.objects or bool(self.objects & other.objects)))


def is_digest(content: str) -> bool:
    """A session digest (an episode: what a conversation was about), not a fact."""
    return bool(_DIGEST.match(content))


def event_dates(content: str) -> frozenset[str]:
    return frozenset(_DATE.findall(content))


def lemma(word: str) -> str:
    """A cheap English lemma: plural and third-person -s off ("lives" → "live", "studies" → "study")."""
    w = word.lower().replace("’", "'")
    if w in ("goes", "does"):
        return w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("es") and w[-3] in "sxz" or w.endswith(("ches", "shes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


@lru_cache(maxsize=4096)
def proposition(content: str) -> Proposition | None:
    """The proposition a memory's sentence states (its first sentence), or None when unreadable."""
    text = DATE_TAIL.sub("", " ".join(content.split()))
    if not text:
        return None
    zh = text.find("用户")
    user = re.search(r"(?i)\buser\b", text)
    if zh >= 0 and (user is None or zh < user.start()):
        return _zh(text[zh:])
    if user is not None:
        return _en(text[user.start():])
    if _CJK.search(text) and not re.search(r"[A-Za-z]{3,}", text[:12]):
        return _zh(text)
    return _en(text)


def _en(text: str) -> Proposition | None:
    raw = _WORD_EN.findall(text)
    words = [w.lower().replace("’", "'") for w in raw]
    if not words:
        return None
    # subject: "user", "user's <relation> [Name …]", or a name ("Tom")
    i = 1
    if words[0] in ("user's", "users'"):
        while i < len(words) and (i == 1 or raw[i][:1].isupper() or _CJK.match(raw[i])) and words[i] not in _BE:
            i += 1
    elif words[0] != "user":
        while i < len(words) and raw[i][:1].isupper():
            i += 1
    subject = " ".join(words[:i])
    neg = False
    while i < len(words) and (words[i] in _ADVERBS or words[i] in _MODALS or words[i] in _NEGATIONS):
        neg = neg or words[i] in _NEGATIONS
        i += 1
    if i >= len(words):
        return Proposition(subject, "", frozenset())
    verb = words[i]
    if _CJK.match(raw[i]):                       # "User 喜欢喝咖啡": the Chinese run holds verb and object
        zh = _zh("用户" + raw[i])
        if zh is not None:
            rest = frozenset(lemma(w) for w in words[i + 1:] if w not in FUNCTION_WORDS and not w.isdigit())
            return Proposition(subject, ("not:" if neg else "") + zh.predicate, zh.objects | rest)
    if verb in _BE or verb in _HAVE:
        j = i + 1
        while j < len(words) and (words[j] in _ADVERBS or words[j] in _NEGATIONS):
            neg = neg or words[j] in _NEGATIONS
            j += 1
        nxt = words[j] if j < len(words) else ""
        if nxt in ("been", "being") or (len(nxt) > 4 and nxt.endswith(("ing", "ed"))):
            i = j + (nxt in ("been", "being"))    # an auxiliary: the verb comes next
            verb = words[i] if i < len(words) else nxt
            pred = verb_lemma(verb)
        else:
            while j < len(words) and words[j] in _DETERMINERS:
                j += 1
            head = lemma(words[j]) if j < len(words) else ""
            pred = ("be:" if verb in _BE else "have:") + head
            i = j
    else:
        pred = verb_lemma(verb)
    objects = frozenset(lemma(w) for w in words[i + 1:] if w not in FUNCTION_WORDS and not w.isdigit())
    return Proposition(subject, ("not:" if neg else "") + pred, objects)


def verb_lemma(verb: str) -> str:
    if len(verb) > 5 and verb.endswith("ing"):
        return verb[:-3]
    return lemma(verb)


def _earliest_longest(found: tuple[int, str]) -> tuple[int, int]:
    return found[0], -len(found[1])


def _zh(text: str) -> Proposition | None:
    clause = re.split(r"[，,。！？!?；;：:]", text, maxsplit=1)[0]
    if not clause:
        return None
    if clause.startswith("用户"):
        of = 3 if clause.startswith("用户的") else 2
        rel = next((r for r in _RELATIONS_ZH if clause.startswith(r, of)), "")
        if not rel and of == 3:
            rel = clause[3:5]                     # 用户的 + an attribute (职位, 生日) or another relation
        subject, rest = ("用户的" + rel if rel else "用户"), clause[of + len(rel):]
    else:
        first = min(((clause.find(v), v) for v in _VERBS_ZH if clause.find(v) > 0), default=(min(2, len(clause)), ""),
                    key=_earliest_longest)
        subject, rest = clause[: first[0]], clause[first[0]:]
    at, verb = min(((rest.find(v), v) for v in _VERBS_ZH if v in rest), default=(-1, ""), key=_earliest_longest)
    if at < 0:
        at, verb = min(((rest.find(v), v) for v in _WEAK_VERBS_ZH if v in rest), default=(-1, ""), key=_earliest_longest)
    if at < 0:
        at, verb = 0, rest[:2]
    neg = any(rest[:at].endswith(n) for n in _NEG_ZH)
    after = rest[at + len(verb):]
    objects: frozenset[str] = frozenset()
    for run in re.findall(r"[\u3400-\u9fff\uf900-\ufaff]+", after):
        run = "".join(c for c in run if c not in _FILLER_ZH)
        objects |= {run[k:k + 2] for k in range(len(run) - 1)} if len(run) > 1 else set(run)
    latin = frozenset(lemma(w) for w in re.findall(r"[A-Za-z]{2,}", after) if w.lower() not in FUNCTION_WORDS)
    subject = "user's " + subject[3:] if subject.startswith("用户的") else "user" if subject == "用户" else subject
    return Proposition(subject, ("not:" if neg else "") + verb, objects | latin)
