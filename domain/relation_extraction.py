"""The offline relation extractor (#26): one user turn → the relations it states, as `RelationDraft`s
with mentions as said (domain/entities.py). Deterministic, no LLM, pure; no I/O.

    extract_relations("My sister Ana just moved to Rome last month!", at)
    → [USER --sister--> Ana(sister), Ana(sister) --lives_in--> Rome (event_date: last month's first day)]

First person is the user. A turn is cut into sentences and clauses; a clause's subject is the user
("I", "we", "我", an elided subject), a person the turn names ("my sister Ana", "Mom", "我妹妹小美"), or
a pronoun: resolved to the turn's last-named person when there is one, else kept as
Mention(pronoun=...) for the memory processor to resolve from the session. Questions, hypotheticals
and wishes ("If I moved to Tokyo…", "I might", "I want to live in…", "我想…") state nothing.
`negated`: the clause says it does not hold ("doesn't live in"); `ended`: it stopped holding
("anymore", "no longer", "used to", "left", "moved from", "broke up", "离职", "不…了").

Bounded: it looks at drafts.bounded(text) (MAX_CHARS), at most MAX_SENTENCES sentences and
MAX_RELATIONS drafts, and every pattern is linear in its clause (no nested unbounded repetition).
bench/relations.py scores it against tests/fixtures/relations_labelled.jsonl.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from domain.drafts import bounded
from domain.entities import ROLE_WORDS_EN, ROLE_WORDS_ZH, USER, Mention, RelationDraft
from domain.text import relative_dates

MAX_SENTENCES = 64
MAX_CLAUSE_CHARS = 400
MAX_RELATIONS = 32

_Emit = Callable[[RelationDraft], None]


def _alt(words: Iterable[str]) -> str:
    ws = sorted(set(words), key=len, reverse=True)
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in ws)


_CJK = "\u3400-\u9fff\uf900-\ufaff"
_ROLE_EN = _alt(ROLE_WORDS_EN)
_ROLE_ZH = _alt(ROLE_WORDS_ZH)
_ADJ = r"(?:(?:little|big|older|younger|baby|twin|new|old|dear|late|lovely|eldest|youngest)\s+)"
_TITLE = r"(?:(?:Dr|Mr|Mrs|Ms|Prof|Aunt|Uncle)\.?\s+)"
# Words written with a capital that are not a name.
_NOT_NAME = frozenset((
    "i im i'm and but so the a an it its it's this that he she they we you my your our his her their "
    "is was are were be been just also really very too not no yes yeah ok okay oh hey hi hello well "
    "thanks thank sorry sure good fine happy tired great back home here there done ready excited glad "
    "busy nice lol haha today tomorrow yesterday now then when what where who why how if maybe "
    "monday tuesday wednesday thursday friday saturday sunday mom mum dad "
    "chinese japanese korean american british english french german italian spanish canadian mexican "
    "indian irish swedish dutch russian brazilian asian european african christian catholic muslim "
    "jewish buddhist korean-american chinese-american vegan vegetarian single married engaged divorced "
    "new old big little at in on from to with for of by ugh omg wow ooh aww btw thankfully luckily sadly "
    "unfortunately fortunately hopefully honestly basically recently finally besides meanwhile anyway plus "
    "lastly also surprisingly apparently obviously seriously literally").split())
_UP, _LOW = "A-Z\u00c0-\u00de", "a-z\u00df-\u00ff"
_NAME_EN = r"(?:[" + _UP + r"][" + _LOW + r"]+(?:-[" + _UP + r"]?[" + _LOW + r"]+|'[" + _UP + r"][" + _LOW + r"]+)?)"
_NAME_ZH = r"(?:[" + _CJK + r"]{2,3})"
_NAME = r"(?:" + _NAME_EN + r"|[" + _CJK + r"]{2,4})"
_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
             "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤欧")
# A Chinese given name right after a role word ("我闺蜜小红住在…"): 小/阿 + one character, or a common
# surname + one or two, never running into the verb that follows.
_ZH_VERBISH = "住在去搬是叫来今也很和的了工说从离一又都还就已不没要想刚才最真太被把给跟同"
_ZH_DIRECT_NAME = re.compile(r"(?:[小阿][" + _CJK + r"]|[" + _SURNAMES + r"][" + _CJK + r"]{1,2})")
_PLACE_EN = (r"(?:" + _NAME_EN + r"(?:\s+(?:" + _NAME_EN + r"|of|de|del|upon))*"
             r"|[A-Z]{2,6}|[" + _CJK + r"]{2,8})")

_PETS_EN = {"dog": "dog", "doggo": "dog", "pup": "dog", "puppy": "dog", "cat": "cat", "kitten": "cat",
            "kitty": "cat", "bunny": "rabbit", "rabbit": "rabbit", "hamster": "hamster", "parrot": "parrot",
            "horse": "horse", "turtle": "turtle", "guinea pig": "guinea pig", "snake": "snake", "fish": "fish",
            "猫": "cat", "狗": "dog", "猫咪": "cat", "小猫": "cat", "狗狗": "dog", "小狗": "dog"}
_PETS_ZH = {"猫": "cat", "猫咪": "cat", "小猫": "cat", "狗": "dog", "狗狗": "dog", "小狗": "dog", "兔子": "rabbit",
            "仓鼠": "hamster", "鹦鹉": "parrot", "乌龟": "turtle"}
_PET_EN = _alt(_PETS_EN)
_PET_ZH = _alt(_PETS_ZH)

# -- sentences, clauses -------------------------------------------------------------------------
_SENT = re.compile(r"[^.!?。！？\n]+(?:(?:(?<=\bDr)\.|(?<=\bMr)\.|(?<=\bMrs)\.|(?<=\bMs)\.|(?<=\bSt)\.|\.(?=\w))"
                   r"[^.!?。！？\n]*)*[.!?。！？]*")
_CLAUSE_CUT = re.compile(r"\s*[,;，；:：—–]\s*|\s+(?:and|but|so|because|since|though|although)\s+(?:now\s+|then\s+)?(?=(?:I|I'm|I've|"
                         r"we|we're|she|he|she's|he's|they|my|My)\b)|\s+-\s+")
_LEAD = re.compile(r"(?i)^(?:(?:hi|hey|hello|oh|ooh|wow|yeah|yes|yep|well|so|ok|okay|honestly|actually|anyway|"
                   r"btw|lol|haha|omg|guess what|fun fact|哈哈|嗯|对了|其实|话说)\b[\s,!.~]*)+")
_QUESTION = re.compile(r"[?？]\s*$|吗[。.!！]?\s*$|^(?:do|does|did|are|is|was|were|can|could|would|should|will|"
                       r"have|has|where|what|who|how|why|when)\b(?!.*\bI\s+(?:was|am|had)\b)", re.I)
_HYPO_EN = re.compile(r"(?i)\b(?:if|might|maybe|perhaps|would|wanna|want\s+to|wants\s+to|hope\s+to|hoping\s+to|"
                      r"plan\s+to|planning|thinking\s+(?:about|of)|going\s+to|gonna|will|should|could|someday|"
                      r"one\s+day|wish|dream\s+of|considering)\b|\b(?:I|we|you|she|he|they)'(?:d|ll)\b")
_HYPO_ZH = re.compile(r"如果|要是|假如|可能|也许|或许|想|打算|准备|计划|希望|将来|以后会|会搬")
_COUNTERFACTUAL = re.compile(r"(?i)\b(?:if|wish|imagine|suppose)\b|如果|要是|假如|假设")
_HYPO_MIXED_EN = re.compile(r"(?i)\b(?:if|might|maybe|want\s+to|going\s+to|gonna)\b")


def _sentences(text: str) -> list[str]:
    return [m.group().strip() for m in _SENT.finditer(text)][:MAX_SENTENCES]


# -- mentions -----------------------------------------------------------------------------------
@dataclass(slots=True)
class _Person:
    start: int
    end: int
    mention: Mention


_MY_ROLE = re.compile(
    r"\b(?i:my|our)\s+" + _ADJ + r"?(?P<role>(?i:" + _ROLE_EN + r"))(?![\w-])"
    r"(?:(?P<called>'s\s+name\s+is\s+|\s+is\s+called\s+|\s+(?:is\s+)?named\s+|\s+called\s+|\s+叫\s*)"
    r"(?P<cname>" + _NAME + r")|(?:\s+(?i:from)\s+(?i:college|school|high\s+school|uni|university|work|the\s+gym|"
    r"church|childhood|home|back\s+home)\s*,)?,?\s+" + _TITLE + r"?(?P<name>" + _NAME_EN + r"|[" + _CJK + r"]{2,3}(?=[\s,.!?]|$|"
    r"[" + _ZH_VERBISH + r"]))(?![\w-]))?")
_NAME_MY_ROLE = re.compile(r"(?:^|(?<=\s))(?P<name>" + _NAME_EN + r"),\s+(?i:my)\s+" + _ADJ + r"?(?P<role>(?i:"
                           + _ROLE_EN + r"))(?![\w-])")
_BARE_PARENT = re.compile(r"(?:^|(?<=[\s,]))(?P<role>Mom|Mum|Dad|Mommy|Daddy|Mama|Papa)\b(?!\s*,\s*(?:I|you))")
_ZH_ROLE = re.compile(r"(?P<pre>我的|我|和|跟|同|(?i:my|our)\s+)?\s*(?P<role>" + _ROLE_ZH + r"|(?i:" + _ROLE_EN + r")(?![a-z]))"
                      r"(?:\s*(?:叫|名叫|的名字是|名字叫)\s*(?P<cname>" + _NAME_EN + r"|[" + _CJK + r"]{2,3}))?")


def _canon_name(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _persons(sentence: str) -> list[_Person]:
    out: list[_Person] = []
    for m in _MY_ROLE.finditer(sentence):
        role = ROLE_WORDS_EN.get(re.sub(r"\s+", " ", m.group("role").lower()))
        if role is None:
            continue
        name = m.group("cname") or m.group("name")
        end = m.end()
        if name and name.lower() in _NOT_NAME:
            name = None
            end = m.end("role")
        out.append(_Person(m.start(), end, Mention("person", name=name, role=role)))
    for m in _NAME_MY_ROLE.finditer(sentence):
        role = ROLE_WORDS_EN.get(re.sub(r"\s+", " ", m.group("role").lower()))
        name = m.group("name")
        if role is None or name.lower() in _NOT_NAME:
            continue
        out = [p for p in out if not (p.start >= m.start() and p.start < m.end())]
        out.append(_Person(m.start(), m.end(), Mention("person", name=name, role=role)))
    for m in _BARE_PARENT.finditer(sentence):
        if any(p.start <= m.start() < p.end for p in out):
            continue
        prev = sentence[:m.start()].rstrip().lower()
        if prev.endswith(("my", "our", "your", "his", "her", "their", "a", "the")):
            continue
        out.append(_Person(m.start(), m.end(), Mention("person", role=ROLE_WORDS_EN[m.group("role").lower()])))
    if re.search("[" + _CJK + "]", sentence):
        for m in _ZH_ROLE.finditer(sentence):
            if any(p.start <= m.start("role") < p.end for p in out):
                continue
            raw = m.group("role")
            role = ROLE_WORDS_ZH.get(raw) or ROLE_WORDS_EN.get(raw.lower())
            pre = m.group("pre")
            if role is None or (pre is None and raw not in ("妈妈", "爸爸")):
                continue
            if raw == "妈" and sentence[m.end("role"):m.end("role") + 1] == "妈":
                continue
            name = m.group("cname")
            end = m.end()
            if name is None:
                rest = sentence[m.end():]
                lm = re.match(r"\s*(" + _NAME_EN + r")\b", rest)
                if lm and lm.group(1).lower() not in _NOT_NAME and not re.match(r"\s*(?:lives?|works?|is)\b", rest):
                    name, end = lm.group(1), m.end() + lm.end()
                else:
                    zm = _ZH_DIRECT_NAME.match(rest)
                    if zm:
                        cand = zm.group()
                        while len(cand) > 2 and cand[-1] in _ZH_VERBISH:
                            cand = cand[:-1]
                        if cand[-1] not in _ZH_VERBISH:
                            name, end = cand, m.end() + len(cand)
            start = m.start("role") if pre in ("和", "跟", "同") else m.start()
            out.append(_Person(start, end, Mention("person", name=name, role=role)))
    out.sort(key=lambda p: p.start)
    return out


# -- predicates ---------------------------------------------------------------------------------
_NEG_EN = re.compile(r"(?i)\b(?:don't|doesn't|didn't|do\s+not|does\s+not|did\s+not|not|never|haven't|hasn't|"
                     r"isn't|aren't|wasn't)\b")
_ENDED_EN = re.compile(r"(?i)\b(?:anymore|any\s+more|any\s+longer|no\s+longer|used\s+to|formerly)\b")

_EN_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple((pred, re.compile(p), flag) for pred, p, flag in (
    ("move", r"(?i:\bmoved|\brelocated)\s+(?i:from)\s+(?P<o>" + _PLACE_EN + r")\s+(?i:to)\s+(?P<o2>" + _PLACE_EN + r")", ""),
    ("lives_in", r"\b(?i:live|lives|living|lived|reside|resides|residing|based)\s+(?i:in)\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("lives_in", r"\b(?i:moved|relocated|moving\s+back|moved\s+back)\s+(?i:to)\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("lives_in", r"\b(?i:work|works|working)\s+(?i:remotely\s+)?(?i:from)\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("lives_in", r"\b(?i:moved\s+away\s+from|moved\s+out\s+of)\s+(?P<o>" + _PLACE_EN + ")", "ended"),
    ("from", r"(?:\b(?i:am|'m|is|'s|are|'re|come|comes|came|originally))\s+(?i:originally\s+)?(?i:from)\s+"
             r"(?P<o>" + _PLACE_EN + ")", ""),
    ("from", r"\b(?i:grew|grow|raised|born)\s+(?i:up\s+)?(?i:in)\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("from", r"(?i:home\s+country),?\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("visited", r"\b(?i:visited|visiting|toured|been\s+to|went\s+to|go\s+to|going\s+back\s+to|travel(?:l)?ed\s+to|"
                r"trip\s+to|got\s+back\s+from|came\s+back\s+from|back\s+from|flew\s+to|drove\s+to)\s+"
                r"(?P<o>(?!The\b)" + _PLACE_EN + ")", ""),
    ("visited", r"\b(?i:was|were|'m|am)\s+(?i:in)\s+(?P<o>" + _PLACE_EN + r")\s+(?i:last|this|for|on|visiting)\b", ""),
    ("attended", r"\b(?i:went\s+to|go\s+to|been\s+to|attended|saw)\s+(?i:the|a|an)\s+"
                 r"(?P<o>(?:[A-Z][\w'-]*\s+){0,4}(?i:concert|show|festival|gig|game|match|party|wedding|"
                 r"conference|convention|parade|play|musical|opera|exhibit|exhibition|fair|marathon|race|expo)"
                 r"(?:\s+(?i:convention|conference|festival|expo|night|tournament))?)\b", ""),
    ("works_at", r"\b(?i:work|works|worked|working|job)\s+(?i:at|for)\s+(?:(?i:a|an|the)\s+[\w\s-]{0,30}?"
                 r"(?i:called|named)\s+|the\s+(?=[A-Z]))?(?P<o>" + _PLACE_EN + ")", ""),
    ("works_at", r"\b(?i:joined|got\s+hired\s+(?:at|by)|got\s+a\s+job\s+at|started\s+a\s+new\s+job\s+at|started\s+working\s+(?:at|for)|"
                 r"hired\s+(?:at|by)|landed\s+a\s+job\s+at|interned\s+at|employed\s+(?:at|by))\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("works_at", r"\b(?i:left|quit|leaving|resigned\s+from|got\s+laid\s+off\s+from|laid\s+off\s+from|"
                 r"quit\s+my\s+job\s+at|left\s+my\s+job\s+at|got\s+fired\s+from|lost\s+my\s+job\s+(?:at|with))\s+(?P<o>" + _PLACE_EN + ")", "ended"),
    ("works_at", r"\b(?i:am|'m|is|'s)\s+(?i:an?|the)\s+(?:[a-z-]+\s+){0,3}(?:[a-z-]+(?:er|or|ist|ant|ian|ect)|nurse|"
                 r"doctor|intern|lead|head|chef|coach|clerk|barista|cashier)\s+(?i:at|for)\s+(?P<o>" + _PLACE_EN + ")", ""),
    ("studies_at", r"\b(?i:study|studies|studying|studied|enrolled|student|major|majoring)\s+(?i:at|in\s+at)\s+"
                   r"(?P<o>" + _PLACE_EN + ")", ""),
    ("studies_at", r"\b(?i:graduated|graduating)\s+(?i:from)\s+(?P<o>" + _PLACE_EN + ")", "ended"),
    ("studies_at", r"\b(?i:goes|go|going)\s+(?i:to)\s+(?P<o>" + _NAME_EN + r"(?:\s+" + _NAME_EN + r")*\s+"
                   r"(?:High|School|University|College|Academy|Elementary|Middle)(?:\s+School)?)\b", ""),
))
_STARTED_AT = re.compile(r"\b(?i:started\s+at)\s+(?P<o>" + _PLACE_EN + ")")
_CHILD_ROLES = frozenset(("son", "daughter", "child"))

# Pets: "my dog Rex", "a cat named Luna", "adopted a kitten called Mochi", "我的猫叫咪咪", "我的猫 Luna".
_PET_PATTERNS = (
    re.compile(r"\b(?i:my|our)\s+" + _ADJ + r"?(?P<kind>(?i:" + _PET_EN + r"))\s*,?\s+(?:(?i:named|called|is\s+called)\s+)?"
               r"(?P<name>" + _NAME_EN + r")\b"),
    re.compile(r"\b(?i:a|an|another|our|one)\s+(?:[\w-]+\s+)?(?P<kind>(?i:" + _PET_EN + r"))\s+(?i:named|called)\s+(?P<name>" + _NAME_EN + r")\b"),
    re.compile(r"(?:我的|我家的?|我有一只|我养了一只|我养的|我有只)(?P<kind>" + _PET_ZH + r")\s*(?:叫|名叫|的名字是)?\s*"
               r"(?P<name>" + _NAME_EN + r"|[" + _CJK + r"]{2})"),
)
_PET_GONE = re.compile(r"(?i)\b(?:died|passed\s+away|put\s+down|ran\s+away|lost)\b|去世|死了|走丢")

_NAMED_EN = (
    re.compile(r"(?:^|(?<=[\s,]))(?:I'm|I\s+am|Im)\s+(?P<n>" + _NAME_EN + r")(?=\s*(?:$|[,.!;]|\s+and\b|\s+by\s+the\s+way|"
               r"\s+here\b|\s+btw\b))"),
    re.compile(r"\b(?i:my\s+name\s+is|my\s+name's)\s+(?P<n>" + _NAME + r")"),
    re.compile(r"\b(?i:call\s+me|calls\s+me|known\s+as)\s+(?P<n>" + _NAME_EN + r")\b"),
)
_NAMED_ZH = (
    re.compile(r"(?:^|(?<=[，,。\s]))我(?:叫|名叫|的名字是|的名字叫)\s*(?P<n>" + _NAME_EN + r"|[" + _CJK + r"]{2,3})"),
    re.compile(r"(?:^|(?<=[，,。\s]))我是\s*(?P<n>[" + _SURNAMES + r"][" + _CJK + r"]{1,2})(?=$|[，,。！!\s])"),
)
_NOT_ZH_NAME_END = "人师生员家者长工"

# Chinese predicates; a place or organisation is a run of characters up to a particle or punctuation.
_ZH_OBJ = r"(?P<o>(?:[A-Za-z][\w&-]*(?:\s+[A-Z][\w&-]*)*)|[" + _CJK + r"]{2,8}?)"
_ZH_STOP = r"(?=了|的|。|，|！|？|,|\.|!|\s|$|工作|上班|读书|上学|念书|长大|玩|旅游|出差|一起|和|呢|啊|吧|离职)"
_ZH_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple((pred, re.compile(p), flag) for pred, p, flag in (
    ("move", r"从\s*(?P<o>[" + _CJK + r"A-Za-z]{2,8}?)\s*搬(?:到|去)了?\s*" + _ZH_OBJ.replace("?P<o>", "?P<o2>") + _ZH_STOP, ""),
    ("lives_in", r"不住在\s*" + _ZH_OBJ + r"了", "ended"),
    ("lives_in", r"不住在\s*" + _ZH_OBJ + _ZH_STOP, "negated"),
    ("lives_in", r"(?:住在|住|定居在|定居)\s*" + _ZH_OBJ + _ZH_STOP, ""),
    ("lives_in", r"(?:搬到|搬去|搬来)了?\s*" + _ZH_OBJ + _ZH_STOP, ""),
    ("lives_in", r"(?:^|[^从])在\s*(?P<o>[" + _CJK + r"]{2,4}?|[A-Za-z][\w-]*)\s*(?:工作|上班)", "cityonly"),
    ("from", r"(?:来自|老家在|老家是|出生在)\s*" + _ZH_OBJ + _ZH_STOP, ""),
    ("from", r"在\s*" + _ZH_OBJ + r"\s*长大", ""),
    ("from", r"(?i:from)\s+(?P<o>" + _PLACE_EN + r")", "fromen"),
    ("visited", r"没去过\s*" + _ZH_OBJ + _ZH_STOP, "negated"),
    ("visited", r"(?:去过|到过|去了|来过|游览了|逛了)\s*" + _ZH_OBJ + _ZH_STOP, "visitzh"),
    ("works_at", r"(?:^|[^从])在\s*" + _ZH_OBJ + r"\s*(?:工作|上班|实习)", "orgonly"),
    ("works_at", r"从\s*" + _ZH_OBJ + r"\s*离职", "ended"),
    ("works_at", r"(?:离开了|离开)\s*" + _ZH_OBJ + _ZH_STOP, "ended"),
    ("works_at", r"(?:加入了|加入|入职了?)\s*" + _ZH_OBJ + _ZH_STOP, ""),
    ("studies_at", r"在\s*" + _ZH_OBJ + r"\s*(?:读书|上学|念书|读研|读博|上大学)", ""),
))
# Places a Chinese speaker names where 在X工作 is a place, not an employer.
_ZH_PLACES = frozenset(("北京 上海 广州 深圳 杭州 成都 南京 武汉 西安 重庆 天津 苏州 长沙 青岛 厦门 大连 沈阳 哈尔滨 "
                        "昆明 郑州 济南 合肥 福州 宁波 无锡 浦东 香港 澳门 台北 台湾 美国 日本 英国 法国 德国 韩国 "
                        "加拿大 澳洲 澳大利亚 新加坡 国外 海外 老家 外地 四川 广东 浙江 江苏 山东 河南 湖北 湖南 "
                        "云南 福建 东北").split())


def _neg_flags(text: str) -> tuple[bool, bool]:
    ended = bool(_ENDED_EN.search(text))
    negated = bool(_NEG_EN.search(text)) and not ended
    return negated, ended


def _place(name: str) -> str:
    return _canon_name(name)


_FUTURE = re.compile(r"(?i)\b(?:next|tomorrow|upcoming|in\s+(?:a|two|three|\d+)\s+(?:days?|weeks?|months?))\b|明年|下个|下周|下星期|明天|后天")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_YEAR = re.compile(r"(?i)\b(?:in|since|back\s+in|of)\s+(?:(?P<mon>" + "|".join(_MONTHS) + r")\s+)?(?P<y>(?:19|20)\d\d)\b"
                   r"|(?P<zy>(?:19|20)\d\d)年(?:(?P<zm>1[0-2]|[1-9])月)?")


def _date_of(clause: str, at: datetime | None) -> str | None:
    """The clause's date, ISO, the first day of a year or month said coarsely ("in 2019", "in March
    2021", "去年", "last month"), else None."""
    m = _YEAR.search(clause)
    if m:
        if m.group("y"):
            month = _MONTHS.index(m.group("mon").lower()) + 1 if m.group("mon") else 1
            return f"{m.group('y')}-{month:02d}-01"
        return f"{m.group('zy')}-{int(m.group('zm') or 1):02d}-01"
    if at is None:
        return None
    got = relative_dates(clause, at)
    for r in got:
        if r.unit in ("day", "week", "weekend", "month", "year", "season"):
            return r.day.isoformat()
    return None


