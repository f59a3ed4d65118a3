"""Tokenising and BM25 for the keyword recall path (pure).

Vectors are weak on names, numbers and dates ("Project Zeta", "2023-05-07", "42"); a keyword
path catches them. English and numbers split on word boundaries; Chinese has no spaces, so CJK
runs become character unigrams and bigrams (the usual trick without a segmenter). Dates a
query names ("on 8 May, 2023", "in June 2022", "2023年5月") become time ranges that recall
matches against memories' event times.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from datetime import datetime, timedelta, timezone

_WORD = re.compile(r"[0-9]+(?:[.:/-][0-9]+)*|[a-z][a-z0-9']*|[\u3400-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
STOP = frozenset("a an the of to in on at for and or is are was were be been i you he she it we they my your "
                 "his her its our their me him us them do does did what which who whom when where why how "
                 "user user's s 's that this with as by from about".split())


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for m in _WORD.finditer(text.lower()):
        w = m.group(0)
        if _CJK.match(w):
            out.extend(w)
            out.extend(w[i:i + 2] for i in range(len(w) - 1))
        elif w not in STOP:
            out.append(w)
    return out


def bm25(query: list[str], docs: dict[str, list[str]], n_docs: int, avg_len: float,
         k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """BM25 of each doc for the query; document frequencies counted over `docs`."""
    df = Counter(t for toks in docs.values() for t in set(toks))
    scores: dict[str, float] = {}
    for doc_id, toks in docs.items():
        tf = Counter(toks)
        s = 0.0
        for t in set(query):
            if tf[t]:
                idf = math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(toks) / max(avg_len, 1e-9)))
        if s > 0:
            scores[doc_id] = s
    return scores


def bm25_ceiling(query: list[str], docs: dict[str, list[str]], n_docs: int) -> float:
    """What a document holding every query term once, at average length, scores under bm25():
    the sum of the query terms' idf. Dividing by it puts keyword scores on an absolute [0, ~1]
    scale, so a weak match (only a common word) stays weak however the other documents fare."""
    df = Counter(t for toks in docs.values() for t in set(toks))
    return sum(math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5)) for t in set(query))


# -- dates a query names ---------------------------------------------------------------------

_MONTHS = {m: i + 1 for i, m in enumerate(("january february march april may june july august september "
                                           "october november december").split())}
_MONTHS.update({m: i + 1 for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())})
_MONTHS["sept"] = 9
_MON = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_D = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_Y = r"(?P<year>(?:19|20)\d\d)"
_DATE_PATTERNS = (
    re.compile(r"\b" + _D + r"\s+(?:of\s+)?" + _MON + r",?\s+" + _Y + r"\b", re.I),   # 8 May, 2023 / 8th of May 2023
    re.compile(r"\b" + _MON + r"\s+" + _D + r",?\s+" + _Y + r"\b", re.I),              # May 8, 2023
    re.compile(r"\b" + _Y + r"[-/](?P<mnum>\d{1,2})[-/](?P<day>\d{1,2})\b"),           # 2023-05-08
    re.compile(_Y + r"\s*年\s*(?P<mnum>\d{1,2})\s*月(?:\s*(?P<day>\d{1,2})\s*[日号])?"),   # 2023年5月8日 / 2023年5月
    re.compile(r"\b" + _MON + r",?\s+" + _Y + r"\b", re.I),                            # May 2023
    re.compile(r"\b(?:in|during|since|by|of|throughout)\s+" + _Y + r"\b", re.I),      # in 2023
)
_AMBIGUOUS = {"may", "mar", "march", "jan", "jun", "sep", "oct", "nov", "dec", "aug", "apr", "feb", "jul"}


def date_ranges(text: str, pad: timedelta = timedelta(days=1)) -> list[tuple[datetime, datetime]]:
    """The calendar dates, months and years a query names, as UTC [start, end) ranges widened by
    `pad` on each side (time zones; "the day before"). Absolute dates only: "last week" needs a
    clock and is left alone. A lower-case month that is also a word ("may", "march") or an
    abbreviation is not read as a month."""
    out: list[tuple[datetime, datetime]] = []
    taken: list[tuple[int, int]] = []
    for pat in _DATE_PATTERNS:
        for m in pat.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            g = m.groupdict()
            mon_word = g.get("mon")
            if mon_word and mon_word.lower() in _AMBIGUOUS and not mon_word[0].isupper():
                continue
            try:
                year = int(g["year"])
                month = int(g["mnum"]) if g.get("mnum") else (_MONTHS[mon_word.lower()] if mon_word else None)
                if month is None:
                    start, end = datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
                elif g.get("day"):
                    start = datetime(year, month, int(g["day"]), tzinfo=timezone.utc)
                    end = start + timedelta(days=1)
                else:
                    start = datetime(year, month, 1, tzinfo=timezone.utc)
                    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
            except (ValueError, KeyError):
                continue
            taken.append((m.start(), m.end()))
            out.append((start - pad, end + pad))
    return out
