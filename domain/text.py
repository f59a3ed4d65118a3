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
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

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


# -- dates a turn names relative to its own time ----------------------------------------------
# "last week", "yesterday", "two days ago", "上周", "昨天", "下个月": a bounded set of phrases,
# resolved by hand against the turn's event time (never the clock), so extraction stays pure and
# fast (a general date parser costs milliseconds a sentence). Each match is linear: alternatives
# of fixed words, no nested repetition.

@dataclass(frozen=True, slots=True)
class RelativeDate:
    start: int            # span of the phrase in the text
    end: int
    day: date             # the resolved date (first day of a week/month/year/season span)
    unit: str             # "day", "week", "weekend", "month", "year" or "season"
    label: str            # how the content sentence names it: "2026-11-23", "2026-10", "summer 2025"


_WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5,
                 "sun": 6}
_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december")
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
           "a couple": 2}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_REL_EN = re.compile(
    r"\b(?:(?P<dbyd>the day before yesterday)|(?P<datm>the day after tomorrow)"
    r"|(?P<yday>yesterday|last night)|(?P<today>today|tonight|this morning|this afternoon|this evening)"
    r"|(?P<tmrw>tomorrow)"
    r"|(?P<dir>last|next|this past|this)\s+(?P<unit>weekend|week|month|year|" + "|".join(_SEASONS) + "|"
    + "|".join(_WEEKDAYS) + "|" + "|".join(_MONTH_NAMES) + "|" + "|".join(sorted(_WEEKDAY_ABBR, key=len, reverse=True))
    + r")"
    r"|(?P<n>\d{1,2}|a couple of|a couple|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"\s+(?P<nunit>day|week|month|year)s?\s+ago)\b", re.I)
_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "几": None}
_ZH_WD = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_REL_ZH = re.compile(
    r"(?P<zday>大前天|前天|昨天|昨晚|今天|今晚|今早|明天|后天)"
    r"|(?P<zdir>上|下|这|本)(?:个)?(?P<zwk>周末|周|星期|礼拜)(?P<zwd>[一二三四五六日天])?"
    r"|(?P<zmdir>上|下|这|本)(?:个)?月"
    r"|(?P<zyr>前年|去年|明年)"
    r"|(?P<zn>\d{1,2}|[一两二三四五六七八九十])(?:个)?(?P<znunit>天|周|星期|月|年)(?:以前|前)")


# Substrings without which no phrase above can match: most sentences skip the patterns entirely.
_REL_EN_GATE = ("yesterday", "today", "tonight", "tomorrow", "last", "next", "this", " ago")
_REL_ZH_GATE = "天晚早周星拜月年"


_ZH_UNIT = {"天": "day", "周": "week", "星期": "week", "月": "month"}


def _ago(today: date, n: int, unit: str) -> tuple[date, str, str]:
    """'n days/weeks/months/years ago' (any other unit counts as years), resolved like the rest."""
    if unit == "day":
        return _resolve("day", today - timedelta(days=n))
    if unit == "week":
        return _resolve("week", today - timedelta(days=7 * n))
    if unit == "month":
        return _resolve("month", _month_shift(today, -n))
    return _resolve("year", date(today.year - n, 1, 1))


