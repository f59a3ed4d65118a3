"""Browsing a user's memory as the console shows it: memory items by status (Postgres), the tenant's
users, the memory graph (Neo4j: its structure; the labels' text from Postgres). Read-only: no
event is published and no read model changes (looking at a memory is not recalling it)."""
from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from projections.graph_generation import RESOLVE
from projections.importance import importance_now

# The console's status filters, over the memory_items statuses (projections/postgres_projectors.py):
# `expired` is what an older projection wrote for an archived memory.
STATUS_FILTERS = {"all": None, "active": ("active",), "archived": ("archived", "expired"),
                  "superseded": ("outdated",), "merged": ("merged", "deduped")}


def memories(models, user: str, status: str = "all", category: str | None = None, text: str | None = None,
             limit: int = 200) -> tuple[list[dict], dict[str, int]]:
    """(the user's memory items matching the filters, newest first; counts per status filter)."""
    where, params = ["user_id = %s"], [user]
    if STATUS_FILTERS[status]:
        where.append("status = ANY(%s)")
        params.append(list(STATUS_FILTERS[status]))
    if category:
        where.append("category = %s")
        params.append(category)
    if text:   # a substring, not a pattern: LIKE's own wildcards in it match themselves
        where.append("content ILIKE %s ESCAPE '\\'")
        params.append("%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(models.q("SELECT memory_id, content, category, tags, " + importance_now(models.settings.decay_rate)
                                 + " AS importance, status, superseded_by, "
                                 "merged_into, access_count, created_at FROM {s}.memory_items WHERE "
                                 + " AND ".join(where) + " ORDER BY created_at DESC, memory_id LIMIT %s"),
                        (*params, limit))
            rows = cur.fetchall()
            cur.execute(models.q("SELECT status, count(*) AS n FROM {s}.memory_items WHERE user_id = %s "
                                 "GROUP BY status"), (user,))
            by_status = {r["status"]: r["n"] for r in cur.fetchall()}
        except psycopg.errors.UndefinedTable:      # no projector has run in this namespace yet
            return [], {k: 0 for k in STATUS_FILTERS}
    counts = {k: sum(n for s, n in by_status.items() if v is None or s in v) for k, v in STATUS_FILTERS.items()}
    return rows, counts


def users(models, tenant_prefix: str | None, bound_user: str | None = None, limit: int = 200) -> list[dict]:
    """Users with memories, most recently active first: the one internal id `bound_user`; else
    those whose internal id starts with `tenant_prefix` ("<tenant>/"); else (None: the default
    tenant, whose ids have no prefix) those without a '/' (an id with a '/' published straight to
    Kafka belongs to the tenant before it: privacy/tenants.py)."""
    if bound_user is not None:
        where, params = "user_id = %s", [bound_user]
    elif tenant_prefix is None:
        where, params = "user_id NOT LIKE %s", ["%/%"]
    else:
        where, params = "user_id LIKE %s", [tenant_prefix + "%"]   # tenant names hold no LIKE wildcard
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(models.q("SELECT user_id, count(*) AS memories, count(*) FILTER (WHERE status = 'active') AS active, "
                                 "max(updated_at) AS last FROM {s}.memory_items WHERE " + where
                                 + " GROUP BY user_id ORDER BY last DESC, user_id LIMIT %s"), (*params, limit))
            return cur.fetchall()
        except psycopg.errors.UndefinedTable:
            return []


def graph(models, user: str, limit: int = 300) -> tuple[list[dict], list[dict]]:
    """(nodes, FOLLOWS / SIMILAR_TO edges) of the user's memory graph, in its current generation;
    nodes oldest first, at most `limit` (the newest), edges only between nodes shown."""
    with models.graph.session() as s:
        nodes = s.run(RESOLVE + "MATCH (m:Memory {ns: gen, user: $u}) RETURN m.id AS id, "
                      "m.status AS status, m.category AS category, m.importance AS importance, "
                      "m.created_at AS created_at ORDER BY m.created_at DESC, m.id LIMIT $limit",
                      ns=models.settings.namespace, u=user, limit=limit).data()
        ids = [n["id"] for n in nodes]
        edges = s.run(RESOLVE + "MATCH (a:Memory {ns: gen})-[e:FOLLOWS|SIMILAR_TO]->(b:Memory {ns: gen}) "
                      "WHERE a.id IN $ids AND b.id IN $ids RETURN a.id AS source, b.id AS target, "
                      "type(e) AS kind, e.weight AS weight ORDER BY source, target, kind",
                      ns=models.settings.namespace, ids=ids).data()
    # The graph holds no text (projections/graph_projector.py): the labels come from the memory items.
    content: dict[str, str] = {}
    if ids:
        with models.pool.connection() as conn:
            try:
                content = dict(conn.execute(models.q("SELECT memory_id, content FROM {s}.memory_items "
                                                     "WHERE user_id = %s AND memory_id = ANY(%s)"), (user, ids)).fetchall())
            except psycopg.errors.UndefinedTable:
                pass
    # Neo4j reads are read-committed: a node deleted while this query ran (a forget) comes back with
    # no properties; it is gone, so it is not drawn.
    nodes = [n for n in nodes if n["status"] is not None]
    for n in nodes:
        n["content"] = content.get(n["id"], "")
    return list(reversed(nodes)), edges
