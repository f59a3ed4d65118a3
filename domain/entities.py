"""Relational memory's ontology (#26): the entities a user speaks of, the relations between them,
and what an extractor hands the memory processor. Pure data and pure functions; no I/O.

The user is an entity too (id SELF): "my sister Ana lives in Rome" is two relations,
SELF --sister--> Ana and Ana --lives_in--> Rome.

A relation type's cardinality says what a new assertion does to the current ones with the same
subject and predicate (domain/ontology.py has the same words for attributes):
- ONE: one object at a time — a new object ends the current relation ("I moved to Berlin" ends
  lives_in Paris at the move's date);
- MANY: objects coexist (friends, visited places); a relation ends only when a statement says so
  ("I left Google", "we broke up", "my sister no longer lives in Rome").

The extractors (offline: domain/relation_extraction.py; the LLM channel when configured)
produce `RelationDraft`s; the memory processor resolves their mentions to entity ids with the
user's entity state (aliases, the session's last-mentioned person) and decides
entity.observed / relation.asserted / relation.ended once (schemas/events.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from domain.ontology import MANY, ONE

SELF = "self"   # the user's own entity id, in every user's graph

ENTITY_TYPES = ("person", "pet", "place", "organisation", "product", "event", "user")


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity as a sentence names it: by name, by the user's relation word, by pronoun, or the user."""
    type: str                   # one of ENTITY_TYPES ("user" for the speaker)
    name: str | None = None     # the proper name as said ("Ana", "韩梅梅", "Rome"), None if unnamed
    role: str | None = None     # the user's relation word, canonical English ("sister", "mother", "boss")
    pronoun: str | None = None  # an unresolved reference ("she", "he", "they", "她", "他"), resolved later

    @property
    def is_user(self) -> bool:
        return self.type == "user"


USER = Mention("user")


@dataclass(frozen=True, slots=True)
class RelationDraft:
    """One relation a clause states. `negated`: the clause says it does not hold ("my sister doesn't
    live in Rome"); `ended`: it says it stopped holding ("I left Google", "I moved from Paris")."""
    subject: Mention
    predicate: str              # a key of RELATIONS
    object: Mention
    negated: bool = False
    ended: bool = False
    event_date: str | None = None   # ISO date the clause dates it to ("last year" → that date), else None
    evidence: str = ""              # the clause it came from


@dataclass(frozen=True, slots=True)
class RelationType:
    name: str
    cardinality: str            # ONE or MANY, per subject
    group: str                  # family | partner | social | work | place | possession | participation | identity
    en: str                     # how an answer reads it: "{s} lives in {o}"
    zh: str


def _t(name: str, cardinality: str, group: str, en: str, zh: str) -> RelationType:
    return RelationType(name, cardinality, group, en, zh)


# Person-to-person relations are named by the role word: SELF --sister--> Ana reads "Ana is the
# user's sister". One-at-a-time roles are the ones a person has one of at a time.
_KIN_ONE = ("mother", "father", "wife", "husband", "partner", "boyfriend", "girlfriend", "fiance", "fiancee")
_KIN_MANY = ("sister", "brother", "son", "daughter", "child", "grandmother", "grandfather", "aunt", "uncle",
             "cousin", "nephew", "niece", "grandchild", "parent", "sibling", "mother_in_law", "father_in_law",
             "brother_in_law", "sister_in_law")
_SOCIAL = ("friend", "best_friend", "roommate", "neighbour", "ex", "mentor", "classmate")
_WORK = ("colleague", "boss", "manager", "teammate", "employee", "client")

RELATIONS: dict[str, RelationType] = {r.name: r for r in (
    *(_t(k, ONE, "partner" if k not in ("mother", "father") else "family", "{o} is {s}'s " + k, "{o}是{s}的" + k)
      for k in _KIN_ONE),
    *(_t(k, MANY, "family", "{o} is {s}'s " + k.replace("_", "-"), "{o}是{s}的" + k) for k in _KIN_MANY),
    *(_t(k, MANY, "social", "{o} is {s}'s " + k.replace("_", " "), "{o}是{s}的" + k) for k in _SOCIAL),
    *(_t(k, MANY, "work", "{o} is {s}'s " + k, "{o}是{s}的" + k) for k in _WORK),
    _t("named", ONE, "identity", "{s} is called {o}", "{s}叫{o}"),
    _t("lives_in", ONE, "place", "{s} lives in {o}", "{s}住在{o}"),
    _t("from", ONE, "place", "{s} is from {o}", "{s}来自{o}"),
    _t("visited", MANY, "place", "{s} visited {o}", "{s}去过{o}"),
    _t("works_at", ONE, "work", "{s} works at {o}", "{s}在{o}工作"),
    _t("works_as", ONE, "work", "{s} works as {o}", "{s}是{o}"),
    _t("studies_at", ONE, "work", "{s} studies at {o}", "{s}在{o}读书"),
    _t("owns", MANY, "possession", "{s} has {o}", "{s}有{o}"),
    _t("attended", MANY, "participation", "{s} went to {o}", "{s}参加了{o}"),
    _t("with", MANY, "participation", "{s} was with {o}", "{s}和{o}一起"),
)}

