"""The memory processor's relational decisions (#26): a turn's relation claims in, entity and
relation events out, decided once from the user's graph state. Pure: no I/O, no clock.

Resolution of a claim's mentions, in order (the first that answers):
1. the user                          → SELF;
2. a pronoun ("she", "他", "there")   → the last person (or place) this session spoke of;
   unresolved → the claim is dropped (a statement whose subject cannot be recovered is not kept);
3. a name                            → the user's entity of that name or alias (case-insensitive);
   with a role too, an unnamed entity holding that role takes the name ("my sister" … "she's
   called Ana": one sister, now named);
4. a role only ("my sister")         → the entity the user holds that role with now (the last
   mentioned when several), else a new unnamed one;
else a new entity. Ids derive from the cause's id and the claim's position, so a re-decided input
emits the same ids.

What a claim does:
- asserted, not yet current          → relation.asserted (valid from the claim's date, else the turn's time);
  a one-at-a-time type (lives in, works at, mother) first ends the subject's current one
  (relation.ended reason "superseded", valid to the new one's start);
- asserted, already current          → nothing (a restatement teaches nothing new);
- ended ("I moved from Paris", "I left Google") → the current one ends at the claim's date
  (reason "stated"); when none is current the relation is recorded as held until then
  (valid from UNKNOWN_START) and ended: as-of reads before the change answer it;
- negated ("my sister doesn't live in Rome") → a current one ends (reason "negated"); else nothing.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from domain.entities import PERSON_ROLES, SELF, one_at_a_time, relation_type
from schemas import events

# "Held since before memstream knew": the start of a relation stated only by its end.
UNKNOWN_START = datetime(1900, 1, 1, tzinfo=UTC)
MAX_ENTITIES = 2000          # per user: beyond it, new names are not tracked (bounded state)
MAX_ALIASES = 8
SESSIONS_KEPT = 8            # the last-mentioned person/place of this many recent sessions
PLACE_PRONOUNS = frozenset({"there", "那里", "那儿", "那边"})


def norm(name: str) -> str:
    """A name as compared: NFKC, case-folded, inner blanks collapsed, a leading 'the ' dropped."""
    n = " ".join(unicodedata.normalize("NFKC", name).casefold().split())
    return n[4:] if n.startswith("the ") else n


@dataclass(slots=True)
class Entity:
    type: str
    name: str | None
    aliases: list[str]

    def to_list(self) -> list[Any]:
        return [self.type, self.name, self.aliases]


@dataclass(slots=True)
class Current:
    """A relation that holds now."""
    subject: str
    predicate: str
    object: str
    since: float              # valid from, epoch s

    def to_list(self) -> list[Any]:
        return [self.subject, self.predicate, self.object, self.since]


@dataclass(slots=True)
class GraphState:
    entities: dict[str, Entity] = field(default_factory=dict)
    current: dict[str, Current] = field(default_factory=dict)      # relation id → relation
    last_person: dict[str, str] = field(default_factory=dict)      # session → entity id (insertion-ordered)
    last_place: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"e": {k: v.to_list() for k, v in self.entities.items()},
                "c": {k: v.to_list() for k, v in self.current.items()},
                "p": self.last_person, "l": self.last_place}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "GraphState":
        if not d:
            return cls()
        return cls(entities={k: Entity(*v) for k, v in d.get("e", {}).items()},
                   current={k: Current(*v) for k, v in d.get("c", {}).items()},
                   last_person=dict(d.get("p", {})), last_place=dict(d.get("l", {})))

    # -- lookups ---------------------------------------------------------------------------
    def by_name(self, name: str, type_: str) -> str | None:
        n = norm(name)
        for eid, e in self.entities.items():
            if (e.name is not None and norm(e.name) == n) or n in (norm(a) for a in e.aliases):
                if _compatible(e.type, type_):
                    return eid
        return None

    def holders_of(self, role: str) -> list[str]:
        """Entities the user holds `role` with now, oldest relation first."""
        return [c.object for c in sorted(self.current.values(), key=lambda c: c.since)
                if c.subject == SELF and c.predicate == role]

    def current_of(self, subject: str, predicate: str, obj: str | None = None) -> list[str]:
        return [rid for rid, c in self.current.items()
                if c.subject == subject and c.predicate == predicate and (obj is None or c.object == obj)]


def _compatible(have: str, want: str) -> bool:
    # An organisation is sometimes spoken of as a place ("I work at the hospital") and vice versa.
    return have == want or {have, want} <= {"place", "organisation"}


@dataclass(frozen=True, slots=True)
class Claim:
    """A decoded relation claim (schemas/events.py RelationClaim, or entities.RelationDraft)."""
    subject: Any
    predicate: str
    object: Any
    negated: bool
    ended: bool
    event_date: str | None
    evidence: str


def _when(date: str | None, at: float) -> float:
    if date is None:
        return at
    try:
        return datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return at


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


class _Decider:
    """One turn's claims against the user's graph; collects (tag, event data) pairs."""

    def __init__(self, graph: GraphState, session: str | None, at: float, source_turn: str,
                 new_id: Callable[[str], str]):
        self.g, self.session, self.at, self.turn = graph, session or "", at, source_turn
        self.new_id, self.ev = new_id, events
        self.out: list[tuple[str, Any]] = []
        self.changed: set[str] = set()

    # 1. mentions → entity ids
    def resolve(self, m: Any, i: int, side: str, create: bool = True) -> str | None:
        """The entity id a mention names; a new entity only when `create` (never for a claim that
        cannot be kept: one whose other side does not resolve, or one that negates)."""
        if m.type == "user":
            return SELF
        if m.pronoun:
            memo = self.g.last_place if m.pronoun.casefold() in PLACE_PRONOUNS else self.g.last_person
            return memo.get(self.session)
        role = m.role if m.role in PERSON_ROLES else None
        if m.name:
            found = self.g.by_name(m.name, m.type)
            if found is None and role is not None and create:
                unnamed = [e for e in self.g.holders_of(role) if self.g.entities[e].name is None]
                if unnamed:
                    found = unnamed[-1]
                    self.g.entities[found].name = m.name
                    self.changed.add(found)
            if found is None:
                return self.create(m, i, side) if create else None
            if create and m.role and m.role not in self.g.entities[found].aliases:
                self.alias(found, m.role)
            return found
        if role is not None:
            holders = self.g.holders_of(role)
            recent = self.g.last_person.get(self.session)
            if recent in holders:
                return recent
            return holders[-1] if holders else self.create(m, i, side) if create else None
        if m.role:   # a pet or thing by its kind only ("my dog"): the one the user has, else new
            for eid, e in self.g.entities.items():
                if e.type == m.type and e.name is None and m.role in e.aliases:
                    return eid
            return self.create(m, i, side) if create else None
        return None

    def create(self, m: Any, i: int, side: str) -> str | None:
        if len(self.g.entities) >= MAX_ENTITIES:
            return None
        eid = self.new_id(f"entity:{i}:{side}")
        self.g.entities[eid] = Entity(m.type, m.name, [m.role] if m.role else [])
        self.changed.add(eid)
        return eid

    def alias(self, eid: str, word: str) -> None:
        e = self.g.entities[eid]
        if len(e.aliases) < MAX_ALIASES:
            e.aliases.append(word)
            self.changed.add(eid)

    def remember(self, eid: str) -> None:
        e = self.g.entities.get(eid)
        if e is None:
            return
        memo = self.g.last_person if e.type == "person" else self.g.last_place if e.type in ("place", "organisation") else None
        if memo is None:
            return
        memo.pop(self.session, None)
        memo[self.session] = eid
        while len(memo) > SESSIONS_KEPT:
            memo.pop(next(iter(memo)))

    # 2. what a claim does
    def claim(self, c: Claim, i: int) -> None:
        if relation_type(c.predicate) is None:
            return
        # Pronouns first: a claim whose reference cannot be recovered creates nothing; a negation
        # only ends what is known, so it names no new entity either.
        create = not c.negated and all(self.resolve(m, i, "", create=False) is not None
                                       for m in (c.subject, c.object) if m.pronoun)
        if not create and not c.negated:
            return
        s = self.resolve(c.subject, i, "s", create)
        o = self.resolve(c.object, i, "o", create)
        for eid in (s, o):
            if eid is not None and eid != SELF:
                self.remember(eid)
        if s is None or o is None or s == o:
            return
        when = _when(c.event_date, self.at)
        if c.negated:
            for rid in self.g.current_of(s, c.predicate, o):
                self.end(rid, when, "negated", None)
            return
        if c.ended:
            held = self.g.current_of(s, c.predicate, o)
            if not held and self._unnamed_end(c, s, o):
                held = self.g.current_of(s, c.predicate)
            if held:
                for rid in held:
                    self.end(rid, when, "stated", None)
            else:   # held until now, since before memstream knew
                rid = self.assert_(s, c.predicate, o, UNKNOWN_START.timestamp(), c.evidence, i)
                self.end(rid, when, "stated", None)
            return
        if self.g.current_of(s, c.predicate, o):
            return
        rid = self.new_id(f"relation:{i}")
        if one_at_a_time(c.predicate):
            for old in self.g.current_of(s, c.predicate):
                self.end(old, max(when, self.g.current[old].since), "superseded", rid)
        self.assert_(s, c.predicate, o, when, c.evidence, i, rid)

    @staticmethod
    def _unnamed_end(c: Claim, s: str, o: str) -> bool:
        # "we broke up" names no one: it ends whoever holds the role now.
        return not getattr(c.object, "name", None)

    def assert_(self, s: str, p: str, o: str, since: float, evidence: str, i: int, rid: str | None = None) -> str:
        rid = rid or self.new_id(f"relation:{i}")
        self.g.current[rid] = Current(s, p, o, since)
        self.out.append((f"relation:{i}", self.ev.RelationAsserted(
            relation_id=rid, subject_id=s, predicate=p, object_id=o, valid_from=_dt(since),
            source_turn=self.turn, evidence=evidence[:1000])))
        return rid

    def end(self, rid: str, when: float, reason: str, ended_by: str | None) -> None:
        cur = self.g.current.pop(rid)
        self.out.append((f"ended:{rid}", self.ev.RelationEnded(
            relation_id=rid, valid_to=_dt(max(when, cur.since)), reason=reason, ended_by=ended_by,
            source_turn=self.turn)))

    def observed(self) -> list[tuple[str, Any]]:
        """entity.observed for every entity created or changed, before the relations that use it."""
        return [(f"entity:{eid}", self.ev.EntityObserved(
            entity_id=eid, entity_type=e.type, name=e.name, aliases=list(e.aliases), source_turn=self.turn))
            for eid in sorted(self.changed) if (e := self.g.entities.get(eid)) is not None]


def decide_relations(graph: GraphState, claims: list[Any], *, session: str | None, at: float, source_turn: str,
                     new_id: Callable[[str], str]) -> list[tuple[str, Any]]:
    """(tag, event data) for one turn's claims, in the order they must be applied: the entities
    first, then each relation's end before its successor's assertion. Mutates `graph`."""
    d = _Decider(graph, session, at, source_turn, new_id)
    for i, raw in enumerate(claims):
        d.claim(Claim(raw.subject, raw.predicate, raw.object, raw.negated, raw.ended, raw.event_date,
                      raw.evidence), i)
    return d.observed() + d.out
