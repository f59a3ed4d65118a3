"""Whose fact a memory states: the user's own, or someone else's the user told about.

"My friend Tom lives in Paris" is stored as "User's friend Tom lives in Paris": a true memory of
the user's world, but not an answer to "Where does the user live?". Recall ranks such third-party
memories below the user's own unless the question names them (query/recall.py), so a question about
the user is answered by the user's facts first (#30 item 6).

A memory is about a third party when its subject — what precedes the main verb — is one of the
user's relations ("User's sister", "User's best friend Ana", "用户的妻子", "用户妻子") and the user is
not part of it ("User's mom and User went hiking" is the user's own). A question names the third
party when it says the relation word ("my sister", "the user's wife", "妻子") or a capitalised
name that the memory's subject holds ("Where does Tom live?").

Pure functions over text; no I/O.
"""
from __future__ import annotations

import re
from functools import lru_cache

from domain.ontology import PEOPLE_EN, PEOPLE_ZH

_PEOPLE_EN = "|".join(re.escape(w) for w in sorted(PEOPLE_EN, key=len, reverse=True))
_PEOPLE_ZH = "|".join(re.escape(w) for w in sorted(PEOPLE_ZH, key=len, reverse=True))
# "User's [best|older|…] <relation>[ <Name>…]" up to the main verb; Chinese "用户[的]<relation>[名字]".
_THIRD_EN = re.compile(r"^User's (?:\w+ )?(?P<rel>" + _PEOPLE_EN + r")\b(?P<rest>[^.;,]*?)"
                       r"(?= (?:is|are|was|were|has|have|had|lives?|works?|loves?|likes?|\w+ed|\w+s)\b)")
_THIRD_ZH = re.compile(r"^用户的?(?P<rel>" + _PEOPLE_ZH + r")(?P<rest>[^，。,；;]{0,12}?)"
                       r"(?=是|在|住|有|喜欢|爱|去|做|当|叫|也|已经|刚|最近|会|不)")
_NAME = re.compile(r"\b[A-Z][a-z]+\b|[\u4e00-\u9fff]{2,4}")


@lru_cache(maxsize=4096)
def third_party(content: str) -> tuple[str, frozenset[str]] | None:
    """(the relation word, the names in the subject) when the memory states a third party's fact;
    None when it is the user's own (or its subject cannot be told)."""
    m = _THIRD_EN.match(content) or _THIRD_ZH.match(content)
    if m is None or "User" in m.group("rest") or "用户" in m.group("rest") or "和" in m.group("rest"):
        return None
    names = frozenset(n for n in _NAME.findall(m.group("rest")) if n not in {"User", "And"})
    return m.group("rel").lower(), names


def question_names(query: str, relation: str, names: frozenset[str]) -> bool:
    """Whether the question asks about that third party: it says the relation word or one of the names."""
    if re.search(r"(?i)\b" + re.escape(relation) + r"s?\b", query) if relation.isascii() else relation in query:
        return True
    return any(n in query for n in names)
