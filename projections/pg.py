"""Postgres read models (schema = namespace): positions, key-value preferences, pgvector items."""
from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from kernel.config import Settings, pg_role_name
from adapters.privacy import shadow_functions, tenant_barrier
from adapters.resilience import StalePosition
from projections.relations_schema import DDL as RELATIONS_DDL

DDL = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.projector_positions (
    projector   text   NOT NULL,
    topic       text   NOT NULL,
    partition   int    NOT NULL,
    next_offset bigint NOT NULL,
    PRIMARY KEY (projector, topic, partition)
);
CREATE TABLE IF NOT EXISTS {s}.preferences (
    user_id    text NOT NULL,
    key        text NOT NULL,
    value      text NOT NULL,
    version    int  NOT NULL,
    memory_id  text,
    event_id   text NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS {s}.preference_history (
    user_id    text NOT NULL,
    key        text NOT NULL,
    version    int  NOT NULL,
    value      text NOT NULL,
    event_id   text NOT NULL,
    supersedes text,
    set_at     timestamptz NOT NULL,
    PRIMARY KEY (user_id, key, version)
);
CREATE TABLE IF NOT EXISTS {s}.memory_items (
    memory_id     text PRIMARY KEY,
    user_id       text NOT NULL,
    key           text,
    value         text,
    content       text NOT NULL,
    category      text NOT NULL,
    tags          text[] NOT NULL DEFAULT '{{}}',
    slot_hint     text,
    importance    real NOT NULL,
    embedding     vector({dim}) NOT NULL,
    status        text NOT NULL DEFAULT 'active',
    superseded_by text,
    access_count  int  NOT NULL DEFAULT 0,
    last_accessed_at timestamptz,
    terms         text[] NOT NULL DEFAULT '{{}}',  -- keyword-path tokens (domain.text)
    session       text,
    fact_id       text,
    event_id      text NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_items_user_created ON {s}.memory_items (user_id, created_at);
CREATE INDEX IF NOT EXISTS memory_items_terms ON {s}.memory_items USING gin (terms);
-- consolidation and forgetting: who a retired memory went into, a merge's provenance, summaries
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS merged_into text;
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS parent_ids text[] NOT NULL DEFAULT '{{}}';
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS source_fact_ids text[] NOT NULL DEFAULT '{{}}';
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS summarized_at timestamptz;
-- decay is a function (domain/decay.py): when `importance` was published; readers decay it from there
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS importance_at timestamptz;
ALTER TABLE {s}.preference_history ADD COLUMN IF NOT EXISTS memory_id text;
-- `ann`: the row is in the HNSW index (a partial index, made by ensure_vector_index): the rows of
-- users who hold at least vector_index_min_rows rows. Smaller users are served by the btree on
-- (user_id, created_at) and an exact sort, so their memories never pay an HNSW insert.
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS ann boolean NOT NULL DEFAULT false;
-- scoping (issue 25): the agent and run a memory came from, and the caller's flat metadata
-- (schemas/limits.py), filtered in SQL by the memories list (projections/memory_filters.py)
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS agent_id text;
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS run_id text;
ALTER TABLE {s}.memory_items ADD COLUMN IF NOT EXISTS metadata jsonb;
CREATE INDEX IF NOT EXISTS memory_items_user_agent ON {s}.memory_items (user_id, agent_id);
CREATE INDEX IF NOT EXISTS memory_items_user_run ON {s}.memory_items (user_id, run_id);
CREATE INDEX IF NOT EXISTS memory_items_metadata ON {s}.memory_items USING gin (metadata jsonb_path_ops);
-- the list's stable order and cursor: (created_at, memory_id) within a user
CREATE INDEX IF NOT EXISTS memory_items_user_created_id ON {s}.memory_items (user_id, created_at, memory_id);
-- memory.linked (FOLLOWS, SIMILAR_TO), each edge stored from both ends: recall's 1-hop expansion
-- reads a memory's neighbours by its id in the same snapshot as its other reads, without a Neo4j
-- round trip (the graph keeps the same edges for graph queries)
CREATE TABLE IF NOT EXISTS {s}.memory_links (
    memory_id text NOT NULL,
    other_id  text NOT NULL,
    kind      text NOT NULL,
    user_id   text NOT NULL,
    weight    real NOT NULL,
    PRIMARY KEY (memory_id, other_id, kind)
);
CREATE INDEX IF NOT EXISTS memory_links_user ON {s}.memory_links (user_id);
-- Validity (#26 item 6): every state a memory row and a link held, valid from the event time of the
-- decision that made it, so "as of T" is an indexed read (query/as_of.py), not a replay. Written by
-- pgvector-items in the same statement as the change itself (projections/memory_history.py); a
-- forget or an erasure deletes a memory's versions with it. Columns: memory_items' less `ann`.
CREATE TABLE IF NOT EXISTS {s}.memory_item_versions (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    valid_from    timestamptz NOT NULL,
    change_id     text NOT NULL,
    memory_id     text NOT NULL,
    user_id       text NOT NULL,
    key           text,
    value         text,
    content       text NOT NULL,
    category      text NOT NULL,
    tags          text[] NOT NULL,
    slot_hint     text,
    importance    real NOT NULL,
    embedding     vector({dim}) NOT NULL,
    status        text NOT NULL,
    superseded_by text,
    access_count  int  NOT NULL,
    last_accessed_at timestamptz,
    terms         text[] NOT NULL,
    session       text,
    fact_id       text,
    event_id      text NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    merged_into   text,
    parent_ids    text[] NOT NULL,
    source_fact_ids text[] NOT NULL,
    summarized_at timestamptz,
    importance_at timestamptz,
    agent_id      text,
    run_id        text,
    metadata      jsonb,
    UNIQUE (memory_id, change_id)
);
-- The winners as of a time from the index alone: each memory's latest version by then, with its
-- status, so only the winners a read keeps (active ones, mostly) are fetched from the heap.
DROP INDEX IF EXISTS {s}.memory_item_versions_as_of;
CREATE INDEX IF NOT EXISTS memory_item_versions_winners ON {s}.memory_item_versions (user_id, memory_id, seq DESC) INCLUDE (valid_from, status);
CREATE TABLE IF NOT EXISTS {s}.memory_link_versions (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    valid_from timestamptz NOT NULL,
    change_id  text NOT NULL,
    memory_id  text NOT NULL,
    other_id   text NOT NULL,
    kind       text NOT NULL,
    user_id    text NOT NULL,
    weight     real NOT NULL,
    UNIQUE (memory_id, other_id, kind, change_id)
);
CREATE INDEX IF NOT EXISTS memory_link_versions_user ON {s}.memory_link_versions (user_id);
-- A row here: the versions began beside memories projected before them, so they do not hold the
-- whole past and as-of reads replay (replay/timetravel.py) until `replay rebuild` of pgvector-items
-- (whose fresh tables, this one empty, are swapped in).
CREATE TABLE IF NOT EXISTS {s}.memory_history_gaps (
    noted_at timestamptz NOT NULL DEFAULT now()
);
"""


def schema(settings: Settings) -> sql.Identifier:
    return sql.Identifier(settings.namespace)


def connect(settings: Settings, autocommit: bool = False, role: str = "projector") -> psycopg.Connection:
    """A connection as the projectors' role (writes the read models); the query side passes role="api"."""
    conn = psycopg.connect(settings.pg_dsn(role=role), autocommit=autocommit, connect_timeout=5)
    register_vector(conn)
    return conn


def ensure_ddl(settings: Settings, ddl: str, probe: Callable[[psycopg.Connection], object] | None = None,
               after: Callable[[psycopg.Connection, object], None] | None = None, **literals) -> object:
    """Run a read model's DDL ({s} = the namespace schema) under the shared DDL lock.

    Concurrent projectors may race on CREATE … IF NOT EXISTS; an advisory lock serialises them.
    Run as the owner role: the tables are its, and its default privileges (memstream/stack/files/
    postgres/roles.sql) let the projectors write and the API read each new one. `probe(conn)`, if
    given, runs under the same lock just before the DDL and its result is returned: what the
    schema looked like before this call, with no other projector's DDL between the look and it;
    `after(conn, that)`, if given, runs under the lock right after the DDL (a note of what it found).
    """
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext('memstream-ddl'))")
        try:
            before = probe(conn) if probe else None
            conn.execute(sql.SQL(ddl).format(s=schema(settings), **{k: sql.Literal(v) for k, v in literals.items()}))
            if after:
                after(conn, before)
            ensure_tenant_barrier(conn, settings)
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('memstream-ddl'))")
    return before


# Versioned: a changed policy gets a new name, and ensure_tenant_barrier replaces the older ones
BARRIER_POLICY = "tenant_barrier_v2"
WRITERS_POLICY = "projector_writes"


def ensure_tenant_barrier(conn: psycopg.Connection, settings: Settings) -> list[str]:
    """Row-level security on every table of the namespace that holds a `user_id` and has none yet
    (adapters/privacy/tenant_barrier.py): the API role sees the rows of the tenant its session is
    bound to, the projectors' role reads and writes every row, the owner bypasses it. Run by the
    owner under the DDL lock, after each read model's DDL, so a table added later gets it too.
    Returns the tables it changed."""
    todo = [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'user_id' AND NOT a.attisdropped "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT EXISTS "
        "(SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = %s) ORDER BY c.relname",
        (settings.namespace, BARRIER_POLICY)).fetchall()]
    api, projector = sql.Identifier(pg_role_name(settings, "api")), sql.Identifier(pg_role_name(settings, "projector"))
    for table in todo:
        t = sql.Identifier(settings.namespace, table)
        # 1. the writers' policy first: the projectors never meet the table with RLS on and no policy
        conn.execute(sql.SQL("DROP POLICY IF EXISTS {w} ON {t}").format(w=sql.Identifier(WRITERS_POLICY), t=t))
        conn.execute(sql.SQL("CREATE POLICY {w} ON {t} TO {r} USING (true) WITH CHECK (true)").format(
            w=sql.Identifier(WRITERS_POLICY), t=t, r=projector))
        # 2. the readers' barrier, in place of an older version of it
        for (old,) in conn.execute("SELECT polname FROM pg_policy WHERE polrelid = %s::regclass AND polname LIKE "
                                   "'tenant\\_barrier%%'", (t.as_string(conn),)).fetchall():
            conn.execute(sql.SQL("DROP POLICY {o} ON {t}").format(o=sql.Identifier(old), t=t))
        conn.execute(sql.SQL("CREATE POLICY {b} ON {t} FOR SELECT TO {r} USING ({using})").format(
            b=sql.Identifier(BARRIER_POLICY), t=t, r=api, using=sql.SQL(tenant_barrier.POLICY_USING)))
        # 3. then on: a role without a policy (none should exist) sees nothing
        conn.execute(sql.SQL("ALTER TABLE {t} ENABLE ROW LEVEL SECURITY").format(t=t))
    return todo


