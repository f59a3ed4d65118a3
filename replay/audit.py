"""Audit: a memory's whole life, or a user's timeline, read back from the audit index and the log.

The audit index (projections/audit_index.py) has one row per event — type, event time, topic /
partition / offset, causation and correlation ids, the memory ids it concerns — and no content.
`memory_audit` reads a memory's rows, follows every row's causation id back through the index
(memory.created → fact.extracted → turn.recorded), reads the clear fields of the records
themselves from Kafka to learn the relations (what it superseded, what was merged into it or it
into, its links), and does the same for its parents, recursively. With `content`, each record's
sealed fields are unsealed with the user's key: an erased user's content reads as erased.

Both are read-only: nothing is published and no read model changes.
"""
from __future__ import annotations

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from kernel.config import Settings
from kernel.errors import InvalidEvent, MemstreamError
from adapters.privacy import tenant_barrier
from replay import stores
from replay.fetch import fetch
from schemas.codec import decode
from schemas.records import confluent_appended_ms
from schemas.events import LATEST

ERASED = "(erased)"
COLUMNS = ("event_id, user_id, type, version, event_time, topic, partition, log_offset, causation_id, correlation_id, "
           "producer, memory_ids")


class NotFound(MemstreamError):
    """Nothing in the audit index under that id (never existed, not indexed yet, or forgotten / erased)."""


def _rows(settings: Settings, where: str, params: tuple, limit: int | None = None) -> list[dict]:
    # As the query side's role (SELECT on the read models only), not the owner: the audit routes
    # serve requests, and a serving path holds no more privilege than reading needs (#28).
    with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
        tenant_barrier.apply(conn)
        if not stores.table_exists(conn, settings.namespace, "audit_events"):
            return []
        cur.execute(sql.SQL("SELECT " + COLUMNS + " FROM {}.audit_events WHERE " + where
                            + " ORDER BY event_time, topic, partition, log_offset"
                            + (" LIMIT %s" if limit else "")).format(sql.Identifier(settings.namespace)),
                    params + ((limit,) if limit else ()))
        return [_row(r) for r in cur.fetchall()]


def _row(r: dict) -> dict:
    return {"event_id": r["event_id"], "user": r["user_id"], "type": r["type"], "version": r["version"],
            "time": r["event_time"].isoformat(), "topic": r["topic"], "partition": r["partition"],
            "offset": r["log_offset"], "causation_id": r["causation_id"], "correlation_id": r["correlation_id"],
            "producer": r["producer"], "memory_ids": list(r["memory_ids"])}


def _pos(row: dict) -> tuple[str, int, int]:
    return row["topic"], row["partition"], row["offset"]


class _Reader:
    """Fetches records once, reads clear fields (always) and sealed content (when asked)."""

    def __init__(self, settings: Settings, keys, content: bool):
        self.settings, self.keys, self.content = settings, keys, content
        self.records: dict = {}

    def load(self, rows: list[dict]) -> None:
        missing = [_pos(r) for r in rows if _pos(r) not in self.records]
        if missing:
            got = fetch(self.settings, missing)
            for p in missing:
                self.records[p] = got.get(p)

    def clear(self, row: dict) -> dict:
        m = self.records.get(_pos(row))
        if m is None or not m.value():
            return {}
        try:
            return dict(orjson.loads(m.value()).get("data") or {})
        except (orjson.JSONDecodeError, AttributeError):
            return {}

    def sealed(self, row: dict):
        """The record's personal fields, ERASED if its key is gone, None if it has none or is unreadable."""
        m = self.records.get(_pos(row))
        cls = LATEST.get(row["type"])
        if m is None or cls is None or not cls.SEALED:
            return None
        try:
            env = decode(m.value(), self.keys, confluent_appended_ms(m))
        except InvalidEvent:
            return None
        if env.erased:
            return ERASED
        data = env.data.model_dump()
        # (an unset optional field, e.g. no metadata, is not shown: it was not on the wire either)
        return {k: data[k] for k in sorted(cls.SEALED) if k != "embedding" and k in data
                and not (data[k] is None and k in cls.OMITTED_WHEN_NONE)}

    def describe(self, row: dict) -> dict:
        out = {**row, "data": self.clear(row)}
        if self.content:
            content = self.sealed(row)
            if content is not None:
                out["content"] = content
        out["summary"] = summary(out)
        return out