def _month_shift(d: date, months: int) -> date:
    m = d.year * 12 + d.month - 1 + months
    return date(m // 12, m % 12 + 1, 1)


def _season(d: date, name: str, direction: str) -> date:
    """First day of the named season: the last one that has ended, the current/coming one, the next."""
    m = _SEASONS[name]
    start = date(d.year - (1 if m == 12 and d.month < 3 else 0), m, 1)
    if direction == "last":
        while _month_shift(start, 3) > d:
            start = date(start.year - 1, m, 1)
    elif direction == "next":
        while start <= d:
            start = date(start.year + 1, m, 1)
    return start


def _resolve(unit: str, day: date, season: str | None = None) -> tuple[date, str, str]:
    if unit == "month":
        day = date(day.year, day.month, 1)
        return day, unit, day.strftime("%Y-%m")
    if unit == "year":
        return date(day.year, 1, 1), unit, str(day.year)
    if unit == "season":
        return day, unit, f"{season} {day.year}"
    return day, unit, day.isoformat()


def relative_dates(text: str, at: datetime) -> list[RelativeDate]:
    """The relative dates a turn names, resolved against the turn's time `at` (a week: `at` − 7 days,
    the week it lies in; a month: its first day; "last Friday": the latest Friday before `at`).

    Bounded: a phrase whose date falls outside the calendar ("yesterday" on 0001-01-01) is left
    unresolved — its statement is kept as written, undated — never an OverflowError that would cost
    the whole turn its facts. (Event times outside 1970 … broker time + skew are refused earlier,
    schemas/records.py, so the pipeline never meets one.)"""
    try:
        return _relative_dates(text, at)
    except (OverflowError, ValueError):
        return [r for r in _relative_dates_each(text, at) if r is not None]


def _relative_dates_each(text: str, at: datetime) -> list[RelativeDate | None]:
    """The slow path after an overflow: phrase by phrase, dropping the ones out of range."""
    out: list[RelativeDate | None] = []
    for m in list(_REL_EN.finditer(text)) + list(_REL_ZH.finditer(text)):
        try:
            got = _relative_dates(m.group(), at)
        except (OverflowError, ValueError):
            continue
        out += [RelativeDate(m.start() + r.start, m.start() + r.end, r.day, r.unit, r.label) for r in got]
    return out


def _relative_dates(text: str, at: datetime) -> list[RelativeDate]:
    today = at.date()
    out: list[RelativeDate] = []
    n: int | None   # a count of units ago; None: "几" (some), which dates nothing
    low = text.lower()
    en = any(w in low for w in _REL_EN_GATE)
    zh = any(c in text for c in _REL_ZH_GATE)
    for m in (_REL_EN.finditer(text) if en else ()):
        g = {k: (v.lower() if v else v) for k, v in m.groupdict().items()}
        res: tuple[date, str, str] | None = None
        if g["dbyd"]:
            res = _resolve("day", today - timedelta(days=2))
        elif g["datm"]:
            res = _resolve("day", today + timedelta(days=2))
        elif g["yday"]:
            res = _resolve("day", today - timedelta(days=1))
        elif g["today"]:
            res = _resolve("day", today)
        elif g["tmrw"]:
            res = _resolve("day", today + timedelta(days=1))
        elif g["dir"]:
            d, u = g["dir"], g["unit"]
            if d == "this past":                # "this past weekend" is the last one
                d = "last"
            step = {"last": -1, "next": 1, "this": 0}[d]
            if u == "week":
                res = _resolve("week", today + timedelta(days=7 * step))
            elif u == "weekend":
                sat = today + timedelta(days=(5 - today.weekday()) % 7)       # this (coming) Saturday
                if d == "last":
                    sat = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
                elif d == "next":
                    sat += timedelta(days=7)
                res = _resolve("weekend", sat)
            elif u == "month":
                res = _resolve("month", _month_shift(today, step))
            elif u == "year":
                if step:                    # "this year" dates nothing ("I turn 30 this year")
                    res = _resolve("year", date(today.year + step, 1, 1))
            elif u in _SEASONS:
                res = _resolve("season", _season(today, u, d), u)
            elif u in _MONTH_NAMES:
                # "last August": the latest August before this month; "next May": the first after it;
                # "this May": this year's
                month = _MONTH_NAMES.index(u) + 1
                year = today.year
                if d == "last" and month >= today.month:
                    year -= 1
                elif d == "next" and month <= today.month:
                    year += 1
                res = _resolve("month", date(year, month, 1))
            else:
                wd = _WEEKDAYS.index(u) if u in _WEEKDAYS else _WEEKDAY_ABBR[u]
                if d == "last":
                    day = today - timedelta(days=(today.weekday() - wd) % 7 or 7)
                else:
                    day = today + timedelta(days=(wd - today.weekday()) % 7 or (7 if d == "next" else 0))
                res = _resolve("day", day)
        elif g["n"]:
            n = int(g["n"]) if g["n"].isdigit() else _EN_NUM[g["n"]]
            res = _ago(today, n, g["nunit"])
        if res is not None:
            out.append(RelativeDate(m.start(), m.end(), *res))
    for m in (_REL_ZH.finditer(text) if zh else ()):
        g = m.groupdict()
        res = None
        if g["zday"]:
            off = {"大前天": -3, "前天": -2, "昨天": -1, "昨晚": -1, "今天": 0, "今晚": 0, "今早": 0, "明天": 1, "后天": 2}
            res = _resolve("day", today + timedelta(days=off[g["zday"]]))
        elif g["zdir"]:
            step = {"上": -1, "下": 1, "这": 0, "本": 0}[g["zdir"]]
            if g["zwk"] == "周末":
                sat = today + timedelta(days=(5 - today.weekday()) % 7)
                if step < 0:
                    sat = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
                elif step > 0:
                    sat += timedelta(days=7)
                res = _resolve("weekend", sat)
            elif g["zwd"]:
                monday = today - timedelta(days=today.weekday()) + timedelta(days=7 * step)
                res = _resolve("day", monday + timedelta(days=_ZH_WD[g["zwd"]]))
            else:
                res = _resolve("week", today + timedelta(days=7 * step))
        elif g["zmdir"]:
            res = _resolve("month", _month_shift(today, {"上": -1, "下": 1, "这": 0, "本": 0}[g["zmdir"]]))
        elif g["zyr"]:
            res = _resolve("year", date(today.year + {"前年": -2, "去年": -1, "明年": 1}[g["zyr"]], 1, 1))
        elif g["zn"]:
            n = int(g["zn"]) if g["zn"].isdigit() else _ZH_NUM[g["zn"]]
            if n:
                res = _ago(today, n, _ZH_UNIT.get(g["znunit"], "year"))
        if res is not None:
            out.append(RelativeDate(m.start(), m.end(), *res))
    return out