REBUILD_ITEMS = "memstream replay rebuild --projection pgvector-items"


def ensure_shadow_functions(settings: Settings) -> None:
    """The owner's SECURITY DEFINER functions for as-of shadows and erasure in shadows
    (adapters/privacy/shadow_functions.py), replaced under the DDL lock like the tables."""
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext('memstream-ddl'))")
        try:
            conn.execute(shadow_functions.ddl(settings))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('memstream-ddl'))")


def ensure_schema(settings: Settings) -> None:
    def note_gap(conn: psycopg.Connection, found) -> None:
        if found[1]:   # in the DDL's lock: no projector writes a version between the look and the note
            conn.execute(sql.SQL("INSERT INTO {}.memory_history_gaps DEFAULT VALUES").format(schema(settings)))

    links_missing, history_missing = ensure_ddl(settings, DDL, probe=lambda conn: _missing_beside_items(conn, settings.namespace),
                                                after=note_gap, dim=settings.embed_dim)
    if history_missing:
        logging.getLogger("memstream.projections").warning(
            "%s: memory versions are new beside existing memories; as-of reads replay the log until `%s`",
            settings.namespace, REBUILD_ITEMS)
    ensure_vector_index(settings)
    ensure_shadow_functions(settings)
    # relational memory's tables (#26) belong to the namespace's read models like the others: the API
    # reads them (entities, relations) before pg-relations has run in a new namespace
    ensure_ddl(settings, RELATIONS_DDL)
    if links_missing:
        # memory_links is filled from the log by pgvector-items; the events already applied are not
        # re-read by a live projector, so until a rebuild recall expands nothing for older memories
        logging.getLogger("memstream.projections").warning(
            "%s: memory_links is new beside existing memories; run `%s` so recall's graph expansion "
            "covers them", settings.namespace, REBUILD_ITEMS)


