"""`memstream replay rebuild`: rebuild projections from the log into shadows, then swap them in.

1. Shadow stores (replay/stores.py): Postgres schema `<ns>__shadow`, a new Neo4j generation
   recorded on the namespace's graph pointer. A shadow left by an interrupted rebuild is resumed
   from its stored positions (`--fresh` starts over).
2. Bulk load: the log is read once and each record decoded once for all the projections being
   rebuilt (replay/engine.py), with vector and inverted indexes deferred until the load is done.
3. Catch-up and swap: with the live writers of those projections held (they wait, readers do
   not), the shadow is brought up to at least the live positions, then swapped in atomically.
   A live projector carries on from its own position into the new stores.

`--from TIME` re-projects the tail of the log instead of all of it: the shadow starts as a copy of
the live projection (a consistent snapshot in Postgres; in Neo4j a copy taken after reading its
positions), its positions are moved back to the first record appended at or after TIME in each
partition (Kafka's time index, i.e. when the record was appended, not the event time), and
everything from there is re-applied before the swap. Use it after fixing a projector, to redo
what it wrote since TIME in time proportional to the tail; rows not touched since TIME keep what
the old code wrote (a full rebuild redoes everything). Re-applying events a projection already
holds changes nothing (projectors write absolute values, higher versions only, or insert once).

Projectors never call an embedder or an LLM: the rebuild only copies what the events recorded.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
from psycopg import sql

from kernel.config import Settings
from kernel.errors import MemstreamError
from adapters.kafka_auth import ADMIN, kafka_config
from projections.registry import PROJECTORS, build_projector
from projections.runner import Projector, TopicPart
from replay import stores
from replay.engine import (
    Replayer,
    ReplayStats,
    reader,
    real_positions,
    topics_of,
)
from replay.progress import note


def resolve_names(projection: str | list[str]) -> list[str]:
    names = list(PROJECTORS) if projection in ("all", ["all"]) else (
        [projection] if isinstance(projection, str) else list(projection))
    unknown = [n for n in names if n not in PROJECTORS]
    if unknown:
        raise MemstreamError(f"unknown projection(s) {unknown}; choose from {', '.join(PROJECTORS)} or all")
    return names


make_projector = build_projector   # (name, settings, generation=None)


@contextmanager
def replay_lock(settings: Settings, purpose: str):
    """One replay of a kind per namespace at a time (a session-level advisory lock).

    Released explicitly before the connection closes: closing only asks the server to end the
    session, and its backend may still hold the lock for a moment on a loaded machine, so a second
    replay started right after the first would be refused as "running" (seen in CI)."""
    conn = psycopg.connect(settings.pg_dsn(), autocommit=True)
    key = f"memstream-replay:{settings.namespace}:{purpose}"
    held = False
    try:
        held = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]
        if not held:
            raise MemstreamError(f"another `replay` ({purpose}) of namespace {settings.namespace} is running")
        yield
    finally:
        if held and not conn.closed:
            try:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
            except psycopg.Error:
                pass   # a broken connection: its session, and so the lock, ends with it
        conn.close()


def drop_shadow(settings: Settings, shadow: Settings, names: list[str], generation: str | None = None) -> None:
    """Forget a shadow's stores for `names` (all of them: the whole shadow schema)."""
    pg_names = [n for n in names if not stores.is_graph(n)]
    if set(pg_names) >= {n for n in PROJECTORS if not stores.is_graph(n)}:
        stores.drop_schema(settings, shadow.namespace)
    elif pg_names:
        with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
            if stores.schema_exists(conn, shadow.namespace):
                s = sql.Identifier(shadow.namespace)
                for name in pg_names:
                    for table in stores.owned_tables(name):
                        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.{}").format(s, sql.Identifier(table)))
                        if stores.table_exists(conn, shadow.namespace, stores.DEFERRED_TABLE):
                            conn.execute(sql.SQL("DELETE FROM {}.{} WHERE table_name = %s").format(
                                s, sql.Identifier(stores.DEFERRED_TABLE)), (table,))
                if stores.table_exists(conn, shadow.namespace, "projector_positions"):
                    conn.execute(sql.SQL("DELETE FROM {}.projector_positions WHERE projector = ANY(%s)").format(s), (pg_names,))
    if generation is not None:
        with stores.graph_driver(settings) as driver:
            stores.delete_generation(driver, generation)


