"""The rule channel of extraction: synchronous, zero-latency patterns in Chinese and English.

Each rule turns one clause of a user turn into a FactDraft with a preference-table key, a value,
a short content sentence in the turn's language, a category and an importance. Raw turns never
become memories; only these drafts (and, later, the LLM channel's) do.

extract_facts() is the whole offline channel: these rule facts plus the statement facts of
domain/statements.py (every other sentence worth keeping, in the third person), without
saying the same sentence twice. extract_rules() stays the slot-filling rules alone.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import datetime

from domain.drafts import MAX_CHARS, MAX_RULE_FACTS, FactDraft, bounded  # noqa: F401 (re-exported)
from domain import ontology
from domain.slots import slot_spans
from domain.statements import statement_spans

_STOP = r"[，,。.!！?？;；\n]"
_VALUE_ZH = rf"([^，,。.!！?？;；\n]{{1,40}}?)(?={_STOP}|$|，|而且|并且|还)"
# English values end at a clause boundary or a word that starts a new thought ("… last month").
_VALUE_EN = rf"([^,.!?;\n]{{1,60}}?)(?={_STOP}|$|\s+[-–—]+\s|\s+(?:and|but|because|since|last|next|now|today|yesterday|these days|for|with|when)\b)"


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    key: str                 # preference key; "{v}" is replaced by the normalised value
    value: str               # preference value; "{v}" is the captured text
    content: str             # content sentence template
    category: str
    importance: float
    slot_hint: str | None = None


def _zh(name: str, regex: str, key: str, value: str, content: str, category: str, importance: float,
        slot: str | None = None) -> _Rule:
    return _Rule(name, re.compile(regex + _VALUE_ZH), key, value, content, category, importance, slot)


def _en(name: str, regex: str, key: str, value: str, content: str, category: str, importance: float,
        slot: str | None = None) -> _Rule:
    return _Rule(name, re.compile(r"(?i)\b" + regex + r"\s+" + _VALUE_EN), key, value, content, category, importance, slot)


# Constraints and standing instructions ("policy"): a clause that starts with the imperative.
# The look-behind keeps "I don't like…" (a preference) out of "don't …" (an instruction).
# Only blanks follow a clause start ([ \t]*, not \s*): with \s* every newline of a run was a
# clause start whose \s* swallowed the rest of the run, quadratic (a 20 KB run of newlines took
# 53 s); a line start is already a clause start by (?m)^.
_CLAUSE_EN = r"(?im)(?:^|(?<=[,.!?;:\n]))[ \t]*"
_CLAUSE_ZH = r"(?:^|(?<=[，,。.!！?？;；：:\n\s]))"


def _zh_clause(name: str, regex: str, key: str, content: str) -> _Rule:
    return _Rule(name, re.compile(_CLAUSE_ZH + regex + _VALUE_ZH), key, "true", content, "policy", 0.9, "constraint")


def _en_clause(name: str, regex: str, key: str, content: str) -> _Rule:
    return _Rule(name, re.compile(_CLAUSE_EN + regex + r"\s+" + _VALUE_EN), key, "true", content, "policy", 0.9,
                 "constraint")


def _policy(name: str, regex: str, key: str, content: str) -> _Rule:
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
    # Nor is encouragement ("Don't give up!", "never give up", "don't be afraid to…") or a clause whose
    # subject was left out ("Never been to Paris", "Always here to help", "Always been interested…").
    _en_clause("en.dont", r"(?:please\s+)?(?:don['’]t ever|do not ever|never ever|never|don['’]t|do not)"
               r"(?!\s+(?:worry|mind|know|think|care|be sorry|apologi[sz]e|give up|quit|forget|hesitate|miss|doubt|"
               r"panic|stress|sweat|lose (?:hope|faith)|stop (?:believing|trying|dreaming)|say never|let (?:it|that|this|"
               r"anything|anyone|them|the|fear|others|people)|be (?:afraid|scared|shy|too hard|so hard|discouraged)|feel|"
               r"ever|you|they|we|i|it|he|she|been|had|got|saw|went|did|was|were|[a-z]+ed)\b)",
               "constraint:dont:{v}", "User asks not to {v}"),
    _en_clause("en.always", r"(?:please\s+)?always"
               r"(?!\s+(?:here|there|been|had|up|good|happy|glad|great|nice|fun|ready|welcome|calm|so|a|an|the|"
               r"[a-z]+ed|[a-z]+ing|love|loved)\b)", "constraint:always:{v}", "User asks to always {v}"),
    _zh("zh.name", r"(?:我叫|我的名字是|我的名字叫)", "name", "{v}", "用户叫{v}", "identity", 0.9, "name"),
    # "我最喜欢的运动是羽毛球": the thing liked is after 是, not after 喜欢 (the key was "likes:的运动是羽毛球").
    _zh("zh.favourite", r"我(?:最|最最)(?:喜欢|爱)的[^，,。.!！?？;；\n是]{1,8}(?:是|就是)", "likes:{v}", "true", "用户最喜欢{v}",
        "preference", 0.7, "likes"),
    # Polarity (domain/ontology.py): a later "不喜欢 / 受不了 / 不再喜欢" supersedes "喜欢" of the same thing.
    _zh("zh.dislike", r"(?:我|(?<=[，,；;])(?:现在|已经|但是|但|可是|不过)?)(?:现在|已经|真的|实在|也|越来越|最|其实|一直)?(?:" + ontology.words_alternation(ontology.DISLIKES_ZH)
        + r")", "likes:{v}", "false", "用户不喜欢{v}", "preference", 0.7, "likes"),
    _zh("zh.like", r"我(?:很|非常|最|也|还|现在|真的|特别|超|一直)?(?:喜欢|爱|喜爱|热爱|迷上了|爱上了)(?!的)", "likes:{v}", "true",
        "用户喜欢{v}", "preference", 0.7, "likes"),
    _Rule("zh.location", re.compile(r"我(?:们)?(?:现在|目前|已经|刚|刚刚|最近|上个月|去年)?(?:住在|搬到了|搬到|搬去了|搬去|定居在|"
                                    r"生活在)([\u4e00-\u9fffA-Za-z][\u4e00-\u9fffA-Za-z ]{0,20}?)(?=工作|上班|生活|读书|定居|"
                                    r"住|了|啦|" + _STOP + r"|$|，|而且|并且|还)"),
          "location", "{v}", "用户住在{v}", "identity", 0.8, "location"),
    _en("en.name", r"(?:my name is|my name's|call me|i am called|i'm called)", "name", "{v}", "User's name is {v}", "identity", 0.9, "name"),
    _en("en.dislike", r"(?:i(?:\s+(?:really|just|also|still|honestly|now|kind of|kinda|totally|absolutely|actually|"
        r"seriously|completely|pretty much|increasingly))*(?:\s+|(?=['’]))(?:" + ontology.words_alternation(ontology.DISLIKES_EN).replace("'", "['’]")
        + r"))", "likes:{v}", "false", "User does not like {v}", "preference", 0.7, "likes"),
    _en("en.like", r"(?:i (?:really |also |now |still |just |absolutely |totally |actually )?(?:like|love|enjoy|prefer))",
        "likes:{v}", "true", "User likes {v}", "preference", 0.7, "likes"),
    # "we" moved / live: the user's household, the user included ("We moved to Berlin last month")
    _en("en.location", r"(?:(?:i|we)(?:\s+(?:now|currently|still|just|recently|finally|actually))*\s+(?:live in|moved to|moved back to|"
        r"relocated to)|(?:i(?:'m|’m| am)|we(?:'re|’re| are))(?:\s+now|\s+currently)?\s+(?:living|based) in|"
        r"(?:i|we)(?:'ve|’ve| have)?(?:\s+just|\s+recently)?\s+moved from [^,.;!?]{1,40}? to)", "location", "{v}", "User lives in {v}", "identity", 0.8, "location"),
)


_TRAILING_EN = re.compile(r"(?i)(?:\s+(?:as well|too|also|either|though|anymore|any more|any longer|these days|"
                          r"now|lately|at all|again|nowadays))+$")


# Words without which a rule cannot match (checked as substrings of the lower-cased turn, which
# is far cheaper than running the pattern): a turn pays only for the rules it may fire.
_GATES: dict[str, tuple[str, ...]] = {
    "zh.allergy": ("过敏",), "zh.no_eat": ("不吃", "不能吃", "不碰", "忌口"), "zh.no_drink": ("不喝", "不能喝"),
    "zh.dont": ("不要", "别再", "请勿", "不准", "不许", "禁止"),
    "zh.always": ("一定要", "必须", "务必", "总是", "始终", "每次都要"),
    "en.allergy": ("allerg",), "en.no_eat": ("eat",), "en.no_drink": ("drink",),
    "en.dont": ("never", "don", "do not"), "en.always": ("always",),
    "zh.name": ("我叫", "名字"), "zh.favourite": ("最喜欢的", "最爱的"),
    "zh.dislike": ("不喜欢", "讨厌", "受不了", "不爱", "厌倦", "烦透"), "zh.like": ("喜欢", "爱"),
    "zh.location": ("住在", "搬到", "搬去", "定居", "生活在"),
    "en.name": ("name", "call"), "en.dislike": ("like", "hate", "stand", "enjoy", "love", "into", "fan", "tired", "sick",
                                                "done", "detest", "loathe"),
    "en.like": ("like", "love", "enjoy", "prefer"),
    "en.location": ("live", "living", "moved", "relocated", "based"),
}


def _clean(value: str) -> str:
    """The captured value without quotes or a trailing "as well"/"too" ("allergic to cats too")."""
    return _TRAILING_EN.sub("", value.strip().strip("\"'“”‘’「」").strip())


# The thing a preference is about, without the verb that consumes it: "喜欢喝咖啡" and "不喜欢咖啡了",
# "I love drinking coffee" and "I don't like coffee" are the same slot (likes:咖啡, likes:coffee).
_LIGHT_VERB = re.compile(r"^(?:喝|吃|玩|看|听|打|踢)(?=[\u4e00-\u9fff]{2})|^(?:drinking|eating|playing|watching|"
                         r"listening to|reading|having)\s+(?=\S)")


def _norm_key(value: str) -> str:
    return _LIGHT_VERB.sub("", re.sub(r"\s+", " ", value.lower()))


# "I love how you…", "I like your turtles", "I'd love to hear", "I love that": the object is a
# demonstrative, a clause or the other person's — not a thing the user likes (the statement channel
# may still keep the sentence as an opinion).
_NOT_A_THING = re.compile(r"(?i)(?:你|您)|(?:that|this|how|what|when|where|why|your|you|is|was|"
                          r"the (?:idea|thought|way)|every day|makes|made|are|were|has|have)\b|to (?:hear|see|know|read)\b|"
                          r"to$|"
                          # a bare verb whose object the value cut off ("I love spending time with the
                          # friends I have" is not likes:spending time; the statement keeps it whole)
                          r"(?:spending time|spending|playing|doing|being|going|having|getting|making|seeing|"
                          r"hanging out|trying|taking|sharing|helping|spending it)$")
# "I love their work", "I love having them around", "我喜欢他的画": a thing that is someone's the
# turn named elsewhere. Alone, "User likes their work" is a fragment and its slot names nothing;
# the statement channel keeps the sentence with what it leans on.
_POINTS_OUT = re.compile(r"(?i)\b(?:it|its|them|they|their|theirs|his|him|he|her|hers|she|these|those)\b|(?<![\w'’])['’]em\b|[他她它]")
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
    return [d for _, _, d in rule_spans(text)]


def rule_spans(text: str) -> list[tuple[int, int, FactDraft]]:
    """(start, end, draft) of each rule fact in the first MAX_CHARS characters, left to right."""
    text = bounded(text)
    low = text.lower()
    found: list[tuple[int, int, FactDraft]] = []
    starts: list[int] = []          # claimed spans, sorted and disjoint: an overlap test is two look-ups
    ends: list[int] = []
    for rule in RULES:
        gate = _GATES.get(rule.name)
        if gate and not any(g in low for g in gate):
            continue
        for m in rule.pattern.finditer(text):
            start, end = m.span()
            i = bisect.bisect_left(starts, start)
            if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
                continue  # a more specific rule (e.g. the negative form) already claimed this span
            v = _clean(m.group(1))
            if rule.category == "policy" or rule.slot_hint == "likes":
                v = _PARTICLES.sub("", v)  # "不要再推荐恐怖片了" → the instruction is "推荐恐怖片"
            if not v or (rule.slot_hint == "likes" and (_NOT_A_THING.match(v) or _POINTS_OUT.search(m.group(1)))):
                continue
            starts.insert(i, start)
            ends.insert(i, end)
            found.append((start, end, FactDraft(
                rule=rule.name,
                key=rule.key.replace("{v}", _norm_key(v)),
                value=rule.value.replace("{v}", v),
                # the content is about the user in the third person, the thing liked too ("User likes
                # running their own studio", not "… my own studio"); the slot's key keeps the words
                # as said, so a later statement of the same thing finds the same slot
                content=rule.content.replace("{v}", _third_person(v) if rule.category == "policy" or rule.slot_hint == "likes" else v),
                category=rule.category,
                importance=rule.importance,
                slot_hint=rule.slot_hint,
            )))
    # The ontology's other single-valued slots (occupation, employer, role, school, relationship
    # status, diet, a self-introduction, the polarity of possession and habits): domain/slots.py.
    for start, end, draft in slot_spans(text):
        i = bisect.bisect_left(starts, start)
        if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            continue
        starts.insert(i, start)
        ends.insert(i, end)
        found.append((start, end, draft))
    return sorted(found, key=lambda x: x[0])[:MAX_RULE_FACTS]


def _residual_words(sentence: str) -> int:
    """How much a sentence says besides its rule facts: English content words, or CJK characters
    other than 我 and particles (a crude count, enough to tell "nothing more" from "more")."""
    from domain.text import STOP
    cjk = re.findall(r"[\u3400-\u9fff]", sentence)
    if cjk:
        return sum(1 for c in cjk if c not in "我你他她们的了是也都很和还而且并就吧啊呢吗") // 2   # ~2 characters a word
    return sum(1 for w in re.findall(r"[a-z0-9][a-z0-9']*", sentence.lower())
               if w not in STOP and w not in {"i'm", "i've", "so", "too", "now", "really", "also", "very"})


def extract_facts(text: str, at: datetime | None = None, reply_to: str | None = None) -> list[FactDraft]:
    """Everything worth keeping from a user turn without an LLM: the rule facts (slots: name,
    location, likes, constraints), then the statement facts (domain/statements.py) of
    sentences the rules did not already say. A sentence whose rule facts leave fewer than two
    content words besides them ("I'm allergic to peanuts.", "我对花生过敏，我喜欢喝咖啡") yields no
    statement too; one with more to say ("I live in Paris with my husband and two kids") yields both.
    `at` is the turn's event time, for dates like "last week"; `reply_to` the question the turn
    answers (domain/reply_context.py), kept with a statement that leans on it."""
    rules = rule_spans(text)
    rule_starts = [s for s, _, _ in rules]
    out: list[tuple[int, FactDraft]] = [(s, d) for s, _, d in rules]
    for start, end, draft in statement_spans(text, at, reply_to):
        lo = max(0, bisect.bisect_left(rule_starts, start) - 1)      # rule spans are disjoint and sorted
        hi = bisect.bisect_left(rule_starts, end)
        inside = [(s, e) for s, e, _ in rules[lo:hi] if s < end and start < e]
        if inside:
            rest, pos = [], start
            for s, e in sorted(inside):
                rest.append(text[pos:max(pos, s)])
                pos = max(pos, e)
            rest.append(text[pos:end])
            if _residual_words(" ".join(rest)) < 2:
                continue
        out.append((start, draft))
    return [d for _, d in sorted(out, key=lambda x: x[0])]
