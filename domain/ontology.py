"""The ontology: what can be said about a user, how many values it takes at a time, and the words
(English and Chinese) that say it. One module, read by the extraction rules (which slot a clause
fills, and with which canonical value) and by the memory rules (whether a new value supersedes the
old one, and whether two facts with the same value are the same memory); the relational memory
work (#26) reads the same table for its relation types (`relation`).

An attribute's key in the preference table is its name ("occupation") or, for a parametrised
attribute, "<name>:<object>" ("likes:spicy food", "has:dog"), whose value is a polarity ("true" /
"false"): the user likes or does not like *that* thing, one answer at a time.

Cardinality:
- ONE: a later value supersedes the earlier one, with history (the memory that held it becomes
  outdated, the preference gains a version). Every attribute below is ONE; a parametrised one is
  ONE per object (one polarity per thing), while the attribute as a whole has many objects.
- MANY: values coexist (friends, languages); a new value never supersedes. No key is MANY today;
  the memory rules honour it for the relation work to come.

A key the ontology does not know (the LLM channel's own keys) behaves as ONE with
same-value-same-memory, which is what the memory rules did before this module existed: old logs
decide the same way (law 5, what-if reproduces them).

Pure data and pure functions; no I/O.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

ONE, MANY = "one", "many"


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str                   # the key, or the key's prefix before ":" for a parametrised attribute
    cardinality: str            # ONE or MANY (per object for a parametrised attribute)
    category: str               # the memory category its facts take
    relation: str | None        # the user's relation this attribute is, for the entity graph (#26)
    parametrised: bool = False  # key "<name>:<object>", value a polarity
    # Two facts with the same key and value are the same memory (write-time dedup by slot). Not so
    # for possession: "I have a dog named Rex" and, later, "I adopted a dog named Max" are two dogs.
    same_value_same_memory: bool = True
    en: str = ""                # content sentences, "{v}" the value (or the object)
    zh: str = ""
    en_not: str = ""            # the negative polarity's sentence, for a parametrised attribute
    zh_not: str = ""


ATTRIBUTES: dict[str, Attribute] = {a.name: a for a in (
    Attribute("name", ONE, "identity", "named", en="User's name is {v}", zh="用户叫{v}"),
    Attribute("location", ONE, "identity", "lives_in", en="User lives in {v}", zh="用户住在{v}"),
    Attribute("occupation", ONE, "identity", "works_as", en="User works as {v}", zh="用户是{v}"),
    Attribute("employer", ONE, "identity", "works_at", en="User works at {v}", zh="用户在{v}工作"),
    Attribute("role", ONE, "identity", "has_role", en="User's role is {v}", zh="用户的职位是{v}"),
    Attribute("school", ONE, "identity", "studies_at", en="User studies at {v}", zh="用户在{v}读书"),
    Attribute("relationship_status", ONE, "identity", "relationship_status", en="User is {v}", zh="用户{v}"),
    Attribute("diet", ONE, "policy", "diet", en="User's diet: {v}", zh="用户的饮食：{v}"),
    Attribute("likes", ONE, "preference", "likes", parametrised=True,
              en="User likes {v}", zh="用户喜欢{v}", en_not="User does not like {v}", zh_not="用户不喜欢{v}"),
    Attribute("has", ONE, "fact", "owns", parametrised=True, same_value_same_memory=False,
              en="User has {v}", zh="用户有{v}", en_not="User does not have {v}", zh_not="用户没有{v}"),
    Attribute("does", ONE, "fact", "habit", parametrised=True,
              en="User {v}", zh="用户{v}", en_not="User does not {v}", zh_not="用户不{v}"),
    # Constraints are keyed by their value ("constraint:allergy:peanuts" = true): one per thing.
    Attribute("constraint", ONE, "policy", None, parametrised=True),
)}


def attribute(key: str | None) -> Attribute | None:
    """The attribute a preference key belongs to ("likes:tea" → likes), or None if unknown."""
    if not key:
        return None
    a = ATTRIBUTES.get(key)
    if a is not None and not a.parametrised:
        return a
    head, sep, _ = key.partition(":")
    a = ATTRIBUTES.get(head) if sep else None
    return a if a is not None and a.parametrised else None


def supersedes(key: str) -> bool:
    """Does a new value for this key supersede the current one? (Unknown keys: yes, as before.)"""
    a = attribute(key)
    return a is None or a.cardinality == ONE


def same_value_same_memory(key: str | None) -> bool:
    """Are two facts with this key and the same value one memory whatever their wording?"""
    a = attribute(key)
    return a is None or a.same_value_same_memory


# -- lexicon ----------------------------------------------------------------------------------
# The people a user speaks of (their relations): a fact whose subject is one of them is a third
# party's (domain/subjects.py), and the extraction rules' kinds read the same words.
PEOPLE_EN: tuple[str, ...] = tuple(w.replace("_", " ") for w in (
    "wife husband partner spouse son sons daughter daughters kid kids children child baby babies mom mum "
    "mother dad father parents brother brothers sister sisters sibling siblings grandma grandpa "
    "grandmother grandfather grandparents grandkids grandchildren aunt uncle cousin cousins nephew niece "
    "family friend friends best_friend bff boyfriend girlfriend fiance fiancee fiancé fiancée roommate "
    "roommates neighbor neighbors neighbour neighbours in-laws mother-in-law father-in-law twins mentor ex "
    "colleague colleagues coworker coworkers boss manager teammate teammates classmate classmates").split())
PEOPLE_ZH: tuple[str, ...] = tuple(("老公 老婆 丈夫 妻子 爱人 儿子 女儿 孩子 宝宝 妈妈 爸爸 母亲 父亲 父母 哥哥 姐姐 弟弟 妹妹 "
                                    "男朋友 女朋友 对象 爷爷 奶奶 外公 外婆 姥姥 姥爷 朋友 闺蜜 室友 同学 家人 同事 老板 "
                                    "领导 邻居").split())

# Each canonical value of an enumerated attribute with the words that say it. English phrases are
# matched after "I'm / I am / we're / I got / we got / I just got / I became"; Chinese words anywhere
# in a first-person clause.
RELATIONSHIP_EN: dict[str, tuple[str, ...]] = {
    "single": ("single", "no longer married", "not married anymore", "not seeing anyone"),
    "in a relationship": ("in a relationship", "dating someone", "seeing someone", "taken"),
    "engaged": ("engaged",),
    "married": ("married", "a married man", "a married woman", "newlywed", "newlyweds"),
    "divorced": ("divorced",),
    "separated": ("separated",),
    "widowed": ("widowed", "a widow", "a widower"),
}
# Events that change the status ("we broke up", "my wife and I split up").
RELATIONSHIP_EVENTS_EN: dict[str, tuple[str, ...]] = {
    "single": ("broke up", "split up", "called off the engagement", "called off our engagement"),
    "divorced": ("got divorced", "are getting divorced"),
    "engaged": ("got engaged", "proposed and she said yes", "proposed and he said yes"),
    "married": ("got married", "tied the knot"),
}
RELATIONSHIP_ZH: dict[str, tuple[str, ...]] = {
    "single": ("单身", "分手了", "分手", "恢复单身"),
    "in a relationship": ("谈恋爱", "在谈恋爱", "脱单", "有男朋友", "有女朋友", "有对象"),
    "engaged": ("订婚",),
    "married": ("结婚了", "结婚", "已婚"),
    "divorced": ("离婚了", "离婚", "离异"),
    "widowed": ("丧偶",),
}
RELATIONSHIP_LABEL_ZH = {"single": "单身", "in a relationship": "在恋爱中", "engaged": "已订婚", "married": "已婚",
                         "divorced": "已离婚", "separated": "已分居", "widowed": "丧偶"}

DIET_EN: dict[str, tuple[str, ...]] = {
    "vegan": ("vegan", "a vegan", "plant-based", "fully plant-based"),
    "vegetarian": ("vegetarian", "a vegetarian", "veggie", "veggie now"),
    "pescatarian": ("pescatarian", "a pescatarian", "pescetarian"),
    "keto": ("on keto", "on a keto diet", "doing keto"),
    "eats meat": ("no longer vegetarian", "not vegetarian anymore", "not vegan anymore", "no longer vegan",
                  "a meat eater"),
}
DIET_EVENTS_EN: dict[str, tuple[str, ...]] = {
    "vegan": ("went vegan", "became vegan", "turned vegan", "switched to a vegan diet", "gone vegan"),
    "vegetarian": ("went vegetarian", "became vegetarian", "became a vegetarian", "turned vegetarian",
                   "gone vegetarian", "stopped eating meat", "gave up meat", "quit eating meat"),
    "pescatarian": ("went pescatarian", "became pescatarian"),
    "eats meat": ("eat meat again", "started eating meat again", "started eating meat", "went back to eating meat",
                  "gave up being vegetarian", "stopped being vegetarian", "stopped being vegan", "quit being vegan",
                  "quit being vegetarian"),
}
DIET_ZH: dict[str, tuple[str, ...]] = {
    "vegan": ("纯素", "严格素食"),
    "vegetarian": ("吃素", "素食者", "素食主义者", "不吃肉"),
    "eats meat": ("不再吃素", "不吃素了", "开始吃肉", "又开始吃肉", "恢复吃肉"),
}
DIET_LABEL_ZH = {"vegan": "纯素", "vegetarian": "素食", "pescatarian": "只吃鱼素", "keto": "生酮饮食",
                 "eats meat": "吃肉"}
DIET_LABEL_EN = {"vegan": "vegan", "vegetarian": "vegetarian", "pescatarian": "pescatarian", "keto": "keto",
                 "eats meat": "eats meat"}

# Polarity of a preference: the verbs that say the user likes, or does not (any longer) like, a thing.
LIKES_EN = ("like", "love", "enjoy", "prefer", "adore", "am into", "am a fan of", "am a big fan of", "'m into",
            "'m a fan of", "'m a big fan of")
DISLIKES_EN = ("don't like", "do not like", "dislike", "hate", "can't stand", "cannot stand", "can not stand",
               "no longer like", "no longer love", "no longer enjoy", "don't enjoy", "do not enjoy",
               "don't love", "stopped liking", "stopped enjoying", "am not into", "'m not into",
               "am not a fan of", "'m not a fan of", "am tired of", "'m tired of", "am sick of", "'m sick of",
               "am done with", "'m done with", "detest", "loathe")
LIKES_ZH = ("喜欢", "爱", "最爱", "喜爱", "热爱", "爱上了", "迷上了")
DISLIKES_ZH = ("不喜欢", "讨厌", "受不了", "不再喜欢", "不爱", "不太喜欢", "很讨厌", "厌倦了", "烦透了")

# Words that end a "no longer" statement ("I don't like spicy food anymore").
NO_LONGER_EN = ("anymore", "any more", "any longer", "these days", "now", "lately", "at all")


def pick(lexicon: dict[str, tuple[str, ...]], phrase: str) -> str | None:
    """The canonical value whose words say `phrase` exactly (case-insensitive), else None."""
    p = re.sub(r"\s+", " ", phrase.strip().lower())
    for value, words in lexicon.items():
        if p in words:
            return value
    return None


def alternation(*lexicons: dict[str, tuple[str, ...]]) -> str:
    """A regex alternation of every phrase in the lexicons, longest first (so "a vegan" wins over "vegan")."""
    words = {w for lex in lexicons for ws in lex.values() for w in ws}
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))


def words_alternation(words: tuple[str, ...]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(set(words), key=len, reverse=True))