def _drop_empty_shadow_schema(settings: Settings, shadow: Settings) -> None:
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        if not stores.schema_exists(conn, shadow.namespace):
            return
        if stores.table_exists(conn, shadow.namespace, "projector_positions") and conn.execute(
                sql.SQL("SELECT count(*) FROM {}.projector_positions").format(sql.Identifier(shadow.namespace))).fetchone()[0]:
            return  # another projection's interrupted rebuild lives here
    stores.drop_schema(settings, shadow.namespace)


def catchup_targets(shadow_positions: dict[TopicPart, int], live_positions: dict[TopicPart, int],
                    topics: frozenset[str]) -> dict[TopicPart, int]:
    """Per partition, the shadow's position or the live one, whichever is further."""
    shadow_p, live_p = real_positions(shadow_positions, topics), real_positions(live_positions, topics)
    return {tp: max(shadow_p.get(tp, 0), live_p.get(tp, 0)) for tp in shadow_p.keys() | live_p.keys()}


@dataclass
class RebuildReport:
    namespace: str
    projections: list[str]
    shadow_schema: str
    generation: str | None
    resumed: bool
    since: str | None
    load: ReplayStats
    catchup: ReplayStats = field(default_factory=ReplayStats)
    index_seconds: float = 0.0
    swap_seconds: float = 0.0
    seconds: float = 0.0
    swapped: bool = False

    def as_dict(self) -> dict:
        return {"namespace": self.namespace, "projections": self.projections, "shadow_schema": self.shadow_schema,
                "graph_generation": self.generation, "resumed": self.resumed, "from": self.since,
                "load": self.load.as_dict(), "catchup": self.catchup.as_dict(),
                "index_seconds": round(self.index_seconds, 3), "swap_seconds": round(self.swap_seconds, 3),
                "seconds": round(self.seconds, 3), "swapped": self.swapped}


def rebuild(settings: Settings, projection: str | list[str], *, keys=None, since: datetime | None = None,
            fresh: bool = False, progress: bool = True, stop_after: int | None = None, swap: bool = True,
            batch_size: int = 5000, workers: int = 1) -> RebuildReport:
    names = resolve_names(projection)
    began = time.monotonic()
    own_keys = keys is None
    if own_keys:
        from adapters.privacy.keystore import KeyStore
        keys = KeyStore(settings)
    shadow = stores.shadow_settings(settings, "shadow")
    driver = stores.graph_driver(settings) if stores.GRAPH in names else None
    projectors: list[Projector] = []
    try:
        with replay_lock(settings, "rebuild"):
            # 1. the shadow stores: resumed, or fresh
            if fresh or since is not None:
                drop_shadow(settings, shadow, [n for n in names if not stores.is_graph(n)])
            generation = stores.rebuild_generation(driver, settings.namespace, fresh or since is not None) if driver else None
            projectors = [make_projector(n, shadow, generation) for n in names]
            for p in projectors:
                p.setup()
                if not stores.is_graph(p.name):
                    stores.defer_indexes(shadow, stores.owned_tables(p))
            resumed = any(p.positions() for p in projectors)
            if since is not None:
                seed_from_live(settings, shadow, projectors, since, generation)
            report = RebuildReport(settings.namespace, names, shadow.namespace, generation, resumed and since is None,
                                   since.isoformat() if since else None, ReplayStats())
            note(f"rebuild {', '.join(names)} of {settings.namespace}: shadow schema {shadow.namespace}"
                 + (f", graph generation {generation}" if generation else "")
                 + (" (resuming)" if report.resumed else ""), progress)

            # 2. bulk load to the log end as of now (sharded by partition over processes if asked)
            replayer = Replayer(kafka_config(settings, ADMIN), keys, max_future_skew_s=settings.max_future_skew_s, batch_size=batch_size, progress=progress,
                                progress_label="rebuild", stop_after=stop_after)
            if workers > 1 and stop_after is None:
                from replay.engine import load_parallel
                report.load = load_parallel(shadow, names, generation, workers, replayer.remaining(projectors),
                                            batch_size, progress, "rebuild")
            else:
                report.load = replayer.run(projectors)
            if report.load.interrupted:
                note(f"stopped after {report.load.records:,} events; run the same command again to resume", progress)
                report.seconds = time.monotonic() - began
                return report
            t = time.monotonic()
            note("building the shadow's indexes (the longest step after the load on a big namespace)…", progress)
            tables = tuple(t for p in projectors if not stores.is_graph(p.name) for t in stores.owned_tables(p))
            built = stores.build_deferred_indexes(shadow, tables)
            # statistics and the visibility map before the swap: a table swapped in without them is
            # planned blind until autovacuum comes round (as-of reads sorted the whole history of a
            # user instead of reading its index: 19 ms a statement vs 7)
            stores.vacuum_analyze(shadow, tables)
            report.index_seconds = time.monotonic() - t
            if built:
                note(f"built {', '.join(built)} in {report.index_seconds:.1f}s", progress)
            if not swap:
                report.seconds = time.monotonic() - began
                return report

            # 3. catch up with the live writers held, then swap
            t = time.monotonic()
            note("holding the live writers: catching up to their positions, then swapping…", progress)
            with stores.WriterLocks(settings, names) as locks:
                until = {p.name: catchup_targets(p.positions(), locks.positions.get(p.name, {}), topics_of(p))
                         for p in projectors}
                report.catchup = Replayer(kafka_config(settings, ADMIN), keys, max_future_skew_s=settings.max_future_skew_s, batch_size=batch_size,
                                          progress=False).run(projectors, until)
                for p in projectors:
                    p.close()
                projectors = []
                old_generation = locks.swap(shadow, generation)
            report.swap_seconds = time.monotonic() - t
            report.swapped = True
            note(f"swapped in: {', '.join(names)} (caught up {report.catchup.records:,} events under the writer locks "
                 f"in {report.swap_seconds:.2f}s)", progress)
            _drop_empty_shadow_schema(settings, shadow)
            if old_generation is not None and old_generation != generation:
                note("waiting out the graph's grace period before deleting the old generation…", progress)
                stores.wait_graph_grace()
                n = stores.delete_generation(driver, old_generation)
                note(f"deleted the old graph generation {old_generation} ({n:,} nodes)", progress)
            report.seconds = time.monotonic() - began
            return report
    finally:
        for p in projectors:
            p.close()
        if driver is not None:
            driver.close()
        if own_keys:
            keys.close()


