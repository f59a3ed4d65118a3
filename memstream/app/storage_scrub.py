"""The storage scrub: an erasure reaches the bytes on disk, not only the rows.

Crypto-shredding makes every event of an erased user unreadable wherever the log goes, and the
projectors delete the user's rows. But a deleted row is not deleted bytes. Postgres keeps them:
in heap pages (VACUUM prunes a dead tuple and leaves its bytes in the page's free space), in
index entries (a GIN entry for a term outlives its postings), in pg_statistic (ANALYZE samples
column values into histograms), in WAL segments (every insert, and the full-page images that
follow each checkpoint), and the key store's heap and WAL keep the deleted data key's wrapped
bytes, which with the master key would undo the crypto-shredding. `memstream erase user` runs
this scrub after the erasure (`memstream erase scrub` runs it alone):

 1. wait until every Postgres projector of the namespace has applied the `user.erased` event
    (its stored position on that memory-topic partition is past it): the rows are deleted;
 2. rewrite the live tables that hold personal content, online: a `replay rebuild --from now` of
    the content projections (kv-preferences, pgvector-items, task-buffers, session-windows,
    pg-relations: entity names, aliases, relation evidence).
    The shadow starts as a copy of the live tables (new files, without the deleted rows), its
    HNSW and GIN indexes are built while readers and writers carry on, then, with those
    projectors' writers held for the catch-up, it is swapped in and the old tables are dropped
    (their files are truncated at commit and unlinked at the checkpoint of step 6). Readers are
    blocked only by the swap itself. Measured (bench/erasure_scrub.py, 2 cores, a reader running
    a user-scoped vector query every 50 ms): with 100,000 memory items (407 MB) VACUUM FULL of
    memory_items blocked every read of it for 58 s (maintenance_work_mem 1 GB; 102 s on a loaded
    machine, 458 s at the default 64 MB), because it rebuilds the HNSW index under its exclusive
    lock; this scrub took 74 s (71 s of it the unblocked HNSW build), held the writers 0.29 s and
    the slowest read took 14 ms. With 10,000 items: 4.4 s blocked vs a 6.2 s scrub, slowest read 9 ms.
    The audit index is not rewritten: it holds ids, types, times and positions, never content;
 3. other shadows of the namespace (`<ns>__verify`, `__whatif_*`, a leftover `__old`, ...):
    every erased user's rows are deleted and those tables are rewritten with VACUUM FULL (no
    reader is served from a shadow);
 4. the key store: VACUUM FULL and ANALYZE of `user_keys` (the deleted wrapped key);
 5. statistics: ANALYZE of the rewritten tables (fresh samples replace any of the erased rows),
    then VACUUM FULL of pg_statistic in both databases (the old samples are dead tuples there);
 6. WAL: the server must remove old segments rather than recycle them with their bytes inside
    (`wal_recycle = off`, set by `memstream stack up`; no archive, no `wal_keep_size`, no
    replication slot: each is reported as a gap). The scrub switches past every segment that
    may hold old bytes (the current one and any recycled one waiting ahead), then CHECKPOINTs:
    every segment before the new redo point is unlinked.

Neo4j holds no personal content (projections/graph_projector.py: ids, categories, scores, never
text), and Kafka holds it only sealed. What this cannot reach: blocks of truncated or unlinked
files on the disk itself until the file system reuses them (encrypt the volume), base backups
and WAL archives taken before the erasure, and backups of the key store (their copy of the key
is erased only when they expire). Idempotent: a second run rewrites again and finds no WAL to
remove. Safe while the pipeline runs: the writers of a rewritten projection wait only for the
catch-up and swap; the pg_statistic rewrite holds that catalog for a moment (planning of a query
whose statistics are not cached waits for it).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from adapters.bus import Position
from kernel.config import Settings
from kernel.errors import MemstreamError
from projections.registry import PROJECTOR_TYPES
from replay import stores

# The projections whose tables hold personal content (turn text, facts, memory content and
# embeddings, preference keys and values, task goals and steps, summaries).
CONTENT_PROJECTIONS = ("kv-preferences", "pgvector-items", "task-buffers", "session-windows", "pg-relations")
# Their tables, less the erasure tombstones (ids only; a shadow must keep them).
CONTENT_TABLES = tuple(t for n in CONTENT_PROJECTIONS for t in stores.OWNED_TABLES[n] if not t.endswith("_erasures"))


log = logging.getLogger("memstream.scrub")


class ScrubPending(MemstreamError):
    """The projectors have not applied the erasure yet: nothing was rewritten; run it again."""
    exit_code = 3


@dataclass
class ScrubReport:
    namespace: str
    waited_s: float = 0.0
    rewrite: dict = field(default_factory=dict)        # the online rewrite of the live content tables
    shadows: list[dict] = field(default_factory=list)  # other shadow schemas: rows deleted, tables rewritten
    keys_s: float = 0.0
    statistics_s: float = 0.0
    wal: dict = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)      # what keeps old bytes despite the scrub
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.gaps

    def as_dict(self) -> dict:
        return {"namespace": self.namespace, "complete": self.complete, "gaps": self.gaps,
                "waited_s": round(self.waited_s, 3), "rewrite": self.rewrite, "shadows": self.shadows,
                "keys_s": round(self.keys_s, 3), "statistics_s": round(self.statistics_s, 3), "wal": self.wal,
                "seconds": round(self.seconds, 3)}


def erase_and_scrub(settings: Settings, user: str, requested_by: str = "operator", scrub: bool = True,
                    wait_s: float = 120.0, progress: bool = False) -> dict:
    """`memstream erase user`: crypto-shredding (adapters/erasure.py), then the storage scrub."""
    from adapters.erasure import erase_user
    position = erase_user(settings, user, requested_by=requested_by)
    out = {**position.as_dict(), "user": user}
    if scrub:
        out["scrub"] = scrub_storage(settings, after=position, wait_s=wait_s, progress=progress).as_dict()
    return out


def scrub_storage(settings: Settings, after: Position | str | None = None, wait_s: float = 120.0,
                  progress: bool = False) -> ScrubReport:
    """Rewrite what held erased users' rows, then drop the WAL that recorded them (module steps).
    `after`: first wait until the projectors applied this position (or its token, as the CLI has it)."""
    began = time.monotonic()
    report = ScrubReport(settings.namespace)
    if isinstance(after, str):
        after = Position.parse(after)
    if after is not None:
        report.waited_s = wait_applied(settings, after, wait_s)
    report.rewrite = _rewrite_live(settings, progress)
    erased = _erased_users(settings)
    report.shadows = _scrub_shadows(settings, erased)
    t = time.monotonic()
    _rewrite(settings.pg_dsn(settings.pg_keys_database), [(settings.log_namespace, "user_keys")], analyze=True)
    report.keys_s = time.monotonic() - t
    t = time.monotonic()
    _analyze(settings.pg_dsn(), [(settings.namespace, table) for table in CONTENT_TABLES])
    for db in dict.fromkeys((settings.pg_database, settings.pg_keys_database)):
        try:
            _rewrite(settings.pg_dsn(db), [("pg_catalog", "pg_statistic")])
        except psycopg.errors.InsufficientPrivilege:
            report.gaps.append(f"pg_statistic of {db} not rewritten: the scrub's role is no superuser, and "
                               f"ANALYZE samples of erased rows stay there as dead tuples")
    report.statistics_s = time.monotonic() - t
    report.wal, gaps = purge_wal(settings)
    report.gaps.extend(gaps)
    report.seconds = time.monotonic() - began
    return report


class ScrubRequests:
    """The scrubs that serving processes asked for, run by the pipeline (#28: the rewrite, VACUUM
    FULL and CHECKPOINT need the database owner, which no serving process should hold).

    An erasure over HTTP files a request (adapters/erasure.py: request_scrub, as the API role
    through the owner's function) in `<ns>.scrub_requests` and answers 202. This poller runs in
    the projectors' process, which holds the owner's password anyway (the read models' DDL): every
    `interval_s` it looks for requests not done; with several projector processes, a session
    advisory lock lets one of them run at a time. Requests waiting together share one scrub (it
    waits for each erasure to be applied, then scrubs once), and each gets the report and its
    `done_at`. Durable: a request survives the API's and the projectors' restarts until done. A
    scrub that cannot run (the projectors behind, a rebuild holding the replay lock) is logged and
    tried again after `retry_s`; `memstream erase scrub` runs one by hand."""

    def __init__(self, settings: Settings, interval_s: float = 2.0, retry_s: float = 60.0, wait_s: float = 600.0):
        self.settings, self.interval_s, self.retry_s, self.wait_s = settings, interval_s, retry_s, wait_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection | None = None
        self._table = sql.Identifier(settings.namespace, "scrub_requests")

    def start(self) -> "ScrubRequests":
        self._thread = threading.Thread(target=self._loop, name="scrub-requests", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._conn is not None:
            self._conn.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.run_once()
            except Exception as exc:  # noqa: BLE001 - logged; the request stays and is tried again
                log.warning("storage scrub requested after an erasure did not run: %s; retrying in %.0f s "
                            "(or run `memstream erase scrub`)", exc, self.retry_s)
                if self._conn is not None and (self._conn.closed or self._conn.broken):
                    self._conn = None
                self._stop.wait(self.retry_s)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.settings.pg_dsn(), autocommit=True, connect_timeout=5)
        return self._conn

    def run_once(self) -> int:
        """Run the requests not done yet (one scrub for all of them); how many were done."""
        conn = self._connection()
        if not stores.table_exists(conn, self.settings.namespace, "scrub_requests"):
            return 0     # nobody asked yet
        pending = [r[0] for r in conn.execute(sql.SQL(
            "SELECT token FROM {} WHERE done_at IS NULL ORDER BY requested_at").format(self._table)).fetchall()]
        if not pending:
            return 0
        key = f"memstream-scrub:{self.settings.namespace}"
        if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
            return 0     # another projectors process is running them
        try:
            for token in pending:
                wait_applied(self.settings, Position.parse(token), self.wait_s)
            report = scrub_storage(self.settings).as_dict()
            conn.execute(sql.SQL("UPDATE {} SET done_at = now(), report = %s WHERE token = ANY(%s)").format(self._table),
                         (Jsonb(report), pending))
            (log.warning if report["gaps"] else log.info)(
                "storage scrub after %d erasure(s): %.1f s, complete=%s %s", len(pending), report["seconds"],
                report["complete"], "; ".join(report["gaps"]))
            return len(pending)
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


def scrub_report(settings: Settings, position: Position) -> dict | None:
    """The report of the pipeline's scrub after the erasure at `position`; None while not done."""
    table = sql.Identifier(settings.namespace, "scrub_requests")
    with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn:
        if not stores.table_exists(conn, settings.namespace, "scrub_requests"):
            return None
        row = conn.execute(sql.SQL("SELECT report FROM {} WHERE token = %s AND done_at IS NOT NULL").format(table),
                           (position.token(),)).fetchone()
    return row[0] if row else None


# -- 1. waiting for the erasure to be applied ---------------------------------------------------

def wait_applied(settings: Settings, position: Position, timeout: float) -> float:
    """Block until every Postgres projector reading the memory topic has stored a position past
    `position` (the user.erased event) on its partition; ScrubPending after `timeout` seconds."""
    names = [n for n, cls in PROJECTOR_TYPES.items() if not stores.is_graph(n) and "memory" in cls.topics]
    began = time.monotonic()
    behind: list[str] = names
    while True:
        with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
            if stores.table_exists(conn, settings.namespace, "projector_positions"):
                stored = dict(conn.execute(sql.SQL(
                    "SELECT projector, next_offset FROM {}.projector_positions WHERE topic = %s AND partition = %s "
                    "AND projector = ANY(%s)").format(sql.Identifier(settings.namespace)),
                    (position.topic, position.partition, names)).fetchall())
                behind = [n for n in names if stored.get(n, 0) <= position.offset]
        if not behind:
            return time.monotonic() - began
        if time.monotonic() - began >= timeout:
            raise ScrubPending(f"the projectors {', '.join(behind)} have not applied the erasure at {position.token()} "
                               f"after {timeout:.0f} s (is the pipeline running?): nothing was rewritten yet; run "
                               f"`memstream erase scrub --after {position.token()}` once they have")
        time.sleep(0.2)


# -- 2. the live tables: rewritten online ----------------------------------------------------------

def _rewrite_live(settings: Settings, progress: bool) -> dict:
    from adapters.bus import ensure_topics
    from replay.rebuild import rebuild
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        if not stores.schema_exists(conn, settings.namespace):
            return {"projections": [], "skipped": f"no read models in namespace {settings.namespace}", "swapped": False}
    ensure_topics(settings)   # the rebuild reads the log's ends (a namespace projected before any topic: none)
    try:
        r = rebuild(settings, list(CONTENT_PROJECTIONS), since=datetime.now(timezone.utc), progress=progress)
    except MemstreamError as exc:
        if "is running" in str(exc):   # an operator's rebuild holds the replay lock
            raise ScrubPending(f"{exc}; run `memstream erase scrub` after it") from None
        raise
    return {"projections": list(CONTENT_PROJECTIONS), "copied_and_replayed": r.load.records,
            "index_s": round(r.index_seconds, 3), "writers_held_s": round(r.swap_seconds, 3),
            "seconds": round(r.seconds, 3), "swapped": r.swapped}


# -- 3. other shadows of the namespace --------------------------------------------------------------

def _erased_users(settings: Settings) -> list[str]:
    with psycopg.connect(settings.pg_dsn(settings.pg_keys_database), autocommit=True) as conn:
        if not stores.table_exists(conn, settings.log_namespace, "erased_users"):
            return []
        return [r[0] for r in conn.execute(sql.SQL("SELECT user_id FROM {}.erased_users").format(
            sql.Identifier(settings.log_namespace))).fetchall()]


def _scrub_shadows(settings: Settings, erased: list[str]) -> list[dict]:
    from adapters.erasure import delete_from_shadows
    deleted = delete_from_shadows(settings, erased)     # the rows (erasure deleted its user's already)
    out = []
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        schemas = [r[0] for r in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s) ORDER BY nspname",
            (settings.namespace + "__",)).fetchall()]
        for schema in schemas:       # ... and their bytes
            t = time.monotonic()
            tables = [table for table in CONTENT_TABLES if stores.table_exists(conn, schema, table)]
            _rewrite(settings.pg_dsn(), [(schema, table) for table in tables], analyze=True)
            out.append({"schema": schema, "tables": len(tables),
                        "rows_deleted": sum(n for place, n in deleted.items() if place.startswith(schema + ".")),
                        "seconds": round(time.monotonic() - t, 3)})
    return out