# -- the extractor -------------------------------------------------------------------------------
_NOT_SUBJECT = re.compile(r"(?i)^(?:the|that|this|these|those|it|it's|its|there|here|her|his|your|their|a|an|"
                          r"what|which|you|you're|everyone|everybody|someone|people|nothing|something|"
                          r"你|他们|她们|这|那)\b")
_PRONOUNS_EN = re.compile(r"(?i)^(?P<p>she|he|they)(?:'s|'ve|'d|\b)")
_PRONOUNS_ZH = re.compile(r"^(?P<p>她|他)(?!们)")
_FIRST_EN = re.compile(r"(?i)^(?:i|i'm|i've|i'd|i'll|im|we|we're|we've|me\s+and|me)\b")
_ZH_FIRST = re.compile(r"^(?:我们|我)")
_AND_I = re.compile(r"^\s*(?:and\s+I\b|&\s*I\b|和我|跟我)")
_PARTNER_ROLES = ("boyfriend", "girlfriend", "husband", "wife", "partner", "fiance", "fiancee")
_BREAKUP_EN = re.compile(r"(?i)\b(?:broke\s+up|split\s+up|separated|called\s+off\s+(?:the|our)\s+engagement)\b")
_DIVORCE_EN = re.compile(r"(?i)\b(?:divorced|got\s+a\s+divorce|are\s+getting\s+divorced)\b")
_BREAKUP_ZH = re.compile(r"分手|离婚|分开了")
_WITH_EN = re.compile(r"\b(?i:with)\s+(?P<who>(?i:my|our)\s+" + _ADJ + r"?(?i:" + _ROLE_EN + r")|" + _NAME_EN + r")\b")
_TOOK_EN = re.compile(r"\b(?i:took|brought|taking|bringing)\s+(?P<who>(?i:my|our)\s+" + _ADJ + r"?(?i:" + _ROLE_EN
                      + r"))\s+(?i:to|along|out)\b")
