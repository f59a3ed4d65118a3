"""Token budgeting for prompt context (pure): estimate, fit each slot, trim by priority.

The estimate needs no tokenizer download: CJK characters count one token each (close for
common BPE vocabularies), other text one token per four characters, plus one per item for
the bullet and newline.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

_CJK = re.compile(r"[\u3000-\u9fff\uf900-\ufaff\uff00-\uffef]")


def estimate_tokens(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4) + 1


@dataclass
class Slot:
    name: str
    title: str
    items: list[str]
    budget: int
    required: bool = False          # required slots (constraints) are never trimmed
    newest_first: bool = False      # items given newest first, so trimming cuts the oldest; shown oldest first
    kept: list[str] = field(default_factory=list)


def assemble(slots: list[Slot], total_budget: int) -> tuple[str, dict[str, dict[str, Any]]]:
    """Fit `slots` (given in priority order, most important first) into `total_budget` tokens.

    1. each slot keeps its items in order while they fit its own budget (required: all);
    2. while the total is over budget, the last item of the least important non-required slot
       that still has items is cut;
    3. the text lists the slots in the given order, each under its title.
    """
    for slot in slots:
        used, slot.kept = 0, []
        for item in slot.items:
            cost = estimate_tokens(item)
            if slot.required or used + cost <= slot.budget:
                slot.kept.append(item)
                used += cost

    def total() -> int:
        return sum(estimate_tokens(i) for s in slots for i in s.kept)

    for slot in reversed(slots):
        while not slot.required and slot.kept and total() > total_budget:
            slot.kept.pop()
    text = "\n\n".join(f"## {s.title}\n" + "\n".join(f"- {i}" for i in (s.kept[::-1] if s.newest_first else s.kept))
                         for s in slots if s.kept)
    account = {s.name: {"kept": len(s.kept), "cut": len(s.items) - len(s.kept),
                        "tokens": sum(estimate_tokens(i) for i in s.kept), "budget": s.budget,
                        "required": s.required} for s in slots}
    account["total"] = {"tokens": total(), "budget": total_budget, "over_budget": total() > total_budget}
    return text, account
