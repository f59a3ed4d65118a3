"""Offline extraction cost: turns/s of extract_facts (rules + statements) on one core, and the
worst milliseconds any one turn costs — over LoCoMo turns and adversarial inputs.

Pure CPU, no services, no embedding. The LoCoMo file (shared/data/locomo) is read in place: every
turn of every speaker, with the session's date as the turn's time (so "last week" resolves as in
the pipeline). Throughput is the median of 3 runs over all turns; the worst per-turn time is the
maximum over turns (LoCoMo and adversarial) of the best of 3 timings of each, after a warm-up pass.

Times are the thread's CPU time (time.thread_time): on a shared machine wall time also counts the
time other processes hold the core, which is not what a turn costs. Wall-clock turns/s are printed
too, for reference.

Targets (issue 10 item 1, issue 12 item 3): >= 1,000 turns/s, worst <= 50 ms.

--quality adds a rough measure of what the offline facts keep: for each LoCoMo question whose
answer's words (at least half of them) are in its evidence turns' text, whether they are also in
the facts extracted from those turns — by question category (1 multi-hop, 2 temporal, 3
open-domain, 4 single-hop). A tuning aid (categories of sentences, never single questions).
    .venv/bin/python -m bench.extraction_offline [--data PATH] [--examples N] [--quality]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from domain.extraction import extract_facts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


def locomo_turns(path: Path) -> list[tuple[str, datetime]]:
    out: list[tuple[str, datetime]] = []
    for conv in json.loads(path.read_text()):
        c = conv["conversation"]
        for key, turns in c.items():
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            at = datetime.strptime(c[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
            out.extend((t["text"], at) for t in turns if t.get("text"))
    return out


def adversarial() -> dict[str, str]:
    return {
        "newline bomb 20 KB": "\n" * 20_000,
        "newline bomb + text": "I like" + "\n" * 20_000 + "tea",
        "punctuation runs": ", " * 10_000 + "never",
        "1 MB text": ("I'm a nurse and I work night shifts. Last week I adopted a cat named Miso. " * 14_000)[:1_000_000],
        "1 MB one word": "a" * 1_000_000,
        "1 MB spaces": "I like" + " " * 1_000_000,
        "long Chinese text": "我上周去了北京出差，我喜欢喝咖啡，我是一名护士。" * 4_000,
        "Chinese no punctuation": "我" * 200_000,
        "repeated openers": "I like " * 20_000,
        "repeated don't": "don't " * 20_000,
        "tiny sentences": "a." * 50_000,
        "first-person sentences": "I love it! " * 5_000,
        "Chinese tiny sentences": "我。" * 50_000,
        "run of adverbs": "I " + "really " * 50_000 + "went",
    }


def worst_ms(text: str, at: datetime, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        extract_facts(text, at)
        best = min(best, time.thread_time() - t0)
    return best * 1000


def quality(path: Path) -> None:
    import re

    from domain.text import tokens
    stats: dict[int, list[int]] = {}
    for conv in json.loads(path.read_text()):
        c, raw, facts = conv["conversation"], {}, {}
        for key, turns in c.items():
            if key.startswith("session_") and isinstance(turns, list):
                at = datetime.strptime(c[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
                for t in turns:
                    raw[t["dia_id"]] = set(tokens(t["text"]))
                    facts[t["dia_id"]] = set(tokens(" ".join(f.content for f in extract_facts(t["text"], at))))
        for q in conv["qa"]:
            answer = set(tokens(str(q.get("answer", ""))))
            if not answer:
                continue
            ids = [e.replace("D:", "D") for e in re.split(r"[;, ]+", " ".join(q.get("evidence", []))) if e.startswith("D")]
            in_raw = set().union(*(raw.get(i, set()) for i in ids)) if ids else set()
            in_facts = set().union(*(facts.get(i, set()) for i in ids)) if ids else set()
            s = stats.setdefault(q["category"], [0, 0, 0])
            s[0] += 1
            if len(answer & in_raw) * 2 >= len(answer):
                s[1] += 1
                s[2] += len(answer & in_facts) * 2 >= len(answer)
    for cat, (n, r, f) in sorted(stats.items()):
        print(f"  category {cat}: {n} questions, answer in the evidence turns: {r}, "
              f"also in their offline facts: {f} ({f / max(r, 1):.0%})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--examples", type=int, default=0, help="print the facts of N LoCoMo turns")
    ap.add_argument("--quality", action="store_true", help="answer words of LoCoMo questions kept in the facts")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})   # one core
    turns = locomo_turns(args.data)
    for text, at in turns:          # warm-up: compiled patterns, caches
        extract_facts(text, at)
    rates, walls, facts = [], [], 0
    for _ in range(3):
        t0, w0 = time.thread_time(), time.perf_counter()
        facts = sum(len(extract_facts(text, at)) for text, at in turns)
        rates.append(len(turns) / (time.thread_time() - t0))
        walls.append(len(turns) / (time.perf_counter() - w0))
    rate = statistics.median(rates)
    # Worst single turn: min over 3 timings per turn removes scheduler noise, max over turns is the bound.
    per_turn = sorted(((worst_ms(text, at), text) for text, at in turns), reverse=True)
    at = datetime(2026, 11, 30, 9, tzinfo=timezone.utc)
    adv = {name: worst_ms(text, at) for name, text in adversarial().items()}
    worst = max(per_turn[0][0], max(adv.values()))
    print(f"LoCoMo turns: {len(turns)}, facts: {facts} ({facts / len(turns):.2f}/turn)")
    print(f"throughput (one core, CPU time, median of 3): {rate:,.0f} turns/s  "
          f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}; wall clock: {statistics.median(walls):,.0f} turns/s, "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"worst LoCoMo turn (CPU): {per_turn[0][0]:.2f} ms ({len(per_turn[0][1])} chars); "
          f"p99 {per_turn[len(per_turn) // 100][0]:.2f} ms")
    for name, ms in adv.items():
        print(f"  adversarial {name:<24} {ms:8.2f} ms")
    print(f"worst per turn overall: {worst:.2f} ms  (target <= 50 ms)  "
          f"{'OK' if worst <= 50 and rate >= 1000 else 'MISSED'} (target >= 1,000 turns/s)")
    if args.quality:
        quality(args.data)
    for text, t_at in turns[:args.examples]:
        print(">", text)
        for d in extract_facts(text, t_at):
            print(f"    [{d.category}/{d.slot_hint}] {d.content}  tags={list(d.tags)} date={d.event_date}")


if __name__ == "__main__":
    main()