_WITH_ACTIVITY = re.compile(r"(?i)\b(?:went|go|going|hung\s+out|hang\s+out|spent|met|had|played|watched|cooked|"
                            r"travel(?:l)?ed|walked|ran|hiked|visited|saw|celebrated|danced|was|were|came|drove|flew)\b")
_WITH_ZH = re.compile(r"(?:和|跟|同)(?:我的|我)?\s*(?P<who>" + _ROLE_ZH + r")(?:一起|去|出去)")


def extract_relations(text: str, at: datetime | None = None) -> list[RelationDraft]:
    """The relations one user turn states (first person: the user), in the order said, each once."""
    out: list[RelationDraft] = []
    seen: set[tuple[object, ...]] = set()
    last: Mention | None = None       # the turn's last-named person, for "she"/"he"

    def emit(d: RelationDraft) -> None:
        key = (d.subject, d.predicate, d.object, d.negated, d.ended)
        if key not in seen and len(out) < MAX_RELATIONS:
            seen.add(key)
            out.append(d)

    for sentence in _sentences(bounded(text)):
        sentence = _LEAD.sub("", sentence[:MAX_CLAUSE_CHARS]).strip()
        if not sentence or _QUESTION.search(sentence):
            continue
        zh = bool(re.search("[" + _CJK + "]", sentence))
        hypothetical = bool(_HYPO_EN.search(sentence)) if not zh else bool(
            _HYPO_ZH.search(sentence) or _HYPO_MIXED_EN.search(sentence))
        persons = _persons(sentence)
        # "My brother might move to Canada" still says the user has a brother; "If I had a sister" does not.
        if not (hypothetical and _COUNTERFACTUAL.search(sentence)):
            for p in persons:
                if p.mention.role:
                    emit(RelationDraft(USER, p.mention.role, p.mention, evidence=sentence))
                last = p.mention
        if hypothetical:
            continue
        last = _named_self(sentence, emit) or last
        # clauses, each with a subject
        subject: Mention | None = USER
        pos = 0
        for cm in list(_CLAUSE_CUT.finditer(sentence)) + [None]:
            end = cm.start() if cm is not None else len(sentence)
            clause_start, clause = pos, sentence[pos:end]
            pos = cm.end() if cm is not None else len(sentence)
            if not clause.strip():
                continue
            lead = len(clause) - len(clause.lstrip())
            clause_start += lead
            clause = clause.strip()
            here = [p for p in persons if p.start <= clause_start < p.end or p.start == clause_start]
            body = clause
            if here:
                p = here[0]
                rest = sentence[p.end:end] if p.end <= end else ""
                if _AND_I.match(rest):
                    subject, body = USER, rest
                elif p.start < clause_start:     # an appositive: "Ana, my sister, is…"
                    subject, body = p.mention, clause
                    if clause_start + len(clause) <= p.end:
                        continue
                else:
                    subject, body = p.mention, rest
            elif (pm := _PRONOUNS_EN.match(clause) or _PRONOUNS_ZH.match(clause)) is not None:
                pron = pm.group("p").lower()
                if pron == "they":
                    continue
                subject = last if last is not None else Mention("person", pronoun=pron)
                body = clause[pm.end():]
            elif _FIRST_EN.match(clause) or (_ZH_FIRST.match(clause) and not _persons(clause)):
                subject = USER
            elif _NOT_SUBJECT.match(clause):
                subject = None           # "That picture is from…", "It's from…", "Your sister lives…"
            elif re.match(r"^[A-Z][a-z]+\s+(?:lives|works|moved|is\s+from)\b", clause):
                nm = clause.split()[0]
                if nm.lower() in _NOT_NAME:
                    continue
                subject = next((p.mention for p in persons if p.mention.name == nm), Mention("person", name=nm))
            if subject is None:
                continue
            _predicates(subject, body, clause, sentence, zh, at, emit, persons)
    # A relation said to have stopped (or not to hold) is that, not also a plain assertion of it
    # ("I quit my job at Amazon", "My boyfriend and I broke up", "我不住在北京了").
    ended = {(d.subject, d.predicate, d.object) for d in out if d.ended}
    negated = {(d.subject, d.predicate, d.object) for d in out if d.negated}
    return [d for d in out if (d.ended or (d.subject, d.predicate, d.object) not in ended)
            and (d.negated or d.ended or (d.subject, d.predicate, d.object) not in negated)
            and not (d.negated and (d.subject, d.predicate, d.object) in ended)]