# -- --from TIME: the shadow starts as a copy of the live projection --------------------------------

def offsets_at(settings: Settings, topics: frozenset[str], since: datetime) -> dict[TopicPart, int]:
    """Per partition, the first offset appended at or after `since` (the log end if none)."""
    with reader(kafka_config(settings, ADMIN), "replay-from") as r:
        return r.offsets_at(r.ends(topics), int(since.timestamp() * 1000), timeout=10)


def _lowered(live: dict[TopicPart, int], at: dict[TopicPart, int], topics: frozenset[str]) -> dict[TopicPart, int]:
    return {tp: (min(o, at.get(tp, o)) if tp[0] in topics else o) for tp, o in live.items()}


def seed_from_live(settings: Settings, shadow: Settings, projectors: list[Projector], since: datetime,
                   generation: str | None) -> None:
    for p in projectors:
        topics = topics_of(p)
        at = offsets_at(settings, topics, since)
        if stores.is_graph(p.name):
            _seed_graph(settings, generation, at, topics)
        else:
            _seed_postgres(settings, shadow, p, at, topics)


def _seed_postgres(settings: Settings, shadow: Settings, p: Projector, at: dict, topics: frozenset[str]) -> None:
    live_s, shadow_s = sql.Identifier(settings.namespace), sql.Identifier(shadow.namespace)
    with psycopg.connect(settings.pg_dsn()) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")   # tables and positions: one snapshot
        live_positions = stores.load_pg_positions(conn, settings.namespace, p.name)
        for table in stores.owned_tables(p):
            if not stores.table_exists(conn, settings.namespace, table):
                continue
            found = conn.execute(
                "SELECT a.attname, a.attidentity <> '' FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 "
                "AND NOT a.attisdropped AND a.attname IN (SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                "AND attnum > 0 AND NOT attisdropped) ORDER BY a.attnum",
                (f'"{shadow.namespace}"."{table}"', f'"{settings.namespace}"."{table}"')).fetchall()
            # an identity column (a version's seq) is numbered afresh by the shadow, in the live order
            cols = [name for name, identity in found if not identity]
            order = [name for name, identity in found if identity]
            c = sql.SQL(", ").join(sql.Identifier(x) for x in cols)
            conn.execute(sql.SQL("INSERT INTO {}.{} ({}) SELECT {} FROM {}.{}{}").format(
                shadow_s, sql.Identifier(table), c, c, live_s, sql.Identifier(table),
                sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(sql.Identifier(x) for x in order)) if order else sql.SQL("")))
        rows = [(p.name, t, part, o) for (t, part), o in _lowered(live_positions, at, topics).items()]
        with conn.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {}.projector_positions (projector, topic, partition, next_offset) "
                                    "VALUES (%s, %s, %s, %s) ON CONFLICT (projector, topic, partition) DO UPDATE "
                                    "SET next_offset = EXCLUDED.next_offset").format(shadow_s), rows)
        conn.commit()


