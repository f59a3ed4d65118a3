"""Relational memory's reads (#26), in SQL over the pg-relations read model (projections/relations.py).

Every read is scoped to one user. `as_of` is valid time (event time): a relation holds at t when
valid_from <= t AND (valid_to IS NULL OR valid_to > t); without it, "now" (valid_to IS NULL).
Each relation row carries its provenance: source_turn (and ended_turn), valid_from / valid_to,
recorded_at (the assertion's event time) and, once ended, ended_at_recorded, end_reason, ended_by.
"""
from __future__ import annotations

from datetime import datetime

from domain.entities import RELATIONS, SELF
from query.store import ReadModels

REL_COLUMNS = ("relation_id, subject_id, predicate, object_id, valid_from, valid_to, recorded_at, ended_at_recorded, "
               "end_reason, ended_by, source_turn, ended_turn, evidence")
ENTITY_COLUMNS = "entity_id, entity_type, name, aliases, source_turn, updated_at"


def _holds(as_of: datetime | None, alias: str = "") -> tuple[str, tuple]:
    """The validity condition (and its parameters): as of `as_of`, or current."""
    a = f"{alias}." if alias else ""
    if as_of is None:
        return f"{a}valid_to IS NULL", ()
    return f"{a}valid_from <= %s AND ({a}valid_to IS NULL OR {a}valid_to > %s)", (as_of, as_of)


def _rows(models: ReadModels, text: str, params) -> list[dict]:
    with models.pool.connection() as conn:
        cur = conn.execute(models.q(text), params)
        names = [c.name for c in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def entities(models: ReadModels, user: str, entity_type: str | None = None, limit: int = 500) -> list[dict]:
    """The user's entities (of one type if given), by name then id."""
    where, params = "user_id = %s", [user]
    if entity_type is not None:
        where += " AND entity_type = %s"
        params.append(entity_type)
    return _rows(models, f"SELECT {ENTITY_COLUMNS} FROM {{s}}.entities WHERE {where} "
                         "ORDER BY lower(name) NULLS LAST, entity_id LIMIT %s", (*params, limit))


def entity(models: ReadModels, user: str, entity_id: str) -> dict | None:
    rows = _rows(models, f"SELECT {ENTITY_COLUMNS} FROM {{s}}.entities WHERE user_id = %s AND entity_id = %s",
                 (user, entity_id))
    return rows[0] if rows else None


def names(models: ReadModels, user: str, ids: set[str]) -> dict[str, dict]:
    """entity_id → {name, entity_type} for those of `ids` the user has."""
    if not ids:
        return {}
    rows = _rows(models, "SELECT entity_id, name, entity_type FROM {s}.entities WHERE user_id = %s AND entity_id = ANY(%s)",
                 (user, sorted(ids)))
    return {r["entity_id"]: r for r in rows}


def relations(models: ReadModels, user: str, *, predicates: list[str] | None = None,
              subjects: list[str] | None = None, objects: list[str] | None = None,
              touching: list[str] | None = None, ids: list[str] | None = None, as_of: datetime | None = None, all_times: bool = False,
              limit: int = 500) -> list[dict]:
    """The user's relations under the filters, oldest valid_from first. `touching`: either end is
    one of those ids. `all_times`: current and ended alike (no validity filter)."""
    where, params = ["user_id = %s"], [user]
    if not all_times:
        cond, p = _holds(as_of)
        where.append(cond)
        params.extend(p)
    for column, values in (("predicate", predicates), ("subject_id", subjects), ("object_id", objects),
                           ("relation_id", ids)):
        if values is not None:
            where.append(f"{column} = ANY(%s)")
            params.append(list(values))
    if touching is not None:
        where.append("(subject_id = ANY(%s) OR object_id = ANY(%s))")
        params.extend([list(touching), list(touching)])
    return _rows(models, f"SELECT {REL_COLUMNS} FROM {{s}}.relations WHERE {' AND '.join(where)} "
                         "ORDER BY valid_from, relation_id LIMIT %s", (*params, limit))


def resolve_name(models: ReadModels, user: str, text: str) -> list[str]:
    """Entity ids whose name or one of whose aliases is `text` (case-insensitive)."""
    rows = _rows(models, "SELECT entity_id FROM {s}.entities WHERE user_id = %s AND (lower(name) = lower(%s) "
                         "OR lower(%s) = ANY(SELECT lower(a) FROM unnest(aliases) AS a)) ORDER BY entity_id",
                 (user, text, text))
    return [r["entity_id"] for r in rows]


def resolve_role(models: ReadModels, user: str, role: str, as_of: datetime | None = None) -> list[str]:
    """The objects of the user's `role` relations (SELF --role--> x) holding as of `as_of`."""
    cond, p = _holds(as_of)
    rows = _rows(models, f"SELECT DISTINCT object_id FROM {{s}}.relations WHERE user_id = %s AND subject_id = %s "
                         f"AND predicate = %s AND {cond} ORDER BY object_id", (user, SELF, role, *p))
    return [r["object_id"] for r in rows]


def path(models: ReadModels, user: str, sources: list[str], targets: list[str], max_hops: int = 3,
         as_of: datetime | None = None) -> list[dict] | None:
    """The shortest chain of relations (either direction) from one of `sources` to one of `targets`,
    at most `max_hops` long, holding as of `as_of`: its relations in order, each with `forward`
    (walked subject → object); None when there is none. A recursive CTE; a node is never revisited."""
    cond, p = _holds(as_of)
    rows = _rows(models, f"""
        WITH RECURSIVE e AS (
            SELECT relation_id, subject_id AS a, object_id AS b, true AS fwd FROM {{s}}.relations
             WHERE user_id = %s AND {cond}
            UNION ALL
            SELECT relation_id, object_id, subject_id, false FROM {{s}}.relations WHERE user_id = %s AND {cond}
        ), walk(node, nodes, rels, dirs, hops) AS (
            SELECT s, ARRAY[s], ARRAY[]::text[], ARRAY[]::boolean[], 0 FROM unnest(%s::text[]) AS s
            UNION ALL
            SELECT e.b, w.nodes || e.b, w.rels || e.relation_id, w.dirs || e.fwd, w.hops + 1
              FROM walk w JOIN e ON e.a = w.node
             WHERE w.hops < %s AND NOT e.b = ANY(w.nodes) AND NOT w.node = ANY(%s::text[])
        )
        SELECT rels, dirs FROM walk WHERE node = ANY(%s::text[]) AND hops > 0 ORDER BY hops, rels LIMIT 1
        """, (user, *p, user, *p, list(sources), max_hops, list(targets), list(targets)))
    if not rows:
        return None
    ids, dirs = rows[0]["rels"], rows[0]["dirs"]
    by_id = {r["relation_id"]: r for r in relations(models, user, ids=list(ids), all_times=True)}
    return [{**by_id[i], "forward": d} for i, d in zip(ids, dirs)]


USER_NAME = "the user"


def display(eid: str, known: dict[str, dict]) -> str:
    """How an entity reads in a sentence: "the user", its name, else its id."""
    if eid == SELF:
        return USER_NAME
    row = known.get(eid)
    return (row or {}).get("name") or eid


def sentence(rel: dict, known: dict[str, dict]) -> str | None:
    """The relation as English ("Ana is the user's sister"), None for a predicate outside the ontology."""
    r = RELATIONS.get(rel["predicate"])
    if r is None:
        return None
    return r.en.format(s=display(rel["subject_id"], known), o=display(rel["object_id"], known))