def _named_self(sentence: str, emit: _Emit) -> Mention | None:
    for pat in _NAMED_EN:
        m = pat.search(sentence)
        if m and m.group("n").lower() not in _NOT_NAME:
            emit(RelationDraft(USER, "named", Mention("person", name=m.group("n")), evidence=sentence))
            return None
    for pat in _NAMED_ZH:
        m = pat.search(sentence)
        if m and m.group("n")[-1] not in _NOT_ZH_NAME_END:
            emit(RelationDraft(USER, "named", Mention("person", name=m.group("n")), evidence=sentence))
            return None
    return None


def _predicates(subject: Mention, body: str, clause: str, sentence: str, zh: bool, at: datetime | None,
                emit: _Emit, persons: list[_Person]) -> None:
    put = emit
    negated, ended = _neg_flags(clause)
    date = _date_of(clause, at)
    if date is not None and at is not None and date > at.date().isoformat() and _FUTURE.search(clause):
        return              # "我们明年搬去上海", "next month we move to Oslo": a plan, not a fact yet
    user = subject.is_user

    def rel(pred: str, obj: Mention, neg: bool = negated, end: bool = ended) -> None:
        if obj.name and obj.name.lower() in _NOT_NAME:
            return
        put(RelationDraft(subject, pred, obj, negated=neg and not end, ended=end,
                          event_date=date, evidence=clause))

    def typ(pred: str) -> str:
        return "organisation" if pred in ("works_at", "studies_at") else "event" if pred == "attended" else "place"

    if zh:
        for pred, pat, flag in _ZH_RULES:
            for m in pat.finditer(body):
                o = _place(m.group("o"))
                if pred == "move":
                    rel("lives_in", Mention("place", name=o), False, True)
                    rel("lives_in", Mention("place", name=_place(m.group("o2"))), False, False)
                    return
                if flag == "cityonly" and o not in _ZH_PLACES:
                    continue
                if flag == "orgonly" and o in _ZH_PLACES:
                    continue
                if o.startswith(("很多", "好多", "一些", "不少", "几个", "各种", "这个", "那个", "哪")):
                    continue
                end = flag == "ended" or bool(re.search(r"以前|之前|曾经|(?i:used\s+to)", clause)) or bool(
                    re.search(r"不", body[:m.start() + 2]) and re.search(r"了\s*[。！.!]?\s*$", body))
                neg = flag == "negated" or (bool(re.search(r"不|没", body[:m.start()])) and not end)
                if pred == "visited" and flag == "visitzh" and o in ("上班", "公司", "学校"):
                    continue
                rel(pred, Mention(typ(pred), name=o), neg, end)
    # English (also the English part of a mixed turn)
    moved = False
    for pred, pat, flag in _EN_RULES:
        for m in pat.finditer(body):
            o = _place(m.group("o"))
            if pred == "move":
                rel("lives_in", Mention("place", name=o), False, True)
                rel("lives_in", Mention("place", name=_place(m.group("o2"))), False, False)
                moved = True
                continue
            if moved and pred == "lives_in":
                continue
            if pred == "attended":
                o = re.sub(r"(?i)^(?:the|a|an)\s+", "", o)
            if pred == "visited" and (o.split()[0].lower() in _NOT_NAME or re.match(r"(?i)the\b", o)):
                continue
            if pred == "works_at" and flag == "ended" and re.match(r"(?i)(?:my|the|a|an|home|school|work)\b", o):
                continue
            rel(pred, Mention(typ(pred), name=o), negated, ended or flag == "ended")
    if not user and subject.role in _CHILD_ROLES:
        for m in _STARTED_AT.finditer(body):
            rel("studies_at", Mention("organisation", name=_place(m.group("o"))))
    # pets
    if user:
        for pat in _PET_PATTERNS:
            for m in pat.finditer(clause):
                if _PET_GONE.search(clause):
                    continue
                kind = m.group("kind")
                kind = _PETS_EN.get(kind.lower()) or _PETS_ZH.get(kind) or kind
                name = m.group("name")
                if name.lower() in _NOT_NAME:
                    continue
                put(RelationDraft(USER, "owns", Mention("pet", name=name, role=kind),
                                  event_date=date, evidence=clause))
        # with whom
        for m in (*_WITH_EN.finditer(clause), *_TOOK_EN.finditer(clause)):
            who = m.group("who")
            if who[:1].isupper() and not who.lower().startswith(("my ", "our ")) and not (
                    _WITH_ACTIVITY.search(clause[:m.start()]) and not re.match(r"\s+[A-Z]", clause[m.end():])
                    and not re.search(r"(?i)\byou", clause)):
                continue          # "deals with Nike", "A Dance with Dragons": not company the user kept
            person = _person_of(who, persons)
            if person is not None:
                rel("with", person, False, False)
        for m in _WITH_ZH.finditer(clause):
            role = ROLE_WORDS_ZH.get(m.group("who"))
            person = _person_of(m.group("who"), persons) or (Mention("person", role=role) if role else None)
            if person is not None:
                rel("with", person, False, False)
        # partners: "we broke up", "I divorced my husband", "我和男朋友分手了"
        if _BREAKUP_EN.search(clause) or _DIVORCE_EN.search(clause) or _BREAKUP_ZH.search(clause):
            partner = next((p.mention for p in persons if p.mention.role in _PARTNER_ROLES), None)
            if partner is None and re.search(r"(?i)\bwe\b|我们", clause) and not _DIVORCE_EN.search(clause):
                partner = Mention("person", role="partner")
            if partner is not None and partner.role:
                put(RelationDraft(USER, partner.role, partner, ended=True, event_date=date,
                                  evidence=clause))


def _person_of(who: str, persons: list[_Person]) -> Mention | None:
    w = re.sub(r"(?i)^(?:my|our|我的|我)\s*", "", who).strip()
    w = re.sub(r"(?i)^" + _ADJ, "", w)
    role = ROLE_WORDS_EN.get(re.sub(r"\s+", " ", w.lower())) or ROLE_WORDS_ZH.get(w)
    for p in persons:
        if (role and p.mention.role == role) or (p.mention.name and p.mention.name == w):
            return p.mention
    if role:
        return Mention("person", role=role)
    if w.lower() in _NOT_NAME or not re.fullmatch(_NAME_EN, w):
        return None
    return Mention("person", name=w)