# -- 4, 5. table rewrites and statistics ------------------------------------------------------------

def _rewrite(dsn: str, tables: list[tuple[str, str]], analyze: bool = False) -> None:
    """VACUUM FULL each table that exists (new files; the old ones are truncated at commit)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema, table in tables:
            if stores.table_exists(conn, schema, table):
                conn.execute(sql.SQL("VACUUM (FULL{}) {}.{}").format(
                    sql.SQL(", ANALYZE") if analyze else sql.SQL(""), sql.Identifier(schema), sql.Identifier(table)))


def _analyze(dsn: str, tables: list[tuple[str, str]]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema, table in tables:
            if stores.table_exists(conn, schema, table):
                conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table)))


# -- 6. WAL -----------------------------------------------------------------------------------------

def wal_gaps(conn: psycopg.Connection) -> list[str]:
    """Server settings under which old WAL keeps its bytes after a checkpoint."""
    gaps = []
    if conn.execute("SHOW wal_recycle").fetchone()[0] != "off":
        gaps.append("wal_recycle is on: old WAL segments are renamed for reuse with their bytes inside "
                    "(`memstream stack up` turns it off; elsewhere ALTER SYSTEM SET wal_recycle = off)")
    if conn.execute("SHOW archive_mode").fetchone()[0] != "off":
        gaps.append("archive_mode is on: archived WAL segments hold the erased rows until the archive expires")
    if conn.execute("SELECT pg_size_bytes(current_setting('wal_keep_size'))").fetchone()[0] > 0:
        gaps.append("wal_keep_size > 0: that much old WAL is kept past every checkpoint")
    slots = conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0]
    if slots:
        gaps.append(f"{slots} replication slot(s) keep the WAL their consumers have not confirmed")
    return gaps


def _segments(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' ORDER BY name").fetchall()]


def purge_wal(settings: Settings) -> tuple[dict, list[str]]:
    """Leave every WAL segment that may hold old bytes, then CHECKPOINT: with wal_recycle off, the
    segments before the new redo point are unlinked. Returns (what happened, gaps)."""
    t = time.monotonic()
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        gaps = wal_gaps(conn)
        before = _segments(conn)
        current = conn.execute("SELECT pg_walfile_name(pg_current_wal_insert_lsn())").fetchone()[0]
        # The current segment and any segment waiting ahead of it (recycled with old bytes) are
        # switched through; the one after them is created empty (zero-filled).
        switches = 1 + sum(1 for name in before if name > current)
        for _ in range(switches):
            # a switch is a no-op on a segment nothing was written to since the last one
            conn.execute("SELECT pg_logical_emit_message(false, 'memstream-scrub', '')")
            conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")
        redo = conn.execute("SELECT redo_wal_file FROM pg_control_checkpoint()").fetchone()[0]
        after = _segments(conn)
        left = [name for name in after if name < redo]
        if left:
            gaps.append(f"{len(left)} WAL segment(s) before the checkpoint's redo point are still there")
    return ({"segments_before": len(before), "segments_after": len(after), "switches": switches,
             "removed": len(set(before) - set(after)), "older_than_redo_left": len(left),
             "seconds": round(time.monotonic() - t, 3)}, gaps)
