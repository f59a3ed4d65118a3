"""Tokenising and BM25 for the keyword recall path (pure).

Vectors are weak on names, numbers and dates ("Project Zeta", "2023-05-07", "42"); a keyword
path catches them. English and numbers split on word boundaries; Chinese has no spaces, so CJK
runs become character unigrams and bigrams (the usual trick without a segmenter).
"""
from __future__ import annotations

import math
import re
from collections import Counter

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
