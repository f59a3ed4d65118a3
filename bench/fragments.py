"""How many offline-extracted memories are fragments (issue 30 item 5): memories whose meaning lived
in the neighbouring sentence or in the other speaker's turn ("User thinks right now its enough",
"User will remember them if User ever gets to groom Toby").

Runs the offline channel exactly as the rule extractor runs it for a turn
(streams/extraction_core.offline_drafts: extract_facts over the turn's text at its event time, with
the session's previous turn of the other speaker as context) over every turn of the LoCoMo
conversations (shared/data/locomo, read in place), both speakers, as bench/locomo.py --from-turns
does: one user per speaker, that speaker's own turns with role user. Prints:

- the share of ALL extracted memories that the heuristic classifier below calls fragments, by reason;
- a deterministic random sample of N memories (seed fixed) with the classifier's verdict, for
  judging by reading (fragment = meaning not recoverable from the memory alone).

The classifier is a proxy, not the measure: it flags unresolved pronouns and demonstratives (it,
that, this, them, those, there; he/she/they without a named person or a relation in the fact), a
fact opening with a conjunction, and a fact with no content word besides its verb.

    .venv/bin/python -m bench.fragments [--data PATH] [--sample 40] [--seed 30] [--all] [--no-context]
"""
from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from pathlib import Path

from bench.locomo import DEFAULT_DATA, load_turns
from domain.extraction import extract_facts
from domain.reply_context import reply_pointer
from domain.text import STOP

_W = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_DEMONSTRATIVE_BARE = re.compile(
    r"(?i)\b(?:this|that|these|those)\b(?=\s*(?:$|[,.;:!?)]|(?:is|was|are|were|'s|will|would|has|had|have|can|could|"
    r"made|makes|make|helped|helps|help|gave|gives|give|brought|brings|keeps|kept|means|meant|reminds|reminded|"
    r"too|again|out|up|for|to|with|in|on|at|about|so|and|but|because|when|if|one|time|day|week|year|moment|"
    r"place|stuff|kind|way|thing|things)\b))")
_IT = re.compile(r"(?i)\b(?:it|its)\b")
_DUMMY_IT = re.compile(r"(?i)\bit(?:'s| is| was| has been| will be)\s+(?:\w+\s+){0,2}(?:to|that|for|when|how)\b|"
                       r"\bmake it\b|\bmade it\b|\bfor it\b")
_THERE = re.compile(r"(?i)\bthere\b(?!\s*(?:is|are|was|were|'s|will|has|have|had|be|been))")
_THIRD = re.compile(r"(?i)\b(?:he|she|him|his|her|hers|they|he's|she's|they're|they've)\b")
_NAMED = re.compile(r"(?<![.!?]\s)(?<!^)\b(?!User\b|I\b)[A-Z][a-z]+")
_RELATION = re.compile(r"(?i)\b(?:mom|mother|dad|father|parents?|brother|sister|siblings?|son|daughter|kids?|"
                       r"children|child|husband|wife|partner|friends?|family|grandma|grandpa|grand\w+|aunt|uncle|"
                       r"cousins?|boss|coworkers?|colleagues?|neighbou?rs?|team|people|students?|clients?|"
                       r"customers?|pets?|dogs?|cats?|puppy|puppies|kitten|group|community|members?|folks|"
                       r"boyfriend|girlfriend|fianc\w+|baby|babies|guys|everyone|others|teacher|doctor|artists?|"
                       r"mentor|crowd|audience|band|players?|them)\b")
_CONJ_START = re.compile(r"(?i)^(?:and|but|so|because|cause|cuz|or|if|when|while|though|although|which|as|then|"
                         r"since|until|unless|whereas)\b")
_USER_VERB = re.compile(r"^User(?:'s)?\s+(?:\w+ly\s+)?(?:is|has|was|will|would|can|could|does|did|had)?\s*\w+")


_NP_BEFORE = re.compile(r"(?i)\b(?:a|an|the|my|their|User's|some|this|that|these|those|his|her|our)\s+[a-z][\w'-]*|"
                        r"(?<!^)\b(?!User\b)[A-Z][a-z]+|\b\w{3,}s\b")


def _unresolved(c: str, pronoun: re.Pattern[str]) -> bool:
    """A pronoun of `pronoun` with no noun phrase before it in the fact (User itself is none)."""
    for m in pronoun.finditer(c):
        head = re.sub(r"^User(?:'s)?\s+\w+", "", c[:m.start()])
        if not _NP_BEFORE.search(head):
            return True
    return False


