"""What the tenant barrier (row-level security, adapters/privacy/tenant_barrier.py; #28 item 3)
costs recall: the same recalls through the API role (the barrier on, the request bound to its
tenant) and through the owner role (which row-level security does not apply to), query by query in
a random order, in one run.

Row-level security adds its policy to every read of a user-keyed table, and Postgres then may not
use a non-leakproof operator (`terms && …`, `metadata @> …`) as an index condition: those are
filtered after the (user_id) btree instead of read from their GIN index. This measures what that
costs where it could matter: users with 100 memories (the common case), and one user with
--big memories. The other side of it: the owner's keyword path may pick the GIN index on `terms`
over every user's rows (the bench's 24-word vocabulary makes terms common), which the barrier's
policy rules out; so small users can come out faster behind the barrier.

    .venv/bin/python -m bench.tenant_barrier [--users 200] [--per-user 100] [--big 10000] [--queries 300]
"""
from __future__ import annotations

import argparse
import contextvars
import random
import statistics
import time
import uuid
from datetime import datetime, timezone

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from kernel.config import get_settings
from adapters.privacy import tenant_barrier
from projections import pg
from query import store
from query.recall import RecallRequest, recall

WORDS = ("coffee tea hiking chess jazz Paris Berlin Lisbon cello bicycle beagle project deadline report meeting "
         "flight hotel allergy peanuts sushi running yoga piano novel garden").split()


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def load(ns, users: list[str], per_user: dict[str, int], dim: int, rng: random.Random) -> None:
    """memory_items rows written straight by the owner (the projector's table, COPY): the bench
    measures reads, and what a projector would write is beside the point here."""
    topics = np.random.default_rng(7).normal(size=(64, dim)).astype(np.float32)
    with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
        register_vector(conn)
        cols = ("memory_id", "user_id", "content", "category", "importance", "embedding", "terms", "event_id",
                "created_at", "updated_at", "ann")
        with conn.cursor().copy(sql.SQL("COPY {}.memory_items ({}) FROM STDIN WITH (FORMAT BINARY)").format(
                sql.Identifier(ns.namespace), sql.SQL(", ").join(map(sql.Identifier, cols)))) as cp:
            cp.set_types(["text", "text", "text", "text", "float4", "vector", "text[]", "text", "timestamptz",
                          "timestamptz", "bool"])
            now = time.time()
            for u in users:
                big = per_user[u] >= ns.vector_index_min_rows
                for _ in range(per_user[u]):
                    v = topics[rng.randrange(64)] + np.random.default_rng(rng.randrange(1 << 30)).normal(size=dim) * 0.6
                    v = (v / np.linalg.norm(v)).astype(np.float32)
                    words = rng.sample(WORDS, 3)
                    t = datetime.fromtimestamp(now - rng.randrange(10 ** 7), timezone.utc)
                    cp.write_row((str(uuid.uuid4()), u, "User likes " + " ".join(words), "preference", 0.5, v,
                                  words, str(uuid.uuid4()), t, t, big))
    pg.ensure_vector_index(ns)


def timed(models, user: str, query: tuple[str, list[float]], tenant: str | None) -> float:
    def one(text, vec):
        if tenant is not None:
            tenant_barrier.bind(tenant)
        t0 = time.perf_counter()
        recall(models, RecallRequest(user, text, k=10, expand=False, query_embedding=vec))
        return (time.perf_counter() - t0) * 1000
    return contextvars.copy_context().run(one, *query)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--per-user", type=int, default=100)
    ap.add_argument("--big", type=int, default=10_000, help="one more user with this many memories")
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    base = get_settings()
    ns = base.model_copy(update={"namespace": f"bench_rls_{uuid.uuid4().hex[:6]}"})
    pg.ensure_schema(ns)
    rng = random.Random(28)
    users = [f"acme/u{i}" for i in range(args.users)]
    big = "acme/big"
    per_user = {u: args.per_user for u in users} | {big: args.big}
    t0 = time.monotonic()
    load(ns, users + [big], per_user, ns.embed_dim, rng)
    print(f"loaded {sum(per_user.values()):,} memories in {time.monotonic() - t0:.1f} s (namespace {ns.namespace})")

    api = store.ReadModels(ns, pool_size=1)
    owner = store.ReadModels(ns, pool_size=1)
    owner.pool.close()
    owner.pool = store._TenantBoundPool(ns.pg_dsn(), min_size=1, max_size=1, open=True, configure=store._configure,
                                        kwargs={"autocommit": True})

    def queries(n):
        return [(" ".join(rng.sample(WORDS, 2)), list(np.random.default_rng(rng.randrange(1 << 30))
                                                      .normal(size=ns.embed_dim).astype(float))) for _ in range(n)]
    try:
        for label, who in (("users with %d memories" % args.per_user, None), ("one user with %d memories" % args.big, big)):
            rows = {"api role, bound (barrier)": [], "owner (no row-level security)": []}
            sides = [("api role, bound (barrier)", api, "acme"), ("owner (no row-level security)", owner, None)]
            for n in range(args.queries + 20):
                # query by query, the two sides in a random order: drift on a shared machine and
                # the second run's warmer cache hit both alike; the first 20 warm up, unscored
                user, query = who or rng.choice(users), queries(1)[0]
                for name, models, tenant in rng.sample(sides, 2):
                    ms = timed(models, user, query, tenant)
                    if n >= 20:
                        rows[name].append(ms)
            base_p50 = statistics.median(rows["owner (no row-level security)"])
            print(f"\nrecall, {label} ({args.queries} queries each, k=10, no expansion, query vector given)")
            for name, xs in rows.items():
                print(f"  {name:32s} p50 {statistics.median(xs):6.2f} ms  p95 {pct(xs, 0.95):6.2f} ms  "
                      f"p50 ratio {statistics.median(xs) / base_p50:.2f}")
    finally:
        api.close()
        owner.close()
        with psycopg.connect(ns.pg_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(ns.namespace)))


if __name__ == "__main__":
    main()