def summary(e: dict) -> str:
    """One line saying what an event did (clear fields and, when loaded, content)."""
    d, t = e.get("data") or {}, e["type"]
    c = e.get("content")
    text = ERASED if c == ERASED else (c or {}).get("content") or (c or {}).get("summary")
    if t == "turn.recorded":
        return f"{d.get('role', '?')} said: {text}" if text else f"{d.get('role', '?')} turn in session {d.get('session')}"
    if t == "fact.extracted":
        kv = "" if c in (None, ERASED) or not c.get("key") else f" [{c['key']}={c.get('value')}]"
        return f"fact ({d.get('channel')}{'/' + d['rule'] if d.get('rule') else ''}): {text or '…'}{kv}"
    if t == "memory.created":
        return f"created {d.get('memory_id')} ({d.get('category')}, importance {d.get('importance')}): {text or '…'}"
    if t == "memory.reinforced":
        return (f"reinforced {d.get('memory_id')} by fact {d.get('fact_id')} (similarity {d.get('similarity')}, "
                f"importance {d.get('importance')}, access {d.get('access_count')})")
    if t == "memory.linked":
        return f"linked {d.get('from_id')} -{d.get('kind')}-> {d.get('to_id')} (weight {d.get('weight')})"
    if t == "memory.superseded":
        return f"{d.get('memory_id')} superseded by {d.get('superseded_by')} ({d.get('reason')})"
    if t == "preference.set":
        kv = "" if c in (None, ERASED) else f" {c.get('key')}={c.get('value')}"
        return f"preference v{d.get('pref_version')}{kv} (memory {d.get('memory_id')})"
    if t == "memory.decayed":
        return f"decayed {d.get('memory_id')} {d.get('previous')} -> {d.get('importance')} ({d.get('reason')}, {d.get('age_days')} days)"
    if t in ("memory.merged", "memory.deduped"):
        verb = "merged" if t == "memory.merged" else "deduped"
        return f"{verb} {d.get('retired_id')} into {d.get('memory_id')} (similarity {d.get('similarity')})" + (
            f": {text}" if text else "")
    if t == "memory.expired":
        return f"expired {d.get('memory_id')} ({d.get('reason')}, importance {d.get('importance')}, age {d.get('age_days')} days)"
    if t == "memory.summarized":
        return f"summarised {d.get('memory_id')}" + (f": {text}" if text else "")
    if t == "memory.recalled":
        return f"recalled via {d.get('source')}: {', '.join(d.get('memory_ids') or [])}"
    if t == "memory.forgotten":
        return f"forgotten on request of {d.get('requested_by')}: {', '.join(d.get('memory_ids') or [])}"
    if t in ("user.erased", "user.forgotten"):
        return f"{t} on request of {d.get('requested_by')} {d.get('reason') or ''}".rstrip()
    return t


def _causes(settings: Settings, rows: list[dict], limit: int = 16) -> dict[str, dict]:
    """Every event the rows' causation ids lead to, transitively: {event_id: row}."""
    known = {r["event_id"]: r for r in rows}
    todo = {r["causation_id"] for r in rows if r["causation_id"]} - known.keys()
    for _ in range(limit):
        if not todo:
            break
        found = _rows(settings, "event_id = ANY(%s)", (list(todo),))
        for r in found:
            known[r["event_id"]] = r
        todo = {r["causation_id"] for r in found if r["causation_id"]} - known.keys()
    return known