def _missing_beside_items(conn: psycopg.Connection, namespace: str) -> tuple[bool, bool]:
    """(memory_links, memory_item_versions): each missing while memory_items holds rows."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NULL, to_regclass(%s) IS NULL",
                          (f'"{namespace}"."memory_items"', f'"{namespace}"."memory_links"',
                           f'"{namespace}"."memory_item_versions"')).fetchone()
    held = bool(exists[0] and conn.execute(
        sql.SQL("SELECT EXISTS (SELECT FROM {}.memory_items)").format(sql.Identifier(namespace))).fetchone()[0])
    return held and bool(exists[1]), held and bool(exists[2])


# The HNSW index over the rows of large users only (`WHERE ann`), and the index it replaces: the
# same HNSW over every row, which cost every new memory an insert of 5-10 ms of Postgres CPU
# (bench.recall_latency: ~200 events/s live, 5,875 without it; --ab-full-index on a loaded machine:
# 441-546 events/s, 2,728-3,878 with this one), though recall served users with few rows by the
# btree and an exact sort anyway (query/store.py plans per user). The price: a user crossing the
# threshold has all their rows inserted in one batch (1,000 rows: 9.2 s), the one-off cost the old
# index spread over their memories one by one.
ANN_INDEX = "memory_items_embedding_ann"
FULL_INDEX = "memory_items_embedding"
ANN_INDEX_DDL = "CREATE INDEX IF NOT EXISTS {i} ON {s}.memory_items USING hnsw (embedding vector_cosine_ops) WHERE ann"


def index_method(conn: psycopg.Connection, namespace: str, index: str) -> tuple[str, bool] | None:
    """(access method, partial?) of an index in the namespace's schema; None if there is none."""
    return conn.execute(
        "SELECT a.amname, x.indpred IS NOT NULL FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "JOIN pg_am a ON a.oid = i.relam WHERE x.indexrelid = to_regclass(%s)", (f'"{namespace}"."{index}"',)).fetchone()


def ensure_vector_index(settings: Settings, maintenance_work_mem: str = "1GB") -> None:
    """Give memory_items its partial HNSW index, converting a namespace made before it.

    Idempotent and safe to interrupt: each step is its own statement, and a run that stopped
    anywhere is finished by the next (a projector's set-up calls this). Runs as the owner role
    under the DDL lock, like ensure_ddl. Readers are never blocked for long: between steps 1 and 3
    large users' recalls are exact scans (slower, same results); step 3 blocks writers, not readers.
    """
    s, ns = schema(settings), settings.namespace
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext('memstream-ddl'))")
        try:
            # 1. Drop the old index over every row first: while it exists, each row step 2 flags
            #    would pay an HNSW insert into it. (A replay's never-maintained placeholder of the
            #    same name is a btree, replay/stores.py: left alone.)
            if index_method(conn, ns, FULL_INDEX) == ("hnsw", False):
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {s}.{i}").format(s=s, i=sql.Identifier(FULL_INDEX)))
            # 2. No partial index yet (an old namespace, a fresh one, or a conversion cut short):
            #    flag the rows of users holding at least the threshold, the rule the projector keeps
            #    (MemoryItemsProjector._create). A namespace that has the index (or a replay's
            #    placeholder of it) is left as it is.
            if index_method(conn, ns, ANN_INDEX) is not None:
                return
            conn.execute(sql.SQL(
                "UPDATE {s}.memory_items SET ann = true WHERE NOT ann AND user_id IN "
                "(SELECT user_id FROM {s}.memory_items GROUP BY user_id HAVING count(*) >= {t})").format(
                s=s, t=sql.Literal(settings.vector_index_min_rows)))
            # 3. One build over the flagged rows (~2,600 rows/s here; inserting them one by one is
            #    the cost this index exists to avoid).
            conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
            conn.execute(sql.SQL(ANN_INDEX_DDL).format(s=s, i=sql.Identifier(ANN_INDEX)))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('memstream-ddl'))")