def fragment_reasons(content: str) -> list[str]:
    """Why a memory may be a fragment (empty: it reads as a whole fact). English only: a Chinese
    memory is judged by reading. "their/them/themselves" are the user's own (third_person_en writes
    them for my/me once "User" is named), so they are not counted."""
    c = content.replace("’", "'")
    c = re.sub(r"\s*\((?:on|in|week of|weekend of) [^)]*\)$", "", c)   # the resolved date adds no meaning
    c = re.sub(r"\s*\(in reply to: [^()]*\)$", "", c)   # judged on the statement itself: the proxy cannot read the question
    if re.search(r"[\u3400-\u9fff]", c):
        return []
    why: list[str] = []
    if _CONJ_START.match(c):
        why.append("conjunction")
    scrubbed = _DUMMY_IT.sub(" ", c)
    if _unresolved(scrubbed, _IT):
        why.append("it")
    if _DEMONSTRATIVE_BARE.search(c):
        why.append("this/that")
    if _THERE.search(c) and _unresolved(c, _THERE):
        why.append("there")
    if _unresolved(c, _THIRD) and not _RELATION.search(c) and not _NAMED.search(c):
        why.append("he/she/they")
    rest = _USER_VERB.sub("", c)
    words = [w for w in _W.findall(rest.lower()) if w not in STOP and w not in _LIGHT]
    if len(words) < 1:
        why.append("no object")
    return why


_LIGHT = frozenset("so really very just too also it's that's lot lots much thing things stuff way good great nice cool "
                   "fun bad well now here there again still even ever right".split())


def memories(path: Path, context: bool = True) -> list[tuple[str, str, str, str]]:
    """(conversation, dia_id, turn text, memory content) for every offline fact of every turn,
    each turn read as the reply to the other speaker's previous turn of its session (as the live
    extractor does: streams/extraction_core.ReplyContexts) unless `context` is False."""
    out = []
    for cid, turns in load_turns(path).items():
        last_other: str | None = None
        last_session = None
        for t in turns:
            if t.session != last_session:
                last_other, last_session = None, t.session
            for d in extract_facts(t.text, at=t.time, reply_to=reply_pointer(last_other) if context else None):
                out.append((cid, t.dia_id, t.text, d.content))
            last_other = t.text        # the next turn's speaker reads this one as the other's previous turn
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--all", action="store_true", help="print every memory, not only the sample")
    ap.add_argument("--flagged", action="store_true", help="print every memory the classifier flags")
    ap.add_argument("--no-context", action="store_true", help="extract without the other speaker's previous turn")
    args = ap.parse_args(argv)
    mems = memories(args.data, context=not args.no_context)
    reasons = Counter[str]()
    flagged = 0
    for _, _, _, content in mems:
        why = fragment_reasons(content)
        flagged += bool(why)
        reasons.update(why)
    if args.all or args.flagged:
        for cid, dia, _, content in mems:
            why = fragment_reasons(content)
            if args.all or why:
                print(f"{cid} {dia:7} {'F' if why else ' '} {content}" + (f"   [{', '.join(why)}]" if why else ""))
        print()
    sample = random.Random(args.seed).sample(range(len(mems)), min(args.sample, len(mems)))
    print(f"sample of {len(sample)} (seed {args.seed}), turn → memory, F = the classifier's fragment:")
    s_flag = 0
    for n, i in enumerate(sorted(sample), 1):
        cid, dia, text, content = mems[i]
        why = fragment_reasons(content)
        s_flag += bool(why)
        print(f"{n:2}. {cid} {dia:7} {'F' if why else ' '} {content}" + (f"   [{', '.join(why)}]" if why else ""))
        print(f"      turn: {text[:220]}")
    print()
    replied = sum(1 for *_, content in mems if "(in reply to: " in content)
    replied_flagged = sum(1 for *_, content in mems if "(in reply to: " in content and fragment_reasons(content))
    print(f"context: {'the question of the other speaker previous turn' if not args.no_context else 'none'}")
    print(f"memories: {len(mems)}; classifier fragments: {flagged} = {100 * flagged / max(len(mems), 1):.1f}% "
          f"(by reason: {', '.join(f'{k} {v}' for k, v in reasons.most_common())})")
    print(f"memories kept with the question they answer: {replied} ({replied_flagged} of them flagged: the "
          f"classifier judges the statement alone, so whether the question resolves it is judged by reading)")
    print(f"sample: {s_flag}/{len(sample)} flagged = {100 * s_flag / max(len(sample), 1):.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
