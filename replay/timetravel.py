"""Time travel: what a user's memory held at a moment (`--as-of TIME` on recall, profile, prefs).

Approach: replay, not validity intervals. The read models keep only the present; rather than
teach every projector to keep history (and every query to filter by it), an as-of query
1. asks the audit index where the user's memory-topic events with event time <= TIME are
   (topic, partition, offset; the index holds no content),
2. fetches exactly those records from Kafka and decodes them (upcasting old versions; an erased
   user's records read as erased and are skipped),
3. applies them, in log order, through the real projectors (pgvector items, key-value
   preferences, the Neo4j graph) into a temporary shadow namespace (`<ns>__asof_<id>`),
4. answers with the normal query functions over that shadow (recall with `now` = TIME, so
   age filters and recency mean "then"), and drops the shadow.
No projector logic is duplicated, so the past is projected exactly as the present is. The cost
is proportional to the user's history (one user's events only), typically tens of milliseconds
plus the shadow's DDL. Nothing is published: an as-of recall is not a use of the memories.

What it cannot show: what was deleted since on request. Erasure (the key is gone) and
forgetting (the audit index drops the forgotten events) hold for the past too; an as-of query
after an erasure finds nothing. It also relies on the audit index being caught up to TIME.
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from adapters.privacy import shadow_functions
from kernel.config import Settings
from kernel.errors import InvalidEvent, MemstreamError
from projections.runner import Item
from replay import stores
from replay.fetch import fetch
from schemas.records import decode_confluent

AS_OF_PROJECTORS = ("kv-preferences", "pgvector-items", "neo4j-graph")


def _check(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise MemstreamError("an as-of time needs a timezone, e.g. 2026-01-02T10:00:00+00:00")
    return at


def user_events(settings: Settings, user: str, at: datetime) -> list[tuple[str, int, int]]:
    """Positions of the user's memory-topic events with event time <= at, in log order."""
    with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn:
        if not stores.table_exists(conn, settings.namespace, "audit_events"):
            return []
        rows = conn.execute(sql.SQL(
            "SELECT topic, partition, log_offset FROM {}.audit_events WHERE user_id = %s AND topic = %s "
            "AND event_time <= %s ORDER BY partition, log_offset").format(sql.Identifier(settings.namespace)),
            (user, settings.topic("memory"), at)).fetchall()
    return [tuple(r) for r in rows]


@contextmanager
def snapshot(settings: Settings, user: str, at: datetime, keys=None):
    """A temporary namespace holding the user's memory as of `at`; yields its Settings."""
    _check(at)
    own_keys = keys is None
    if own_keys:
        from adapters.privacy.keystore import KeyStore
        keys = KeyStore(settings)
    shadow = stores.shadow_settings(settings, "asof_" + uuid.uuid4().hex[:10])
    from replay.rebuild import make_projector
    projectors = []
    try:
        # As the API role throughout: the owner's function makes the shadow's tables, which the API
        # role may then write, and nothing else (#28: no serving process holds the owner's password).
        with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn:
            shadow_functions.make_asof_shadow(conn, settings.namespace, shadow.namespace)
        for name in AS_OF_PROJECTORS:
            p = make_projector(name, shadow, shadow.namespace)
            projectors.append(p)
            if hasattr(p, "attach"):   # the Postgres ones
                p.attach("api")
            else:
                p.setup()          # the graph: a Neo4j generation, not Postgres
        positions = user_events(settings, user, at)
        records = fetch(settings, positions)
        items = []
        for pos in positions:          # log order
            m = records.get(pos)
            if m is None:
                continue
            try:
                env = decode_confluent(m, keys, settings.max_future_skew_s)
            except InvalidEvent:
                continue               # dead-lettered when it was first read (the same decode path)
            if env.user == user and env.time <= at:
                items.append(Item(pos[0], pos[1], pos[2], env))
        for p in projectors:
            p.apply(items, {})
        yield shadow
    finally:
        for p in projectors:
            p.close()
        drop(settings, shadow)
        if own_keys:
            keys.close()


def drop(settings: Settings, shadow: Settings) -> None:
    with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn:
        shadow_functions.drop_asof_shadow(conn, settings.namespace, shadow.namespace)
    with stores.graph_driver(settings) as driver:
        stores.delete_generation(driver, shadow.namespace)


# -- the three as-of queries ---------------------------------------------------------------------

def recall_as_of(models, req, at: datetime, keys=None) -> list:
    """recall() over the user's memory as of `at` (the query embedded with the live models)."""
    from query.recall import recall
    from query.store import ReadModels
    q = req.query_embedding if req.query_embedding is not None else models.embed_query(req.query)
    with snapshot(models.settings, req.user, at, keys) as shadow:
        then = ReadModels(shadow, pool_size=1)
        try:
            return recall(then, replace(req, query_embedding=q), now=_check(at))
        finally:
            then.close()


def profile_as_of(settings: Settings, user: str, at: datetime, keys=None) -> dict:
    from query.profile import profile
    from query.store import ReadModels
    with snapshot(settings, user, at, keys) as shadow:
        then = ReadModels(shadow, pool_size=1)
        try:
            return profile(then, user, at=_check(at))
        finally:
            then.close()


def preferences_as_of(settings: Settings, user: str, at: datetime, keys=None) -> list[dict]:
    from projections.queries import preferences
    with snapshot(settings, user, at, keys) as shadow:
        return preferences(shadow, user)


def memories_as_of(settings: Settings, user: str, at: datetime, keys=None, limit: int = 100) -> list[dict]:
    from projections.queries import memories
    with snapshot(settings, user, at, keys) as shadow:
        return memories(shadow, user, limit, at=_check(at))


def sweep_stale(settings: Settings) -> int:
    """Drop as-of shadows left behind by a killed process (none normally survive a query)."""
    with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (settings.namespace + "\\_\\_asof\\_%",))
        names = [r["nspname"] for r in cur.fetchall()]
    for n in names:
        drop(settings, settings.model_copy(update={"namespace": n}))
    return len(names)
