"""The people and places a question names, with what is known of them (#26): the prompt context's
"People and places" slot. "Where does my sister live?" names the user's sister (a role word,
English or Chinese: domain/entities.py ROLE_WORDS_*), "Is Ana still in Rome?" names Ana
(a name or alias of the user's entities); each named entity's relations holding now are read as
sentences ("Ana is the user's sister", "Ana lives in Rome"). A question that names no one gives
nothing: the user's own facts are the profile slot's.
"""
from __future__ import annotations

import re

from domain.entities import ROLE_WORDS_EN, ROLE_WORDS_ZH, SELF
from query import relations as q
from query.store import ReadModels

MAX_NAMED = 5        # entities a question seeds
MAX_LINES = 12
_ROLE_EN = re.compile(r"(?i)\b(?:my|our|the user's|user's|his|her)\s+(" + "|".join(
    re.escape(w) for w in sorted(ROLE_WORDS_EN, key=len, reverse=True)) + r")s?\b")
_ROLE_ZH = re.compile("|".join(re.escape(w) for w in sorted(ROLE_WORDS_ZH, key=len, reverse=True)))


def roles_in(question: str) -> list[str]:
    """The canonical roles a question names ("my sister" → sister, "我妈妈" → mother), in order."""
    found = [ROLE_WORDS_EN[m.group(1).lower()] for m in _ROLE_EN.finditer(question)]
    found += [ROLE_WORDS_ZH[m.group(0)] for m in _ROLE_ZH.finditer(question)]
    return list(dict.fromkeys(found))


def _names(question: str, entities: list[dict]) -> list[str]:
    low = question.casefold()
    out = []
    for e in entities:
        for name in [e.get("name")] + [a for a in e.get("aliases") or [] if a not in ROLE_WORDS_EN]:
            if not name or len(name) < 2:
                continue
            n = name.casefold()
            hit = (re.search(r"\b" + re.escape(n) + r"\b", low) is not None) if n.isascii() else n in low
            if hit:
                out.append(e["entity_id"])
                break
    return out


def named(models: ReadModels, user: str, question: str) -> list[str]:
    """Entity ids the question names, by role word, then by name or alias (at most MAX_NAMED)."""
    ids: list[str] = []
    for role in roles_in(question):
        ids += q.resolve_role(models, user, role)
    if any(c.isupper() for c in question) or not question.isascii():
        ids += _names(question, q.entities(models, user))
    return list(dict.fromkeys(i for i in ids if i != SELF))[:MAX_NAMED]


def people_lines(models: ReadModels, user: str, question: str) -> list[str]:
    """What is known now of the people and places the question names, as sentences."""
    ids = named(models, user, question)
    if not ids:
        return []
    rows = q.relations(models, user, touching=ids, limit=MAX_LINES * 2)
    known = q.names(models, user, {r["subject_id"] for r in rows} | {r["object_id"] for r in rows})
    lines = [s for r in rows if (s := q.sentence(r, known)) is not None]
    return list(dict.fromkeys(lines))[:MAX_LINES]