def load_positions(conn: psycopg.Connection, settings: Settings, projector: str) -> dict[tuple[str, int], int]:
    rows = conn.execute(sql.SQL("SELECT topic, partition, next_offset FROM {s}.projector_positions WHERE projector = %s")
                        .format(s=schema(settings)), (projector,)).fetchall()
    conn.commit()
    return {(t, p): o for t, p, o in rows}


def save_positions(cur: psycopg.Cursor, settings: Settings, projector: str, positions: dict[tuple[str, int], int],
                   expected: dict[tuple[str, int], int | None] | None = None) -> None:
    """Store the projector's next offsets in the caller's transaction.

    Without `expected` (replays, shadows): positions only move forward. With it (the live runner's
    fence), each (topic, partition) in `expected` is a compare-and-set: its row must still hold
    the expected offset (None: no row yet), or StalePosition is raised and the caller's whole
    transaction rolls back — a writer that lost the partition cannot overwrite a newer batch.
    Concurrent writers serialise on the row lock; the loser re-checks and fails.
    """
    fenced = {tp: o for tp, o in positions.items() if expected is not None and tp in expected}
    rest = {tp: o for tp, o in positions.items() if tp not in fenced}
    if rest:
        cur.executemany(sql.SQL(
            "INSERT INTO {s}.projector_positions (projector, topic, partition, next_offset) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (projector, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset "
            "WHERE {s}.projector_positions.next_offset < EXCLUDED.next_offset").format(s=schema(settings)),
            [(projector, t, p, o) for (t, p), o in rest.items()])
    if not fenced:
        return
    assert expected is not None
    update = [(t, p, expected[(t, p)], o) for (t, p), o in fenced.items() if expected[(t, p)] is not None]
    insert = [(t, p, o) for (t, p), o in fenced.items() if expected[(t, p)] is None]
    if update:
        cur.execute(sql.SQL(
            "UPDATE {s}.projector_positions AS pp SET next_offset = v.next FROM "
            "unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[]) AS v(topic, partition, expected, next) "
            "WHERE pp.projector = %s AND pp.topic = v.topic AND pp.partition = v.partition "
            "AND pp.next_offset = v.expected").format(s=schema(settings)),
            ([u[0] for u in update], [u[1] for u in update], [u[2] for u in update], [u[3] for u in update], projector))
        if cur.rowcount != len(update):
            raise StalePosition(f"{projector}: stored position differs from the one this batch started at "
                                f"({len(update) - cur.rowcount} of {len(update)} partitions)")
    if insert:
        cur.execute(sql.SQL(
            "INSERT INTO {s}.projector_positions (projector, topic, partition, next_offset) "
            "SELECT %s, v.topic, v.partition, v.next FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS v(topic, partition, next) "
            "ON CONFLICT (projector, topic, partition) DO NOTHING").format(s=schema(settings)),
            (projector, [i[0] for i in insert], [i[1] for i in insert], [i[2] for i in insert]))
        if cur.rowcount != len(insert):
            raise StalePosition(f"{projector}: another writer stored a first position before this batch")


