"""What the console shows, read from the real stores: memory items (Postgres), the memory graph
(Neo4j: its structure; the labels' text from Postgres), the dead-letter topic and projector positions vs. the log end (Kafka). Read-only: no
event is published and no read model changes (looking at a memory is not recalling it)."""
from __future__ import annotations

import uuid

import orjson
import psycopg
from psycopg.rows import dict_row

from projections.graph_generation import RESOLVE
from projections.registry import PROJECTOR_TYPES

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
            cur.execute(models.q("SELECT memory_id, content, category, tags, importance, status, superseded_by, "
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


def users(models, p, limit: int = 200) -> list[dict]:
    """The users of the key's tenant that have memories (its bound user alone for a bound key), most
    recently active first. Internal ids carry the tenant as a prefix (privacy/tenants.py); the
    default tenant's ids have none, so `NOT LIKE '%/%'` (an id with a '/' published straight to
    Kafka belongs to the tenant before it). p.owns() checks every row again."""
    from memstream.privacy.tenants import DEFAULT_TENANT, internal_user
    if p.user is not None:
        where, params = "user_id = %s", [internal_user(p.tenant, p.user)]
    elif p.tenant == DEFAULT_TENANT:
        where, params = "user_id NOT LIKE %s", ["%/%"]
    else:
        where, params = "user_id LIKE %s", [p.tenant + "/%"]
    with models.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        try:
            cur.execute(models.q("SELECT user_id, count(*) AS memories, count(*) FILTER (WHERE status = 'active') AS active, "
                                 "max(updated_at) AS last FROM {s}.memory_items WHERE " + where
                                 + " GROUP BY user_id ORDER BY last DESC, user_id LIMIT %s"), (*params, limit))
            rows = cur.fetchall()
        except psycopg.errors.UndefinedTable:
            return []
    return [{**r, "user": p.external(r["user_id"])} for r in rows if p.owns(r["user_id"])]


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


def _consumer(settings):
    from confluent_kafka import Consumer
    from memstream.kafka_auth import PUBLISHER, kafka_config   # the API's principal: reads, no writes here
    return Consumer({**kafka_config(settings, PUBLISHER), "group.id": "console-" + uuid.uuid4().hex,
                     "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})


def dead_letters(settings, per_partition: int = 100, timeout: float = 5.0) -> list[dict]:
    """The newest `per_partition` dead letters of each partition, newest first. The body is the
    one memstream/bus.py dead_letter_record writes (reason, source, consumer, key, size; the
    original bytes only sealed, never shown)."""
    import time

    from confluent_kafka import TopicPartition
    topic = settings.topic("deadletter")
    c = _consumer(settings)
    try:
        meta = c.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        parts, ends = [], {}
        for p in meta.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                parts.append(TopicPartition(topic, p, max(low, high - per_partition)))
                ends[p] = high
        out: list[dict] = []
        if not parts:
            return out
        c.assign(parts)
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(ends) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                done.add(m.partition())
                continue
            try:
                body = orjson.loads(m.value() or b"{}")
                body = body if isinstance(body, dict) else {"reason": "(not a dead-letter body)"}
            except orjson.JSONDecodeError:
                body = {"reason": "(not a dead-letter body)"}
            ts = m.timestamp()[1]
            out.append({"partition": m.partition(), "offset": m.offset(), "time_ms": ts if ts and ts > 0 else None,
                        "reason": str(body.get("reason", "")), "source": body.get("source") or {},
                        "consumer": body.get("consumer"), "key": body.get("key"), "size": body.get("size"),
                        "raw_omitted": body.get("raw_omitted")})
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        return sorted(out, key=lambda d: (d["time_ms"] or 0, d["partition"], d["offset"]), reverse=True)
    finally:
        c.close()


def positions(models, timeout: float = 5.0) -> list[dict]:
    """Every projector's stored position (law 3: its truth, in its own store) per topic partition,
    against the partition's log end: `behind` records are not applied yet."""
    from confluent_kafka import TopicPartition
    settings = models.settings
    stored: dict[tuple[str, str, int], int] = {}
    with models.pool.connection() as conn:
        try:
            for name, topic, part, offset in conn.execute(models.q(
                    "SELECT projector, topic, partition, next_offset FROM {s}.projector_positions")).fetchall():
                stored[(name, topic, part)] = offset
        except psycopg.errors.UndefinedTable:
            pass
    with models.graph.session() as s:
        for r in s.run(RESOLVE + "MATCH (p:ProjectorPosition {ns: gen, projector: 'neo4j-graph'}) "
                       "RETURN p.topic AS t, p.partition AS p, p.next_offset AS o", ns=settings.namespace).data():
            stored[("neo4j-graph", r["t"], r["p"])] = r["o"]
    c = _consumer(settings)
    try:
        rows, topics = [], c.list_topics(timeout=timeout).topics     # one metadata request for all
        for name, cls in PROJECTOR_TYPES.items():
            for logical in cls.topics:
                topic = settings.topic(logical)
                meta = topics.get(topic)
                for p in sorted(meta.partitions if meta is not None and meta.error is None else ()):
                    high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                    at = stored.get((name, topic, p), 0)
                    rows.append({"projector": name, "topic": topic, "partition": p, "position": at,
                                 "log_end": high, "behind": max(0, high - at)})
        return rows
    finally:
        c.close()