PERSON_ROLES = frozenset(_KIN_ONE + _KIN_MANY + _SOCIAL + _WORK)


def relation_type(predicate: str) -> RelationType | None:
    return RELATIONS.get(predicate)


def one_at_a_time(predicate: str) -> bool:
    """Does a new object end the subject's current relation of this type? (Unknown: no.)"""
    r = RELATIONS.get(predicate)
    return r is not None and r.cardinality == ONE


def group_of(predicate: str) -> str | None:
    r = RELATIONS.get(predicate)
    return r.group if r else None


# -- the words that say a relation (#26) --------------------------------------------------------
# How a user names a person's relation to them, in English and Chinese, mapped to the canonical role
# (a key of RELATIONS). The offline extractor (domain/relation_extraction.py) reads these;
# an English phrase is matched after "my" (or as "Mom"/"Dad" on its own), a Chinese one after 我/我的.
ROLE_WORDS_EN: dict[str, str] = {
    "mom": "mother", "mum": "mother", "mommy": "mother", "mother": "mother", "mama": "mother",
    "dad": "father", "daddy": "father", "father": "father", "papa": "father",
    "wife": "wife", "husband": "husband", "partner": "partner", "spouse": "partner",
    "boyfriend": "boyfriend", "girlfriend": "girlfriend", "fiance": "fiance", "fiancé": "fiance",
    "fiancee": "fiancee", "fiancée": "fiancee",
    "sister": "sister", "sis": "sister", "brother": "brother", "bro": "brother",
    "son": "son", "daughter": "daughter", "kid": "child", "child": "child",
    "grandma": "grandmother", "granny": "grandmother", "grandmother": "grandmother",
    "grandpa": "grandfather", "grandfather": "grandfather", "aunt": "aunt", "uncle": "uncle",
    "cousin": "cousin", "nephew": "nephew", "niece": "niece", "grandson": "grandchild",
    "granddaughter": "grandchild", "mother-in-law": "mother_in_law", "father-in-law": "father_in_law",
    "brother-in-law": "brother_in_law", "sister-in-law": "sister_in_law",
    "friend": "friend", "best friend": "best_friend", "bff": "best_friend", "bestie": "best_friend",
    "roommate": "roommate", "flatmate": "roommate", "neighbour": "neighbour", "neighbor": "neighbour",
    "ex": "ex", "mentor": "mentor", "classmate": "classmate",
    "colleague": "colleague", "coworker": "colleague", "co-worker": "colleague", "boss": "boss",
    "manager": "manager", "teammate": "teammate", "employee": "employee", "client": "client",
}
ROLE_WORDS_ZH: dict[str, str] = {
    "妈妈": "mother", "母亲": "mother", "老妈": "mother", "妈": "mother", "爸爸": "father", "父亲": "father",
    "老爸": "father", "老婆": "wife", "妻子": "wife", "太太": "wife", "老公": "husband", "丈夫": "husband",
    "先生": "husband", "爱人": "partner", "对象": "partner", "男朋友": "boyfriend", "男友": "boyfriend",
    "女朋友": "girlfriend", "女友": "girlfriend", "未婚夫": "fiance", "未婚妻": "fiancee",
    "妹妹": "sister", "姐姐": "sister", "哥哥": "brother", "弟弟": "brother", "儿子": "son", "女儿": "daughter",
    "孩子": "child", "奶奶": "grandmother", "外婆": "grandmother", "姥姥": "grandmother",
    "爷爷": "grandfather", "外公": "grandfather", "姥爷": "grandfather", "阿姨": "aunt", "姑姑": "aunt",
    "舅舅": "uncle", "叔叔": "uncle", "表哥": "cousin", "表姐": "cousin", "表妹": "cousin", "表弟": "cousin",
    "堂哥": "cousin", "堂姐": "cousin", "堂妹": "cousin", "堂弟": "cousin", "婆婆": "mother_in_law",
    "岳母": "mother_in_law", "公公": "father_in_law", "岳父": "father_in_law",
    "朋友": "friend", "好朋友": "friend", "闺蜜": "best_friend", "最好的朋友": "best_friend", "好兄弟": "best_friend", "室友": "roommate",
    "邻居": "neighbour", "前任": "ex", "前男友": "ex", "前女友": "ex", "导师": "mentor", "同学": "classmate",
    "同事": "colleague", "老板": "boss", "领导": "boss", "上司": "boss", "经理": "manager", "客户": "client",
}