def chain(event_id: str | None, known: dict[str, dict]) -> list[dict]:
    """The causation chain of an event: its cause, that one's cause, … (as far as indexed)."""
    out, seen = [], set()
    while event_id and event_id in known and event_id not in seen:
        seen.add(event_id)
        out.append(known[event_id])
        event_id = known[event_id]["causation_id"]
    return out


def _relations(memory_id: str, events: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(parents, children, links) of a memory, from its events' clear fields."""
    parents, children, links = [], [], []
    for e in events:
        d, t = e["data"], e["type"]
        if t == "memory.superseded":
            if d.get("superseded_by") == memory_id:
                parents.append({"memory_id": d.get("memory_id"), "relation": "supersedes", "event_id": e["event_id"]})
            elif d.get("memory_id") == memory_id:
                children.append({"memory_id": d.get("superseded_by"), "relation": "superseded_by", "event_id": e["event_id"]})
        elif t in ("memory.merged", "memory.deduped"):
            verb = "merged" if t == "memory.merged" else "deduped"
            if d.get("memory_id") == memory_id:
                for pid in [d.get("retired_id"), *(d.get("parent_ids") or [])]:
                    if pid and pid != memory_id and pid not in {p["memory_id"] for p in parents}:
                        parents.append({"memory_id": pid, "relation": f"{verb}_from", "event_id": e["event_id"]})
            elif d.get("retired_id") == memory_id:
                children.append({"memory_id": d.get("memory_id"), "relation": f"{verb}_into", "event_id": e["event_id"]})
        elif t == "memory.linked":
            other = d.get("to_id") if d.get("from_id") == memory_id else d.get("from_id")
            links.append({"memory_id": other, "kind": d.get("kind"),
                          "direction": "out" if d.get("from_id") == memory_id else "in", "weight": d.get("weight")})
    return parents, children, links


STATUS = {"memory.superseded": "outdated", "memory.expired": "expired", "memory.forgotten": "forgotten",
          "user.forgotten": "forgotten", "user.erased": "erased"}


def _status(memory_id: str, events: list[dict]) -> str:
    status = "unknown"
    for e in events:
        d, t = e["data"], e["type"]
        if t == "memory.created" and d.get("memory_id") == memory_id:
            status = "active"
        elif t == "memory.superseded" and d.get("memory_id") == memory_id:
            status = "outdated"
        elif t in ("memory.merged", "memory.deduped") and d.get("retired_id") == memory_id:
            status = "merged" if t == "memory.merged" else "deduped"
        elif t == "memory.expired" and d.get("memory_id") == memory_id:
            status = "archived"      # expiry archives: still recallable, revived by a recall
        elif t == "memory.revived" and d.get("memory_id") == memory_id:
            status = "active"
        elif t == "memory.forgotten" and memory_id in (d.get("memory_ids") or []):
            status = "forgotten"
    return status


def memory_user(settings: Settings, memory_id: str) -> str | None:
    """Whose memory it is (the user of its indexed events), or None when nothing is indexed: the API
    checks this before it audits (memory ids are global; users are per tenant)."""
    rows = _rows(settings, "memory_ids @> ARRAY[%s]::text[]", (memory_id,), limit=1)
    return rows[0]["user"] if rows else None


def memory_audit(settings: Settings, memory_id: str, *, content: bool = True, keys=None, depth: int = 3) -> dict:
    """The memory's life: its events (each with its causation chain), where it came from (the fact
    and the turn), its parents (supersession, merges; recursively), children and links."""
    own_keys = keys is None and content
    if own_keys:
        from adapters.privacy.keystore import KeyStore
        keys = KeyStore(settings)
    try:
        reader = _Reader(settings, keys, content)
        out = _audit_one(settings, reader, memory_id, depth, set())
        if out is None:
            raise NotFound(f"no events of memory {memory_id} in the audit index of {settings.namespace} "
                           "(unknown, not indexed yet, or forgotten/erased)")
        return out
    finally:
        if own_keys:
            keys.close()


def _audit_one(settings: Settings, reader: _Reader, memory_id: str, depth: int, seen: set) -> dict | None:
    seen.add(memory_id)
    rows = _rows(settings, "memory_ids @> ARRAY[%s]::text[]", (memory_id,))
    if not rows:
        return None
    known = _causes(settings, rows)
    reader.load(list(known.values()))
    events = [reader.describe(r) for r in rows]
    described = {r["event_id"]: reader.describe(r) for r in known.values()}
    for e in events:
        e["causes"] = [described[c["event_id"]] for c in chain(e["causation_id"], known)]
    created = next((e for e in events if e["type"] == "memory.created" and e["data"].get("memory_id") == memory_id), None)
    origin = ([created] + created["causes"]) if created else (
        [events[0]] + events[0]["causes"] if events[0]["type"] == "fact.extracted" else [])
    parents, children, links = _relations(memory_id, events)
    for p in parents:
        if depth > 0 and p["memory_id"] and p["memory_id"] not in seen:
            sub = _audit_one(settings, reader, p["memory_id"], depth - 1, seen)
            if sub is not None:
                p.update({"status": sub["status"], "origin": sub["origin"], "parents": sub["parents"]})
    return {"memory_id": memory_id, "user": rows[0]["user"], "status": _status(memory_id, events),
            "origin": origin, "events": events, "parents": parents, "children": children, "links": links}


def user_timeline(settings: Settings, user: str, *, content: bool = False, keys=None, limit: int = 1000,
                  since=None, until=None) -> dict:
    """Every indexed event of the user, in event-time order (optionally with content)."""
    where, params = ["user_id = %s"], [user]
    if since is not None:
        where.append("event_time >= %s")
        params.append(since)
    if until is not None:
        where.append("event_time <= %s")
        params.append(until)
    rows = _rows(settings, " AND ".join(where), tuple(params), limit)
    own_keys = keys is None and content
    if own_keys:
        from adapters.privacy.keystore import KeyStore
        keys = KeyStore(settings)
    try:
        reader = _Reader(settings, keys, content)
        reader.load(rows)
        events = [reader.describe(r) for r in rows]
    finally:
        if own_keys:
            keys.close()
    return {"user": user, "erased": any(e["type"] == "user.erased" for e in events), "count": len(events),
            "events": events}


# -- human-readable -------------------------------------------------------------------------------

def _line(e: dict, indent: str = "  ") -> str:
    return f"{indent}{e['time']}  {e['type']:<18} {e['topic']}:{e['partition']}:{e['offset']}  {e['summary']}"


def render_memory(a: dict, indent: str = "") -> str:
    lines = [f"{indent}memory {a['memory_id']} of {a['user']}: {a['status']}"]
    if a.get("origin"):
        lines.append(f"{indent}  origin (causation chain):")
        lines += [_line(e, indent + "    ") for e in a["origin"]]
    lines.append(f"{indent}  life ({len(a['events'])} events):")
    for e in a["events"]:
        lines.append(_line(e, indent + "    "))
        for c in e["causes"]:
            if e["type"] != "memory.created":
                lines.append(f"{indent}        <- {c['type']} {c['event_id']} {c['summary']}")
    for p in a["parents"]:
        lines.append(f"{indent}  parent {p['memory_id']} ({p['relation']}, {p.get('status', '?')}):")
        for e in p.get("origin", []):
            lines.append(_line(e, indent + "    "))
        for gp in p.get("parents", []):
            lines.append(f"{indent}    grandparent {gp['memory_id']} ({gp['relation']})")
    for c in a["children"]:
        lines.append(f"{indent}  {c['relation']} {c['memory_id']}")
    if a["links"]:
        lines.append(f"{indent}  links: " + ", ".join(f"{x['direction']} {x['kind']} {x['memory_id']}" for x in a["links"]))
    return "\n".join(lines)


def render_user(t: dict) -> str:
    lines = [f"user {t['user']}: {t['count']} events" + (" (erased)" if t["erased"] else "")]
    lines += [_line(e) for e in t["events"]]
    return "\n".join(lines)
