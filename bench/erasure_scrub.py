"""What the erasure storage scrub costs (memstream/app/storage_scrub.py), and how long reads wait.

1. a bench namespace whose memory_items holds N rows (U users; random unit vectors as
   embeddings, as bench/auth.py), with the HNSW, GIN and btree indexes of the real DDL, plus the
   other read models' (small) tables, all created by the real projectors' set-up;
2. one user's rows deleted, as the projectors do on `user.erased`;
3. while a reader runs a user-scoped vector query (as recall does) every 50 ms, either the
   scrub (`--method scrub`: online rewrite, key store, statistics, WAL) or a VACUUM FULL of
   memory_items (`--method vacuum-full`, for comparison); reported: the total time, the reader's
   worst and median latency (how long reads were blocked), and the scrub's own breakdown.
    .venv/bin/python -m bench.erasure_scrub [--rows 100000] [--users 1000] [--method scrub|vacuum-full|both]
                                            [--maintenance-work-mem 1GB]
The namespace (Postgres schema, Kafka topics) is dropped at the end.
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

import orjson
import psycopg
from psycopg import sql
from adapters.kafka_auth import ADMIN, kafka_config


def load(settings, rows: int, users: int) -> None:
    from adapters.bus import ensure_topics
    from projections.pg import ensure_schema
    from projections.registry import PROJECTORS, build_projector
    ensure_topics(settings)
    ensure_schema(settings)
    for name in PROJECTORS:
        if name != "neo4j-graph":
            p = build_projector(name, settings)
            p.setup()
            p.close()
    from replay import stores
    stores.defer_indexes(settings, ("memory_items",))   # a bulk load, then one index build (as a rebuild does)
    s = sql.Identifier(settings.namespace)
    dim = settings.embed_dim
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        t = time.monotonic()
        # random unit vectors (correlated subquery: one vector per row), content with a unique word
        conn.execute(sql.SQL(
            "INSERT INTO {s}.memory_items (memory_id, user_id, content, category, importance, embedding, event_id, "
            "created_at, updated_at, terms) "
            "SELECT 'm' || g, 'u' || (g %% %s), 'memory ' || g || ' about ' || md5(g::text), 'general', 0.5, "
            "l2_normalize((SELECT array_agg((random() - 0.5)::real) FROM generate_series(1, %s) WHERE g > 0)::vector), "
            "'e' || g, now(), now(), ARRAY['memory', md5(g::text)] FROM generate_series(1, %s) g").format(s=s),
            (users, dim, rows))
        conn.execute(sql.SQL("INSERT INTO {s}.preferences (user_id, key, value, version, memory_id, event_id, updated_at) "
                             "SELECT 'u' || g, 'likes:thing' || g, 'true', 1, 'm' || g, 'p' || g, now() "
                             "FROM generate_series(0, %s) g").format(s=s), (users - 1,))
        stores.build_deferred_indexes(settings, ("memory_items",))
        conn.execute(sql.SQL("ANALYZE {s}.memory_items").format(s=s))
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size(%s::regclass))",
                            (f'"{settings.namespace}".memory_items',)).fetchone()[0]
        print(f"loaded {rows:,} memory items of {users:,} users ({size} with indexes) in {time.monotonic() - t:.1f} s",
              flush=True)


def erase_rows(settings, user: str) -> int:
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        n = 0
        for table in ("memory_items", "preferences"):
            n += conn.execute(sql.SQL("DELETE FROM {}.{} WHERE user_id = %s").format(
                sql.Identifier(settings.namespace), sql.Identifier(table)), (user,)).rowcount
        return n


class Reader(threading.Thread):
    """A user-scoped nearest-neighbour query every 50 ms (recall's first step); latencies kept."""

    def __init__(self, settings, users: int):
        super().__init__(daemon=True)
        self.settings, self.users = settings, users
        self.latencies: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from pgvector.psycopg import register_vector
        s = sql.Identifier(self.settings.namespace)
        with psycopg.connect(self.settings.pg_dsn(), autocommit=True) as conn:
            register_vector(conn)
            q = conn.execute(sql.SQL("SELECT embedding FROM {}.memory_items LIMIT 1").format(s)).fetchone()[0]
            i = 0
            while not self.stop.is_set():
                t = time.monotonic()
                with conn.transaction():
                    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    conn.execute(sql.SQL("SELECT memory_id FROM {}.memory_items WHERE user_id = %s "
                                         "ORDER BY embedding <=> %s LIMIT 10").format(s),
                                 (f"u{2 + i % (self.users - 2)}", q)).fetchall()
                self.latencies.append(time.monotonic() - t)
                i += 1
                time.sleep(0.05)

    def window(self, start: int) -> dict:
        xs = self.latencies[start:] or [0.0]
        return {"queries": len(xs), "max_ms": round(max(xs) * 1000, 1), "median_ms": round(statistics.median(xs) * 1000, 2)}


def measure(settings, reader: Reader, method: str, mwm: str) -> dict:
    start = len(reader.latencies)
    t = time.monotonic()
    out: dict = {"method": method}
    if method == "scrub":
        from memstream.app.storage_scrub import scrub_storage
        out["report"] = scrub_storage(settings).as_dict()
    else:
        with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(mwm)))
            conn.execute(sql.SQL("VACUUM (FULL, ANALYZE) {}.memory_items").format(sql.Identifier(settings.namespace)))
    out["seconds"] = round(time.monotonic() - t, 2)
    time.sleep(0.5)
    out["reads"] = reader.window(start)
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--method", choices=["scrub", "vacuum-full", "both"], default="both")
    ap.add_argument("--maintenance-work-mem", default="1GB", help="for VACUUM FULL (the rebuild's index build uses 1GB)")
    args = ap.parse_args(argv)
    from kernel.config import get_settings
    settings = get_settings().model_copy(update={"namespace": "scrubbench_" + uuid.uuid4().hex[:8]})
    results = []
    try:
        load(settings, args.rows, args.users)
        print(f"deleted {erase_rows(settings, 'u1')} rows of the erased user", flush=True)
        reader = Reader(settings, args.users)
        reader.start()
        time.sleep(2)
        baseline = reader.window(0)
        print(f"reads before: {baseline}", flush=True)
        for method in (["vacuum-full", "scrub"] if args.method == "both" else [args.method]):
            r = measure(settings, reader, method, args.maintenance_work_mem)
            results.append(r)
            print(orjson.dumps(r).decode(), flush=True)
        reader.stop.set()
        reader.join(10)
    finally:
        drop(settings)
    return results


def drop(settings) -> None:
    from confluent_kafka.admin import AdminClient
    from adapters.bus import TOPICS
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        for schema in (settings.namespace, settings.namespace + "__shadow", settings.namespace + "__old"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    with psycopg.connect(settings.pg_dsn(settings.pg_keys_database), autocommit=True) as conn:   # the rebuild's key store
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(settings.namespace)))
    admin = AdminClient(kafka_config(settings, ADMIN))
    for fut in admin.delete_topics([settings.topic(t) for t in TOPICS], operation_timeout=30).values():
        try:
            fut.result()
        except Exception:  # noqa: BLE001 - best effort
            pass


if __name__ == "__main__":
    main()