def copy_rows(cur: psycopg.Cursor, temp: str, columns: list[tuple[str, str]], rows) -> None:
    """Bulk-load rows into a session temp table (binary COPY; `seq` numbers them in order), emptied first.

    Projectors then merge the temp table into theirs with one INSERT … SELECT … ORDER BY seq, which
    behaves as the same rows inserted one by one in that order (ON CONFLICT included) at a fraction
    of the client cost of executemany.
    """
    cur.execute(sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (seq int, {}) ON COMMIT DELETE ROWS").format(
        sql.Identifier(temp), sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns)))
    # Empty now, not only at commit: one transaction may load several runs (around an erasure).
    cur.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(temp)))
    with cur.copy(sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(sql.Identifier(temp))) as copy:
        copy.set_types(["int4", *(t for _, t in columns)])
        for n, row in enumerate(rows):
            copy.write_row((n, *row))


def writer_lock_key(settings: Settings, projector: str) -> str:
    return f"memstream-writer:{settings.namespace}:{projector}"


def hold_writer_lock(cur: psycopg.Cursor, settings: Settings, projector: str) -> None:
    """Take the projector's writer lock (shared) for this transaction.

    A replay swap (replay/stores.py) takes it exclusively: it waits for a batch in flight, and a
    live batch waits for the swap, then writes into the tables the swap moved in.
    """
    cur.execute("SELECT pg_advisory_xact_lock_shared(hashtext(%s))", (writer_lock_key(settings, projector),))


def table_checksum(conn: psycopg.Connection, settings: Settings, table: str, columns: list[str],
                   order_by: list[str], schema_name: str | None = None) -> tuple[int, str]:
    """(row count, md5 of every row's columns in a fixed order): a content checksum of a read model.

    Used by the kill -9 and replay tests and by `replay verify`: two projections with equal
    checksums hold the same content, whatever order they were written in.
    """
    s = sql.Identifier(schema_name or settings.namespace)
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    order = sql.SQL(", ").join(sql.Identifier(c) for c in order_by)
    row = conn.execute(sql.SQL(
        "SELECT count(*), coalesce(md5(string_agg(md5(row({cols})::text), '' ORDER BY {order})), '') FROM {s}.{t}")
        .format(cols=cols, order=order, s=s, t=sql.Identifier(table))).fetchone()
    return int(row[0]), row[1]