def _seed_graph(settings: Settings, generation: str, at: dict, topics: frozenset[str], batch: int = 5000) -> None:
    from projections.graph_generation import current
    with stores.graph_driver(settings) as driver, driver.session() as s:
        live = current(s, settings.namespace)
        live_positions = stores.graph_positions(s, live)   # read first: the copy is at least this new
        after = ""
        while True:
            rows = s.run("MATCH (m:Memory {ns: $ns}) WHERE m.id > $after RETURN m.id AS id, properties(m) AS p "
                         "ORDER BY m.id LIMIT $b", ns=live, after=after, b=batch).data()
            if not rows:
                break
            for r in rows:
                r["p"].pop("ns", None)
            s.run("UNWIND $rows AS r CREATE (m:Memory) SET m = r.p SET m.ns = $gen", rows=rows, gen=generation).consume()
            after = rows[-1]["id"]
        after = ""
        while True:   # edges, by source node, once every node exists in the new generation
            rows = s.run("MATCH (a:Memory {ns: $ns}) WHERE a.id > $after WITH a ORDER BY a.id LIMIT $b "
                         "OPTIONAL MATCH (a)-[e]->(b:Memory) RETURN a.id AS a, type(e) AS t, b.id AS b, properties(e) AS p",
                         ns=live, after=after, b=batch).data()
            if not rows:
                break
            by_type: dict[str, list] = {}
            for r in rows:
                if r["t"] is not None:
                    by_type.setdefault(r["t"], []).append(r)
            for rel, edges in by_type.items():   # relationship types cannot be parameters
                s.run(f"UNWIND $rows AS r MATCH (a:Memory {{ns: $gen, id: r.a}}), (b:Memory {{ns: $gen, id: r.b}}) "
                      f"CREATE (a)-[e:`{rel.replace('`', '')}`]->(b) SET e = r.p", rows=edges, gen=generation).consume()
            after = max(r["a"] for r in rows)
        _seed_entities(s, live, generation, batch)
        pos = [{"key": f"{generation}|{stores.GRAPH}|{t}|{p}", "topic": t, "partition": p, "o": o}
               for (t, p), o in _lowered(live_positions, at, topics).items()]
        s.run("UNWIND $pos AS p MERGE (n:ProjectorPosition {key: p.key}) SET n.ns = $gen, n.projector = $name, "
              "n.topic = p.topic, n.partition = p.partition, n.next_offset = p.o",
              pos=pos, gen=generation, name=stores.GRAPH).consume()


def _seed_entities(s, live: str, generation: str, batch: int) -> None:
    """Relational memory's graph (#26) into the new generation: (:Entity) nodes, then their RELATES
    edges, a page at a time in (user, id) order (entity ids are a user's own)."""
    skip = 0
    while True:
        rows = s.run("MATCH (x:Entity {ns: $ns}) RETURN properties(x) AS p ORDER BY x.user, x.id SKIP $skip LIMIT $b",
                     ns=live, skip=skip, b=batch).data()
        if not rows:
            break
        for r in rows:
            r["p"].pop("ns", None)
        s.run("UNWIND $rows AS r CREATE (x:Entity) SET x = r.p SET x.ns = $gen", rows=rows, gen=generation).consume()
        skip += len(rows)
    skip = 0
    while True:
        rows = s.run("MATCH (a:Entity {ns: $ns})-[e:RELATES]->(b:Entity) RETURN a.user AS u, a.id AS a, b.id AS b, "
                     "properties(e) AS p ORDER BY u, e.id SKIP $skip LIMIT $b", ns=live, skip=skip, b=batch).data()
        if not rows:
            break
        s.run("UNWIND $rows AS r MATCH (a:Entity {ns: $gen, user: r.u, id: r.a}), "
              "(b:Entity {ns: $gen, user: r.u, id: r.b}) CREATE (a)-[e:RELATES]->(b) SET e = r.p",
              rows=rows, gen=generation).consume()
        skip += len(rows)
