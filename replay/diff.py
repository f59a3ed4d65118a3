"""Row-level differences between a live projection and its shadow: the first rows that differ.

Postgres: the two tables are joined on the projector's key columns (its checksum order) and rows
compared by a digest of the checksum columns. Neo4j: both generations' nodes (by id) and edges (by
type, from, to) are walked in order, side by side. Either stops after `limit` differences.
"""
from __future__ import annotations

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import dict_row


def _jsonable(value):
    return orjson.loads(orjson.dumps(value, default=str, option=orjson.OPT_SERIALIZE_NUMPY))


def diff_table(conn: psycopg.Connection, live_schema: str, shadow_schema: str, table: str, columns: list[str],
               key: list[str], limit: int = 5) -> list[dict]:
    """Rows present on one side only, or with different content: {key, live, shadow, columns}."""
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    keys = sql.SQL(", ").join(sql.Identifier(c) for c in key)

    def side(schema: str) -> sql.Composed:
        return sql.SQL("SELECT {keys}, md5(row({cols})::text) AS h, to_jsonb(x) AS j FROM (SELECT {cols} FROM {s}.{t}) x").format(
            keys=keys, cols=cols, s=sql.Identifier(schema), t=sql.Identifier(table))

    q = sql.SQL("SELECT {keys}, l.j AS live, s.j AS shadow FROM ({l}) l FULL JOIN ({s}) s USING ({keys}) "
                "WHERE l.h IS DISTINCT FROM s.h ORDER BY {keys} LIMIT %s").format(keys=keys, l=side(live_schema), s=side(shadow_schema))
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(q, (limit,))
        rows = cur.fetchall()
    out = []
    for r in rows:
        live, shadow = r["live"], r["shadow"]
        changed = ([c for c in columns if live.get(c) != shadow.get(c)] if live is not None and shadow is not None else None)
        out.append({"key": {k: _jsonable(r[k]) for k in key}, "live": _trim(live, changed), "shadow": _trim(shadow, changed),
                    "columns": changed})
    return out


def _trim(row: dict | None, changed: list[str] | None, width: int = 120) -> dict | None:
    """Long values (vectors) are shortened for display; a changed column is kept whole up to `width`."""
    if row is None:
        return None
    out = {}
    for k, v in row.items():
        text = v if isinstance(v, str) else orjson.dumps(v).decode()
        out[k] = v if len(text) <= width else text[:width] + "…"
    return out


def diff_graph(driver, live_generation: str, shadow_generation: str, limit: int = 5) -> list[dict]:
    """Nodes and edges that differ between two graph generations (the `ns` property aside)."""
    out: list[dict] = []
    node_q = "MATCH (m:Memory {ns: $ns}) RETURN m.id AS k, properties(m) AS p ORDER BY k"
    edge_q = ("MATCH (a:Memory {ns: $ns})-[e]->(b:Memory) RETURN [type(e), a.id, b.id] AS k, properties(e) AS p "
              "ORDER BY k[0], k[1], k[2]")
    # relational memory (#26): entity nodes by (user, id), RELATES edges by (user, relation id)
    entity_q = "MATCH (x:Entity {ns: $ns}) RETURN [x.user, x.id] AS k, properties(x) AS p ORDER BY k[0], k[1]"
    relates_q = ("MATCH (a:Entity {ns: $ns})-[e:RELATES]->(b:Entity) RETURN [a.user, e.id] AS k, "
                 "e {.*, from: a.id, to: b.id} AS p ORDER BY k[0], k[1]")
    for kind, q in (("node", node_q), ("edge", edge_q), ("entity", entity_q), ("relation", relates_q)):
        with driver.session() as s1, driver.session() as s2:
            a = iter(s1.run(q, ns=live_generation))
            b = iter(s2.run(q, ns=shadow_generation))
            for live, shadow in _merge(a, b):
                if live is not None:
                    live.pop("ns", None)
                if shadow is not None:
                    shadow.pop("ns", None)
                if live != shadow:
                    k = (live or shadow)["__k"]
                    changed = (sorted(c for c in (live.keys() | shadow.keys()) if live.get(c) != shadow.get(c) and c != "__k")
                               if live is not None and shadow is not None else None)
                    out.append({"kind": kind, "key": k, "live": _strip(live), "shadow": _strip(shadow), "columns": changed})
                    if len(out) >= limit:
                        return out
    return out


def _strip(row: dict | None) -> dict | None:
    return None if row is None else _trim({k: _jsonable(v) for k, v in row.items() if k != "__k"}, None)


def _merge(a, b):
    """Walk two key-ordered record streams side by side: (live, shadow) pairs, None where missing."""
    def nxt(it):
        rec = next(it, None)
        return None if rec is None else (rec["k"], {**dict(rec["p"]), "__k": rec["k"]})
    x, y = nxt(a), nxt(b)
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            yield x[1], None
            x = nxt(a)
        elif x is None or y[0] < x[0]:
            yield None, y[1]
            y = nxt(b)
        else:
            yield x[1], y[1]
            x, y = nxt(a), nxt(b)
