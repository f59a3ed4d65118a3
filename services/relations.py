"""Relational memory's answers (#26), for the HTTP API and the CLI: a user's entities, one entity
with all its relations, relations under filters as of a time, and a path between two entities.

An entity reference (`subject`, `object`, `from`, `to`) is an entity id, "self" (the user), a name
or alias (case-insensitive), or "role:<word>" (the entity the user's relation of that word points
to: "role:sister" is whoever SELF --sister--> points to). "Where does the user's sister live" is
relations(subject="role:sister", predicate="lives_in").

Each relation carries its provenance (source_turn, valid_from / valid_to, recorded_at, the end's
reason and turn) and reads as a sentence with its type's English template
(domain/entities.py RELATIONS). Reading is not recalling: nothing is published here.
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from domain.entities import ENTITY_TYPES, RELATIONS, SELF
from kernel.errors import InvalidInput, MemstreamError
from adapters.privacy.tenants import externalize
from services.access import Caller
from services.read_your_writes import RELATION_READS, wait_for
from query import relations as q

GROUPS = ("family", "partner", "social", "work", "place", "possession", "participation", "identity")
# A group as asked for: "family" is kin and partners alike.
GROUP_FAMILIES = {"family": ("family", "partner")}
MAX_HOPS = 3
USER_NAME = q.USER_NAME
sentence = q.sentence   # the API and CLI read relations as these sentences


class UnknownEntity(MemstreamError):
    """No entity of the user answers to the reference (the API answers 404 with this message)."""
    exit_code = 4


def predicates_of(group: str) -> list[str]:
    if group not in GROUPS:
        raise InvalidInput(f"group {group!r}: choose one of {', '.join(GROUPS)}")
    families = GROUP_FAMILIES.get(group, (group,))
    return sorted(p for p, r in RELATIONS.items() if r.group in families)


def shaped(rel: dict, known: dict[str, dict]) -> dict:
    """A relation row as answered: names of both ends, the group, the sentence, provenance."""
    out = {k: rel[k] for k in ("relation_id", "subject_id", "predicate", "object_id", "valid_from", "valid_to",
                               "recorded_at", "source_turn")}
    out.update(subject_name=None if rel["subject_id"] == SELF else (known.get(rel["subject_id"]) or {}).get("name"),
               object_name=None if rel["object_id"] == SELF else (known.get(rel["object_id"]) or {}).get("name"),
               group=RELATIONS[rel["predicate"]].group if rel["predicate"] in RELATIONS else None,
               current=rel["valid_to"] is None, text=sentence(rel, known), evidence=rel.get("evidence") or "",
               ended=None if rel["valid_to"] is None and rel.get("end_reason") is None else {
                   "reason": rel.get("end_reason"), "ended_by": rel.get("ended_by"),
                   "recorded_at": rel.get("ended_at_recorded"), "source_turn": rel.get("ended_turn")})
    if "forward" in rel:
        out["forward"] = rel["forward"]
    return out


def _shape_all(models, user: str, rows: list[dict]) -> list[dict]:
    known = q.names(models, user, {r["subject_id"] for r in rows} | {r["object_id"] for r in rows})
    return [shaped(r, known) for r in rows]


def _entity_out(row: dict) -> dict:
    return {k: row[k] for k in ("entity_id", "entity_type", "name", "aliases", "source_turn", "updated_at")}


def resolve(models, user: str, ref: str, as_of: datetime | None = None) -> list[str]:
    """The entity ids a reference names (see the module's note); UnknownEntity when none."""
    ref = ref.strip()
    if not ref:
        raise InvalidInput("an entity reference is empty: give an id, 'self', a name or 'role:<word>'")
    if ref.lower() in (SELF, "user", "me"):
        return [SELF]
    if ref.lower().startswith("role:"):
        role = ref.split(":", 1)[1].strip().lower().replace(" ", "_").replace("-", "_")
        ids = q.resolve_role(models, user, role, as_of)
        if not ids:
            raise UnknownEntity(f"the user has no {role.replace('_', ' ')}"
                                + (f" as of {as_of.isoformat()}" if as_of else ""))
        return ids
    if q.entity(models, user, ref) is not None:
        return [ref]
    ids = q.resolve_name(models, user, ref)
    if not ids:
        raise UnknownEntity(f"no entity {ref!r}: not an entity id, name or alias of this user's")
    return ids


def list_entities(models, user: str, entity_type: str | None = None, limit: int = 500) -> list[dict]:
    """The user's entities, each with its current relations to the user (either direction)."""
    if entity_type is not None and entity_type not in ENTITY_TYPES:
        raise InvalidInput(f"type {entity_type!r}: choose one of {', '.join(ENTITY_TYPES)}")
    rows = q.entities(models, user, entity_type, limit)
    ids = [r["entity_id"] for r in rows]
    rels = q.relations(models, user, touching=[SELF], limit=10_000) if ids else []
    known = {r["entity_id"]: r for r in rows}
    out = []
    for r in rows:
        mine = [x for x in rels if r["entity_id"] in (x["subject_id"], x["object_id"]) and r["entity_id"] != SELF]
        out.append({**_entity_out(r), "relations_to_user": [shaped(x, known) for x in mine]})
    return out


def one_entity(models, user: str, entity_id: str, as_of: datetime | None = None) -> dict:
    """One entity (by id, name or role) with all its relations, both directions: current and ended
    with their validity; with `as_of`, those holding then."""
    [eid, *_] = resolve(models, user, entity_id, as_of)
    row = q.entity(models, user, eid)
    if row is None and eid != SELF:
        raise UnknownEntity(f"no entity {entity_id!r}")
    rels = q.relations(models, user, touching=[eid], as_of=as_of, all_times=as_of is None, limit=10_000)
    base = _entity_out(row) if row else {"entity_id": SELF, "entity_type": "user", "name": None, "aliases": [],
                                          "source_turn": None, "updated_at": None}
    return {**base, "as_of": as_of, "relations": _shape_all(models, user, rels)}


def find_relations(models, user: str, *, predicate: str | None = None, group: str | None = None,
                   subject: str | None = None, obj: str | None = None, as_of: datetime | None = None,
                   limit: int = 500) -> dict:
    """Relations holding as of `as_of` (now without it) under the filters, with sentences."""
    preds: list[str] | None = None
    if group is not None:
        preds = predicates_of(group)
    if predicate is not None:
        preds = [predicate] if preds is None else [p for p in preds if p == predicate]
    subjects = resolve(models, user, subject, as_of) if subject is not None else None
    objects = resolve(models, user, obj, as_of) if obj is not None else None
    rows = q.relations(models, user, predicates=preds, subjects=subjects, objects=objects, as_of=as_of, limit=limit)
    shaped_rows = _shape_all(models, user, rows)
    return {"as_of": as_of, "relations": shaped_rows,
            "answer": "; ".join(r["text"] for r in shaped_rows if r["text"]) or None}


def find_path(models, user: str, source: str, target: str, max_hops: int = MAX_HOPS,
              as_of: datetime | None = None) -> dict:
    if not 1 <= max_hops <= MAX_HOPS:
        raise InvalidInput(f"max_hops {max_hops}: between 1 and {MAX_HOPS}")
    sources, targets = resolve(models, user, source, as_of), resolve(models, user, target, as_of)
    chain = q.path(models, user, sources, targets, max_hops, as_of)
    rels = _shape_all(models, user, chain) if chain else []
    return {"as_of": as_of, "from": source, "to": target, "found": chain is not None, "hops": len(rels),
            "relations": rels, "answer": "; ".join(r["text"] for r in rels if r["text"]) or None}


# -- async wrappers for the API (read your writes, then a worker thread) ------------------------

async def entities(backend, caller: Caller, user: str, entity_type: str | None = None, *,
                   after: str | None = None, wait_s: float = 5.0) -> dict:
    internal = caller.internal(user)
    await wait_for(backend, after, RELATION_READS, wait_s, caller)
    rows = await asyncio.to_thread(list_entities, backend.models, internal, entity_type)
    return externalize({"user": internal, "entities": rows}, caller)


async def entity(backend, caller: Caller, user: str, entity_id: str, as_of: datetime | None = None, *,
                 after: str | None = None, wait_s: float = 5.0) -> dict:
    internal = caller.internal(user)
    await wait_for(backend, after, RELATION_READS, wait_s, caller)
    out = await asyncio.to_thread(one_entity, backend.models, internal, entity_id, as_of)
    return externalize({"user": internal, **out}, caller)


async def relations(backend, caller: Caller, user: str, *, predicate: str | None = None, group: str | None = None,
                    subject: str | None = None, obj: str | None = None, as_of: datetime | None = None,
                    after: str | None = None, wait_s: float = 5.0) -> dict:
    internal = caller.internal(user)
    await wait_for(backend, after, RELATION_READS, wait_s, caller)
    out = await asyncio.to_thread(find_relations, backend.models, internal, predicate=predicate, group=group,
                                  subject=subject, obj=obj, as_of=as_of)
    return externalize({"user": internal, **out}, caller)


async def path(backend, caller: Caller, user: str, source: str, target: str, max_hops: int = MAX_HOPS,
               as_of: datetime | None = None, *, after: str | None = None, wait_s: float = 5.0) -> dict:
    internal = caller.internal(user)
    await wait_for(backend, after, RELATION_READS, wait_s, caller)
    out = await asyncio.to_thread(find_path, backend.models, internal, source, target, max_hops, as_of)
    return externalize({"user": internal, **out}, caller)


def user_graph(models, user: str, as_of: datetime | None = None, limit: int = 2000) -> dict:
    """Everything a drawing of the user's entities needs: all entities, and all relations (current
    and ended, both shaped), each flagged `holds` (valid at `as_of`, else current)."""
    rows = q.entities(models, user, None, limit)
    rels = q.relations(models, user, all_times=True, limit=10_000)
    known = {r["entity_id"]: r for r in rows}
    known.update(q.names(models, user, {r["subject_id"] for r in rels} | {r["object_id"] for r in rels}))
    out = []
    for r in rels:
        x = shaped(r, known)
        if as_of is None:
            x["holds"] = r["valid_to"] is None
        else:
            x["holds"] = r["valid_from"] <= as_of and (r["valid_to"] is None or r["valid_to"] > as_of)
        out.append(x)
    return {"as_of": as_of, "entities": [_entity_out(r) for r in rows], "relations": out}


async def graph(backend, caller: Caller, user: str, as_of: datetime | None = None) -> dict:
    """The user's entity graph for a drawing (the console's people & places page)."""
    internal = caller.internal(user)
    out = await asyncio.to_thread(user_graph, backend.models, internal, as_of)
    return externalize({"user": internal, **out}, caller)
