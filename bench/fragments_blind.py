"""Fragments judged by reading, blind (issue 30): two extractions side by side, neither named.

The fragment share that counts is a reader's, not bench/fragments.py's classifier. So that a
reader's verdict can compare two versions of the extractor without knowing which is which:

    # 1. the memories of each version (run in each checkout: a worktree for the older one)
    .venv/bin/python -m bench.fragments_blind dump /tmp/a.json
    # 2. 150 random memories of each, shuffled together, written without their version
    .venv/bin/python -m bench.fragments_blind prepare /tmp/a.json /tmp/b.json --out /tmp/judge --seed 7
    # 3. a reader labels /tmp/judge/items.txt per /tmp/judge/INSTRUCTIONS.md → /tmp/judge/labels.tsv
    # 4. the shares per version
    .venv/bin/python -m bench.fragments_blind score /tmp/judge

Use a fresh seed (and a fresh reader) for each comparison: a sample the extractor was tuned on
says nothing about one it was not.
"""
from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path

from bench.fragments import memories
from bench.locomo import DEFAULT_DATA

INSTRUCTIONS = """Each line of items.txt is `ID<TAB>memory`: a memory an AI memory service extracted from
a chat turn of a user (the user is written "User"; "User and others" means "we"). Judge each
memory ALONE: it is read later by an agent with no conversation at hand.

- W (whole): a reader understands what it says about the user or their world. A resolved date in
  parentheses, an "(in reply to: …)" question or a "(context: …)" sentence is part of the memory
  and may supply the referent. Vague or banal is still W if its meaning is clear.
- P (partial): the main point is clear but a secondary detail leans on something not named. Use P
  when in doubt between W and F.
- F (fragment): the main point cannot be recovered from the memory alone: its subject or main
  object is a pronoun or demonstrative naming nothing in the memory ("It brings User so much
  happiness", "User has been waiting for this for a long time"), or it is broken text, or a
  subordinate clause whose main clause was lost.

Write labels.tsv: one `ID<TAB>W|P|F` line per item, every id, in order.
"""


def dump(path: Path, data: Path) -> None:
    path.write_text(json.dumps([list(m) for m in memories(data)]))


def prepare(a: Path, b: Path, out: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    items = []
    for version, path in (("A", a), ("B", b)):
        mems = json.loads(path.read_text())
        items += [(version, mems[i][3]) for i in rng.sample(range(len(mems)), min(n, len(mems)))]
    rng.shuffle(items)
    out.mkdir(parents=True, exist_ok=True)
    (out / "items.txt").write_text("".join(f"{i}\t{content}\n" for i, (_, content) in enumerate(items, 1)))
    (out / "key.json").write_text(json.dumps({str(i): v for i, (v, _) in enumerate(items, 1)}))
    (out / "INSTRUCTIONS.md").write_text(INSTRUCTIONS)
    print(f"{len(items)} items in {out / 'items.txt'}; the key (which version each is) in {out / 'key.json'}")


def score(folder: Path) -> None:
    key = json.loads((folder / "key.json").read_text())
    labels = dict(line.split("\t") for line in (folder / "labels.tsv").read_text().split("\n") if "\t" in line)
    missing = sorted(set(key) - set(labels), key=int)
    if missing:
        raise SystemExit(f"labels.tsv lacks {len(missing)} ids, e.g. {missing[:5]}")
    for version in ("A", "B"):
        counts = Counter(labels[i].strip() for i, v in key.items() if v == version)
        n = sum(counts.values())
        print(f"{version}: n {n}  W {counts['W']}  P {counts['P']}  F {counts['F']}  "
              f"fragments {100 * counts['F'] / n:.1f}%  fragments or partial {100 * (counts['F'] + counts['P']) / n:.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path", type=Path)
    d.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p = sub.add_parser("prepare")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n", type=int, default=150)
    p.add_argument("--seed", type=int, required=True)
    s = sub.add_parser("score")
    s.add_argument("folder", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        dump(args.path, args.data)
    elif args.cmd == "prepare":
        prepare(args.a, args.b, args.out, args.n, args.seed)
    else:
        score(args.folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
