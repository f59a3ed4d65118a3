"""Slot facts: the single-valued attributes of the ontology (domain/ontology.py) read out of
a user turn, each with its canonical value, so that a later statement of the same attribute
supersedes the earlier one (law 8) — occupation, employer, role, school, relationship status,
diet, a self-introduction's name, and the polarity of possession and habits ("I don't have a dog",
"I quit smoking").

Each extractor yields (start, end, FactDraft) spans like the rule channel's; extraction.rule_spans
runs them after the pattern rules, and a span a rule already claimed is not claimed twice. The
patterns match the kinds of statement (a first-person subject, the ontology's words, a value up to
the clause's end), never single sentences. Pure and linear, like every extraction pattern.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from domain import ontology as O
from domain.drafts import FactDraft

Span = tuple[int, int, FactDraft]

_AP = "['’]"
_ADV = r"(?:now|currently|still|just|recently|finally|actually|officially|happily|newly|also|really|already|even)"
_ADVS = rf"(?:[ \t]+{_ADV})*"
_I = r"(?<![\w'’-])[Ii]"
_IM = rf"(?:{_I}{_AP}m|{_I} am)"
_WERE = rf"(?:(?<![\w'’-])[Ww]e{_AP}re|(?<![\w'’-])[Ww]e are)"
# A value ends at a clause boundary or a word that starts a new thought.
_END = (r"(?=\s*(?:[,.!?;:，。！？；\n)]|$)|\s+(?:and|but|because|since|so|now|these days|lately|last|next|this|"
        r"for|with|when|where|while|who|which|as|in|anymore|any more|though|too|again|every|each)\b|\s+[-–—])")
_ORG = r"(?P<org>(?:the\s+|a\s+|an\s+)?[A-Za-z0-9\u4e00-\u9fff&][\w\u4e00-\u9fff&.'’ -]{0,40}?)" + _END
_NOT_ORG = re.compile(r"(?i)^(?:myself|home|the moment|the same|it|this|that|them|him|her|you|a while|now|"
                      r"the time being|free|fun|money|a living|night|nights|weekends?|a bit|a lot)$")


def _d(rule: str, key: str, value: str, content: str, category: str, importance: float,
       slot: str, tags: tuple[str, ...] = ()) -> FactDraft:
    return FactDraft(rule=rule, key=key, value=value, content=content, category=category, importance=importance,
                     slot_hint=slot, tags=tags)


def _org(value: str) -> str | None:
    v = value.strip().strip("\"'“”").strip()
    return None if not v or _NOT_ORG.match(v) else v


# -- work and study ---------------------------------------------------------------------------
_WORK_AS = re.compile(rf"{_I}{_ADVS}\s+(?:work|am working|{_AP}m working|have been working|{_AP}ve been working|"
                      rf"got a (?:new )?job|started working|started a (?:new )?job|landed a (?:new )?job)\s+as\s+"
                      rf"(?:an?\s+|the\s+)?(?P<job>[A-Za-z][\w'’ -]{{1,40}}?)"
                      rf"(?:\s+(?:at|for|with)\s+(?P<org>(?:the\s+|a\s+|an\s+)?[A-Za-z0-9\u4e00-\u9fff&][\w\u4e00-\u9fff&.'’ -]{{0,40}}?))?"
                      rf"(?:\s+in\s+(?P<place>[A-Z\u4e00-\u9fff][\w\u4e00-\u9fff'’ -]{{0,30}}?))?"
                      r"(?=\s*(?:[,.!?;:，。！？；\n)]|$)|\s+(?:and|but|because|since|so|now|these days|lately|last|next|"
                      r"this|when|where|while|who|which|though|too|again)\b|\s+[-–—])")
_WORK_AT = re.compile(rf"{_I}{_ADVS}\s+(?:work|am working|{_AP}m working|have been working|{_AP}ve been working)"
                      rf"\s+(?:at|for)\s+" + _ORG)
# "… at Acme as a nurse": the job named after the employer (the employer's value ends before "as").
_AS_JOB = re.compile(r"\s+as\s+(?:an?\s+|the\s+)?(?P<job>[A-Za-z][\w'’ -]{1,40}?)" + _END)
_JOINED = re.compile(rf"{_I}(?:{_AP}ve| have)?{_ADVS}\s+(?P<verb>joined|started at|started working at|started working for|"
                     rf"got a (?:new )?job at|got a (?:new )?job with|got hired at|got hired by|was hired by|"
                     rf"moved to a new job at|switched to|landed a job at)\s+" + _ORG)
_STUDY_AT = re.compile(rf"(?:{_I}{_ADVS}\s+(?:study|am studying|{_AP}m studying|go to school|attend|am enrolled|"
                       rf"{_AP}m enrolled)\s+(?:at|in)\s+|{_IM}{_ADVS}\s+(?:an?\s+)?(?:student|freshman|sophomore|"
                       rf"junior|senior|grad student|graduate student|phd student|undergrad|undergraduate)\s+at\s+)"
                       + _ORG)
_ROLE = re.compile(rf"(?:(?<![\w'’-])[Mm]y\s+(?:new\s+)?(?:role|title|job title|position)\s+is(?:\s+now)?\s+|"
                   rf"{_I}(?:{_AP}ve| have)?(?:\s+just|\s+finally|\s+recently)?\s+(?:been\s+|got\s+|was\s+)?"
                   rf"promoted\s+to\s+)(?:an?\s+|the\s+)?(?P<org>[A-Za-z][\w'’ -]{{1,40}}?)" + _END)
_ZH_ORG_WORDS = re.compile(r"公司|银行|大学|医院|学校|集团|科技|研究所|研究院|事务所|工作室|中心|局|厂|店|餐厅|[A-Za-z]")
_ZH_SCHOOL_WORDS = re.compile(r"大学|学院|中学|小学|学校|高中|初中|[A-Za-z]")
_ZH_WORK_AT = re.compile(r"我(?:现在|目前|已经|刚|刚刚)?(?:在|于)(?P<org>[\u4e00-\u9fffA-Za-z0-9]{2,14}?)"
                         r"(?:工作|上班|任职|实习)")
_ZH_JOINED = re.compile(r"我(?:现在|已经|刚|刚刚|上个月|最近)?(?:入职了?|加入了?|跳槽到了?|跳槽去了?|去了)"
                        r"(?P<org>[\u4e00-\u9fffA-Za-z0-9]{2,14}?)(?=工作|上班|[，,。.!！；;\s]|$|了)")
_ZH_STUDY_AT = re.compile(r"我(?:现在|目前)?(?:在|于)(?P<org>[\u4e00-\u9fffA-Za-z0-9]{2,14}?)(?:读书|上学|读大学|读研|读博|念书|"
                          r"读研究生|读本科)")
_ZH_ROLE = re.compile(r"(?:我的(?:职位|职务|头衔)是|我(?:被)?(?:升职为|升职成|升为|晋升为|升职当了|当上了))"
                      r"(?P<org>[\u4e00-\u9fffA-Za-z]{2,12}?)(?=[了啦，,。.!！；;\s]|$)")
# Leaving a job ends the employer slot: "I left Google", "I quit my job at Acme", "I got laid off from
# Meta", "我从腾讯辞职了". The value is "none" (a new version of the slot, the old employer's memory
# outdated with its history), so the profile never serves the old employer as current.
_LEFT_ORG = re.compile(rf"{_I}(?:{_AP}ve| have)?{_ADVS}\s+(?:left|quit|resigned from|retired from|stopped working (?:at|for)|"
                       rf"(?:was|got|have been|{_AP}ve been)\s+(?:laid off|let go|fired)\s+(?:from|by))\s+"
                       rf"(?:(?P<job>(?:my|the)\s+(?:old\s+|last\s+)?(?:job|position|role|post)\s+(?:at|with))\s+)?" + _ORG)
_LEFT_JOB = re.compile(rf"{_I}(?:{_AP}ve| have)?{_ADVS}\s+(?:quit|left|resigned from|lost)\s+my\s+(?:old\s+)?job"
                       rf"(?!\s+(?:at|with|as)\b)|{_I}\s+(?:was|got|{_AP}ve been|have been)\s+(?:laid off|let go|fired)"
                       rf"(?!\s+(?:from|by)\b)")
# A bare "I left X" is a job only where X is named as an organisation or the turn speaks of work:
# "I left Paris", "I left John", "I left the party" are a move, a break-up, an evening.
_ORG_WORD = re.compile(r"\b(?:Inc|Corp|Corporation|Ltd|LLC|GmbH|Co|Company|Bank|Labs?|Group|Technologies|Tech|Studios?|"
                       r"Systems|Software|Consulting|Partners|Agency|Hospital|Clinic|Airlines?|Motors|Foundation|Institute)\b")
_WORK_TALK = re.compile(r"(?i)\b(?:job|jobs|work|worked|working|company|companies|career|boss|manager|team|colleagues?|"
                        r"co-?workers?|office|startup|salary|resign\w*|position|role|employer|hired|fired|laid off|"
                        r"offer|interview|retire\w*|quit|years there|freelanc\w*|promotion|"
                        r"(?:my|our) own (?:business|company|shop|store|firm|startup|bakery|restaurant|studio|practice|agency))\b")
# "joined", "started at" and "switched to" take clubs, classes and plans as often as employers ("I joined
# a book club", "so I joined in", "I switched to decaf"): an employer only where it is named ("Initech",
# "the Red Cross") or is a kind of workplace ("a startup"), and never a club, class or team of a pastime.
_JOINED_ANYTHING = frozenset(("joined", "started at", "switched to"))
_WORKPLACE = re.compile(r"(?i)\b(?:company|startup|start-up|firm|agency|bank|hospital|clinic|lab|laboratory|studio|"
                        r"bakery|restaurant|cafe|café|shop|store|corporation|consultancy|practice|newspaper|magazine|"
                        r"publisher|factory|plant|office|department|ministry|council|school|university|college)\b")
_MEMBERSHIP = re.compile(r"(?i)\b(?:club|class|classes|course|gym|team|group|league|choir|band|community|meetup|"
                         r"program|programme|society|circle|chat|forum|server|cause|protest|march|movement|crew|"
                         r"squad|workshop|session|race|marathon|challenge|fandom|fan|fans|list|waitlist|call|game)\b")


def _employer_joined(verb: str, org: str, text: str) -> bool:
    """Is what the user joined (or started at, switched to) an employer? See _JOINED_ANYTHING.
    "Switched to" names a product as often as a workplace ("I switched to Spotify"): only where
    the turn speaks of work."""
    if verb not in _JOINED_ANYTHING:
        return True
    if _MEMBERSHIP.search(org) or (verb == "switched to" and not _WORK_TALK.search(text)):
        return False
    named = re.sub(r"^(?:the|a|an)\s+", "", org)
    return named[:1].isupper() or bool(_WORKPLACE.search(org))


_ORG_TAIL = re.compile(r"\s+(?:after|to|because|since|at|on|over)\b.*$")
_VERB_ONLY = re.compile(r"(?i)^(?:left|stopped working)")
_ZH_LEFT = re.compile(r"我(?:已经|刚|刚刚|上个月|上周|去年|最近|终于)?(?:从(?P<org>[\u4e00-\u9fffA-Za-z0-9]{2,14}?)"
                      r"(?:辞职|离职|退休)|(?:离开了|辞掉了|辞去了)(?P<org2>[\u4e00-\u9fffA-Za-z0-9]{2,14}?)(?:的工作)?"
                      r"(?=[了啦，,。.!！；;\s]|$)|被(?P<org3>[\u4e00-\u9fffA-Za-z0-9]{2,14}?)(?:裁员|辞退|开除|解雇)|"
                      r"(?P<bare>辞职了|离职了|被裁员了|被裁了|失业了))")


def left_job(text: str) -> Iterator[Span]:
    for m in _LEFT_ORG.finditer(text):
        org = _org(m.group("org"))
        if not org or _NOT_ORG.match(org):
            continue
        org = _ORG_TAIL.sub("", org)
        verb = text[m.start():m.start("org")].split(None, 1)[-1]
        if not m.group("job") and (not org[:1].isupper() or (_VERB_ONLY.match(verb) and not (
                _ORG_WORD.search(org) or _WORK_TALK.search(text)))):
            continue          # "I quit smoking", "I left Paris": no organisation named, or no work spoken of
        yield m.start(), m.end(), _d("slot.en.employer_end", "employer", "none", f"User no longer works at {org}",
                                     "identity", 0.8, "employer", (org.lower(),))
    for m in _LEFT_JOB.finditer(text):
        yield m.start(), m.end(), _d("slot.en.employer_end", "employer", "none", "User left their job", "identity",
                                     0.8, "employer")
    for m in _ZH_LEFT.finditer(text):
        org = m.group("org") or m.group("org2") or m.group("org3")
        if org and not m.group("org") and not _ZH_ORG_WORDS.search(org):
            continue          # "我离开了北京" is a move, not a job: 离开/被… need a word of an organisation
        content = f"用户已不在{org}工作" if org else "用户辞职了，目前没有工作"
        yield m.start(), m.end(), _d("slot.zh.employer_end", "employer", "none", content, "identity", 0.8, "employer",
                                     (org,) if org else ())


_ZH_OCC = re.compile(r"我(?:现在|目前)?(?:的工作是|的职业是|改行当|改行做|转行当|转行做|转行成为|做了|当了|成为了?)(?:一名|一个)?"
                     r"(?P<org>[\u4e00-\u9fff]{2,8}?)(?=了|啦|[，,。.!！；;\s]|$)")


def work_and_study(text: str) -> Iterator[Span]:
    for m in _WORK_AS.finditer(text):
        job = m.group("job").strip()
        if _NOT_ORG.match(job):
            continue
        place = m.group("place")
        end = m.end("job") if not place else m.end("place")
        tail = f" in {place.strip()}" if place else ""
        yield m.start(), end, _d("slot.en.occupation", "occupation", job.lower(), f"User works as {_a(job)}{tail}",
                                 "identity", 0.85, "occupation")
        org = m.group("org") and _org(m.group("org"))
        if org:
            yield m.start("org"), m.end("org"), _d("slot.en.employer", "employer", org, f"User works at {org}",
                                                   "identity", 0.8, "employer")
    for pattern, rule in ((_WORK_AT, "slot.en.employer"), (_JOINED, "slot.en.employer")):
        for m in pattern.finditer(text):
            org = _org(m.group("org"))
            if org and (pattern is not _JOINED or _employer_joined(m.group("verb"), org, text)):
                yield m.start(), m.end(), _d(rule, "employer", org, f"User works at {org}", "identity", 0.8, "employer")
                as_job = _AS_JOB.match(text, m.end())
                job = as_job.group("job").strip() if as_job else ""
                if as_job and job and not _NOT_ORG.match(job):   # both propositions: the employer and the occupation
                    yield as_job.start(), as_job.end(), _d("slot.en.occupation", "occupation", job.lower(),
                                                           f"User works as {_a(job)}", "identity", 0.85, "occupation")
    for m in _STUDY_AT.finditer(text):
        org = _org(m.group("org"))
        if org:
            yield m.start(), m.end(), _d("slot.en.school", "school", org, f"User studies at {org}", "identity", 0.8,
                                         "school")
    for m in _ROLE.finditer(text):
        role = _org(m.group("org"))
        if role:
            yield m.start(), m.end(), _d("slot.en.role", "role", role.lower(), f"User's role is {role}", "identity",
                                         0.8, "role")
    for m in _ZH_STUDY_AT.finditer(text):
        if _ZH_SCHOOL_WORDS.search(m.group("org")):
            yield m.start(), m.end(), _d("slot.zh.school", "school", m.group("org"), f"用户在{m.group('org')}读书",
                                         "identity", 0.8, "school")
    for pattern in (_ZH_WORK_AT, _ZH_JOINED):
        for m in pattern.finditer(text):
            org = m.group("org")
            if _ZH_ORG_WORDS.search(org) and not _ZH_SCHOOL_WORDS.fullmatch(org):
                yield m.start(), m.end(), _d("slot.zh.employer", "employer", org, f"用户在{org}工作", "identity", 0.8,
                                             "employer")
    for m in _ZH_ROLE.finditer(text):
        yield m.start(), m.end(), _d("slot.zh.role", "role", m.group("org"), f"用户的职位是{m.group('org')}",
                                     "identity", 0.8, "role")
    for m in _ZH_OCC.finditer(text):
        yield m.start(), m.end(), _d("slot.zh.occupation", "occupation", m.group("org"), f"用户是{m.group('org')}",
                                     "identity", 0.85, "occupation")


def _a(job: str) -> str:
    return ("an " if job[:1].lower() in "aeiou" else "a ") + job


# -- relationship status and diet -------------------------------------------------------------
_REL_STATE = re.compile(rf"(?:{_IM}|{_WERE}){_ADVS}\s+(?P<v>{O.alternation(O.RELATIONSHIP_EN)})(?![-\w])"
                        r"(?!\s+(?:in|with|on|by|to the idea|aback)\b)")
_REL_EVENT = re.compile(rf"(?:{_I}|(?<![\w'’-])[Ww]e|(?<![\w'’-])[Mm]y (?:wife|husband|partner|girlfriend|boyfriend|"
                        rf"fiancée?|fiance) and I){_ADVS}(?:\s+have|{_AP}ve)?\s+(?P<v>{O.alternation(O.RELATIONSHIP_EVENTS_EN)})"
                        r"(?![-\w])")
_REL_ZH = re.compile(r"我(?:们)?(?:和[^，,。.!！？?\s]{1,6})?(?:已经|刚|刚刚|终于|现在|目前|今年|去年|上个月|上周|还是|依然|又)?"
                     rf"(?P<v>{O.alternation(O.RELATIONSHIP_ZH)})")
_DIET_STATE = re.compile(rf"(?:{_IM}|{_WERE}){_ADVS}\s+(?P<v>{O.alternation(O.DIET_EN)})(?![-\w])")
_DIET_EVENT = re.compile(rf"(?:{_I}|(?<![\w'’-])[Ww]e)(?:{_AP}ve| have)?{_ADVS}\s+(?P<v>{O.alternation(O.DIET_EVENTS_EN)})"
                         r"(?![-\w])")
_DIET_ZH = re.compile(r"我(?:们)?(?:现在|已经|目前|开始|一直|从去年开始|去年开始|最近)?(?:是|是个|是一名|是一个)?"
                      rf"(?P<v>{O.alternation(O.DIET_ZH)})")
_DIET_CONTENT_EN = {"vegan": "User is vegan", "vegetarian": "User is vegetarian", "pescatarian": "User is pescatarian",
                    "keto": "User is on a keto diet", "eats meat": "User eats meat"}


def status_and_diet(text: str) -> Iterator[Span]:
    for pattern, lex in ((_REL_STATE, O.RELATIONSHIP_EN), (_REL_EVENT, O.RELATIONSHIP_EVENTS_EN)):
        for m in pattern.finditer(text):
            v = O.pick(lex, m.group("v"))
            if v:
                yield m.start(), m.end(), _d("slot.en.relationship", "relationship_status", v, f"User is {v}",
                                             "identity", 0.8, "relationship")
    for m in _REL_ZH.finditer(text):
        v = O.pick(O.RELATIONSHIP_ZH, m.group("v"))
        if v:
            yield m.start(), m.end(), _d("slot.zh.relationship", "relationship_status", v,
                                         "用户" + O.RELATIONSHIP_LABEL_ZH[v], "identity", 0.8, "relationship")
    for pattern, lex in ((_DIET_STATE, O.DIET_EN), (_DIET_EVENT, O.DIET_EVENTS_EN)):
        for m in pattern.finditer(text):
            v = O.pick(lex, m.group("v"))
            if v:
                yield m.start(), m.end(), _d("slot.en.diet", "diet", v, _DIET_CONTENT_EN[v], "policy", 0.85, "health",
                                             ("constraint", "diet"))
    for m in _DIET_ZH.finditer(text):
        v = O.pick(O.DIET_ZH, m.group("v"))
        if v:
            yield m.start(), m.end(), _d("slot.zh.diet", "diet", v, "用户" + ("吃肉" if v == "eats meat" else
                                                                            "吃" + O.DIET_LABEL_ZH[v]),
                                         "policy", 0.85, "health", ("constraint", "diet"))


# -- introductions ----------------------------------------------------------------------------
# "Hi, I'm Marta." / "I'm Tom Lee, nice to meet you": a capitalised name right after I'm that ends
# the clause; "I'm Tired", "I'm French", "I'm Catholic" are not names.
_NOT_NAME = frozenset(
    "american british english chinese japanese korean french german italian spanish mexican canadian australian "
    "indian russian brazilian irish scottish welsh dutch swedish norwegian danish finnish polish portuguese greek "
    "turkish vietnamese thai filipino indonesian malaysian singaporean egyptian nigerian kenyan african asian "
    "european latino latina hispanic christian catholic protestant jewish muslim buddhist hindu atheist mormon "
    "okay ok good fine great well back home here there done sorry not so just still also really very glad happy "
    "excited new online offline free busy ready sure alive tired sick hungry single married vegan vegetarian "
    "in out on off up down going gonna trying thinking working looking feeling the a an".split())
_INTRO_EN = re.compile(r"(?:^|(?<=[,.!?;:，。！？；\n])|(?<=\b[Hh]i)|(?<=\b[Hh]ey)|(?<=\b[Hh]ello)|(?<=\b[Hh]eya)|(?<=\bthere))"
                       rf"[ \t,!~-]{{0,6}}(?:{_I}{_AP}m|{_I} am)[ \t]+(?P<name>[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?)"
                       r"(?=\s*(?:[,.!;~，。！]|$)|\s+(?:and|from|here|btw|by the way|nice|speaking)\b)")
_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔"
             "钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤欧")
_INTRO_ZH = re.compile(rf"(?:^|(?<=[，,。.!！?？;；\s]))(?:(?:大家好|你好|您好)[，,！! ]{{0,3}})?我是(?P<name>[{_SURNAMES}]"
                       r"[\u4e00-\u9fff]{1,2}?)(?=[，,。.!！；;\s~]|$)")
_NOT_ZH_NAME = re.compile(r"人|的|者|生|员|师|家|工|长|子$|们")


def introductions(text: str) -> Iterator[Span]:
    for m in _INTRO_EN.finditer(text):
        name = m.group("name")
        if name.split()[0].lower() in _NOT_NAME or name.split()[-1].lower() in _NOT_NAME:
            continue
        yield m.start("name") - 4, m.end(), _d("slot.en.name", "name", name, f"User's name is {name}", "identity",
                                               0.9, "name")
    for m in _INTRO_ZH.finditer(text):
        name = m.group("name")
        if _NOT_ZH_NAME.search(name[1:]):
            continue
        yield m.start("name") - 2, m.end(), _d("slot.zh.name", "name", name, f"用户叫{name}", "identity", 0.9, "name")


# -- polarity: possession and habits, said or denied -------------------------------------------
_PET_CANON = {"pup": "dog", "puppy": "dog", "puppies": "dog", "pups": "dog", "doggo": "dog", "dogs": "dog",
              "kitten": "cat", "kittens": "cat", "kitty": "cat", "kitties": "cat", "cats": "cat", "bunny": "rabbit",
              "bunnies": "rabbit", "rabbits": "rabbit", "pets": "pet", "kids": "children", "kid": "children",
              "child": "children"}
_OWNED = ("dog|dogs|puppy|puppies|cat|cats|kitten|kittens|pet|pets|rabbit|rabbits|bunny|hamster|parrot|bird|fish|"
          "turtle|horse|car|cars|bike|motorcycle|house|apartment|tv|television|smartphone|laptop|kids|children|"
          "child|kid|siblings|garden|license|driver's license|driving license|roommate")


def canon_thing(word: str) -> str:
    w = word.lower().replace("’", "'")
    if w in _PET_CANON:
        return _PET_CANON[w]
    return w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w


_HAS_NOT = re.compile(rf"{_I}\s+(?:don{_AP}t|do not|no longer|don{_AP}t even|do not even|never)\s+(?:have|own)\s+"
                      rf"(?:an?\s+|any\s+|a\s+single\s+)?(?P<thing>{_OWNED})\b")
_HAS_NOT2 = re.compile(rf"{_I}(?:{_AP}ve| have)?(?:\s+just|\s+finally|\s+recently)?\s+(?:sold|gave away|got rid of|"
                       rf"rehomed)\s+(?:my|our)\s+(?:old\s+)?(?P<thing>{_OWNED})\b")
_PETS_ZH = "狗|小狗|狗狗|猫|小猫|猫咪|宠物|兔子|鹦鹉|仓鼠|金鱼|乌龟|车|房子|孩子|电脑"
_HAS_NOT_ZH = re.compile(r"我(?:现在|已经|们家|家)?(?:没有|没养|不养|没有养|不再养|从来没养过|没)(?:过)?(?:一?[只条辆个台套])?"
                         rf"(?P<thing>{_PETS_ZH})")
_ZH_THING = {"小狗": "狗", "狗狗": "狗", "小猫": "猫", "猫咪": "猫"}

# Habits: a closed set of activity verbs (what one does or stops doing), base form → gerund.
_HABIT_VERBS = ("smoke drive cook exercise run jog swim bike cycle vape gamble meditate travel ski dance sing paint "
                "draw garden hike fish hunt bake code work out game skate surf climb knit sew golf bowl").split()
_GERUND = {v: (v[:-1] + "ing" if v.endswith("e") and v not in ("ski",) else
               v + v[-1] + "ing" if v in ("run", "jog", "swim", "shop") else v + "ing") for v in _HABIT_VERBS}
_GERUND["work out"] = "working out"
_BASE = {g: v for v, g in _GERUND.items()}
_VERB_ALT = "|".join(sorted((v for v in _HABIT_VERBS if v not in ("work", "out")), key=len, reverse=True)) + "|work out"
_GER_ALT = "|".join(sorted(_BASE, key=len, reverse=True))
_HABIT_NOT = re.compile(rf"{_I}\s+(?:don{_AP}t|do not|no longer|never|don{_AP}t really|rarely if ever)\s+"
                        rf"(?P<v>{_VERB_ALT})\b(?!\s+(?:to|that|it|the car|a car|my))")
_HABIT_STOP = re.compile(rf"{_I}(?:{_AP}ve| have)?(?:\s+just|\s+finally|\s+recently|\s+already)?\s+"
                         rf"(?:quit|stopped|gave up|have given up|kicked the habit of)\s+(?P<g>{_GER_ALT})\b")
_HABIT_START = re.compile(rf"{_I}(?:{_AP}ve| have)?(?:\s+just|\s+recently|\s+finally)?\s+(?:started|took up|picked up|"
                          rf"began|got back into|went back to)\s+(?P<g>{_GER_ALT})\b")
_HABIT_AGAIN = re.compile(rf"{_I}\s+(?:now\s+)?(?P<v>{_VERB_ALT})\s+again\b")
_HABIT_ZH = {"抽烟": "抽烟", "吸烟": "抽烟", "喝酒": "喝酒", "开车": "开车", "做饭": "做饭", "运动": "运动", "跑步": "跑步",
             "游泳": "游泳", "熬夜": "熬夜", "打游戏": "打游戏", "健身": "健身"}
_HABIT_NOT_ZH = re.compile(r"我(?:现在|已经|早就|基本)?(?:不再|不|戒了|从不|从来不|很少|不怎么)(?P<v>"
                           + "|".join(_HABIT_ZH) + ")")
_HABIT_QUIT_ZH = re.compile(r"我(?:现在|已经|早就|去年|上个月)?(?:戒烟|戒酒)")


def polarity(text: str) -> Iterator[Span]:
    for pattern in (_HAS_NOT, _HAS_NOT2):
        for m in pattern.finditer(text):
            thing = canon_thing(m.group("thing"))
            yield m.start(), m.end(), _d("slot.en.has_not", f"has:{thing}", "false", f"User does not have {_art(thing)}",
                                         "fact", 0.75, "possession", (thing,))
    for m in _HAS_NOT_ZH.finditer(text):
        thing = _ZH_THING.get(m.group("thing"), m.group("thing"))
        yield m.start(), m.end(), _d("slot.zh.has_not", f"has:{thing}", "false", f"用户没有{thing}", "fact", 0.75,
                                     "possession", (thing,))
    for m in _HABIT_NOT.finditer(text):
        v = m.group("v").lower()
        yield m.start(), m.end(), _d("slot.en.habit_not", f"does:{v}", "false", f"User does not {v}", "fact", 0.75,
                                     "habit", (v,))
    for m in _HABIT_STOP.finditer(text):
        v = _BASE[m.group("g").lower()]
        yield m.start(), m.end(), _d("slot.en.habit_not", f"does:{v}", "false", f"User no longer {_s(v)}", "fact", 0.75,
                                     "habit", (v,))
    for pattern in (_HABIT_START, _HABIT_AGAIN):
        for m in pattern.finditer(text):
            v = _BASE[m.group("g").lower()] if "g" in m.groupdict() else m.group("v").lower()
            yield m.start(), m.end(), _d("slot.en.habit", f"does:{v}", "true", f"User {_s(v)}", "fact", 0.7, "habit",
                                         (v,))
    for m in _HABIT_NOT_ZH.finditer(text):
        v = _HABIT_ZH[m.group("v")]
        yield m.start(), m.end(), _d("slot.zh.habit_not", f"does:{v}", "false", f"用户不{v}", "fact", 0.75, "habit", (v,))
    for m in _HABIT_QUIT_ZH.finditer(text):
        v = "抽烟" if "烟" in m.group(0) else "喝酒"
        yield m.start(), m.end(), _d("slot.zh.habit_not", f"does:{v}", "false", f"用户不{v}", "fact", 0.75, "habit", (v,))


def _art(thing: str) -> str:
    if thing in ("children", "siblings", "kids") or thing.endswith("s"):
        return thing
    if thing in ("pet",):
        return "any pets"
    return ("an " if thing[0] in "aeiou" else "a ") + thing


def _s(verb: str) -> str:
    head, _, rest = verb.partition(" ")
    head = head + ("es" if head.endswith(("sh", "ch", "s", "x", "o")) else "s")
    return head + (" " + rest if rest else "")


# Words without which an extractor cannot match (substrings of the lower-cased turn): a turn pays
# only for the extractors it may fire, and a run of blanks or newlines pays for none.
EXTRACTORS = (
    (introductions, ("i'm", "i’m", "i am", "我是")),
    (work_and_study, ("work", "job", "joined", "hired", "study", "studying", "school", "attend", "enrolled", "student",
                      "freshman", "sophomore", "junior", "senior", "undergrad", "role", "title", "position", "promoted",
                      "started", "switched", "工作", "上班", "任职", "实习", "入职", "加入", "跳槽", "读", "上学", "念书",
                      "职位", "职务", "头衔", "升", "当上", "当了", "做了", "成为", "改行", "转行")),
    (left_job, ("left", "quit", "resigned", "retired", "stopped working", "laid off", "let go", "fired", "lost my job",
                "辞职", "离职", "退休", "离开了", "辞掉了", "辞去了", "裁", "辞退", "开除", "解雇", "失业")),
    (status_and_diet, ("single", "relationship", "dating", "seeing", "engaged", "married", "newlywed", "divorced",
                       "separated", "widow", "broke up", "split up", "called off", "tied the knot", "proposed", "vegan",
                       "vegetarian", "veggie", "plant-based", "pescatarian", "pescetarian", "keto", "meat", "单身", "分手",
                       "恋爱", "脱单", "男朋友", "女朋友", "对象", "订婚", "结婚", "已婚", "离婚", "离异", "丧偶", "素",
                       "吃肉")),
    (polarity, ("have", "own", "sold", "gave away", "got rid", "rehomed", "quit", "stopped", "gave up", "given up",
                "kicked", "started", "took up", "picked up", "began", "got back", "went back", "again", "don't",
                "don’t", "do not", "no longer", "never", "rarely", "没", "不养", "不再", "不", "戒")),
)


def slot_spans(text: str) -> list[Span]:
    low = text.lower()
    return [s for fn, gate in EXTRACTORS if any(g in low for g in gate) for s in fn(text)]
