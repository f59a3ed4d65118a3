"""What offline extraction produces, and how much of a turn it looks at: shared by the rule
channel (extraction.py) and the statement channel (statements.py). Pure."""
from __future__ import annotations

from dataclasses import dataclass, field

# Bounded cost: extraction looks at the first MAX_CHARS characters of a turn, whatever its length
# (a pasted log or document is not a statement about the user), and every pattern below is linear
# in what it looks at, so no turn costs more than a few milliseconds (bench/extraction_offline.py).
MAX_CHARS = 4000
MAX_RULE_FACTS = 24    # the leftmost ones: a pasted list of 500 "I like X" is not 500 memories (each is embedded)


def bounded(text: str) -> str:
    """The part of a turn extraction looks at: its first MAX_CHARS characters, ending at a blank or
    punctuation when one is near, so the last word is not cut ("Don't wor…")."""
    if len(text) <= MAX_CHARS:
        return text
    cut = text[:MAX_CHARS]
    for i in range(MAX_CHARS - 1, MAX_CHARS - 80, -1):
        if not cut[i].isalnum():
            return cut[:i]
    return cut


@dataclass(frozen=True, slots=True)
class FactDraft:
    rule: str
    key: str | None          # preference-table slot; None for statement facts (they fill no slot)
    value: str | None
    content: str
    category: str
    importance: float
    slot_hint: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    event_date: str | None = None   # ISO date the fact's happening resolves to ("last week" → its date)
