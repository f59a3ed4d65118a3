"""The key store: one AES-256 data key per user, wrapped by the current master key, in Postgres.

It is the one piece of state not derived from the log (back it up: see docs/privacy.md#the-key-store).
Deleting a user's row is erasure: every sealed field of every event of theirs becomes
unreadable, in Kafka, in backups and in any replay.

Lookups are cached per process. The store survives a Postgres outage: a lost connection is
re-opened on the next call (one immediate retry), and a call that still fails raises
`adapters.resilience.Unavailable` — a transient error the consumers wait out. A failed lookup
is never read as "no key": keys are created only when the database answered that none exists,
so an outage can neither re-key a user nor cache a user as erased.

Besides the users' data keys it holds system keys (`system_keys`; today the HMAC key that
authenticates control events, schemas/codec.py), wrapped the same way and never erased.

Erasure stays erased (steps of `erase`, each with its reason):
 1. one transaction, under a per-user advisory lock: record the user in `erased_users` (the
    registry), delete their data key, NOTIFY every process — the lock serialises erase against
    a concurrent first-key creation, so a key can never be created after (or around) an erasure;
 2. `_create` takes the same lock and refuses an erased user (kernel.errors.UserErased): an
    in-flight or later event of theirs can never re-create a key;
 3. every KeyStore in every process LISTENs on `memstream_erased` (one connection per process)
    and drops the user's cached keys when told, so no process keeps sealing or opening with a
    deleted key until a timeout; a listener that lost its connection drops every cached key
    (it may have missed a notification). The `ttl` expiry stays as a backstop only.
Readers also evict on `user.erased` events and cache misses briefly so a rebuild over an erased
user stays fast.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
import uuid
import weakref

import psycopg
import psycopg.sql
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kernel.config import Settings
from kernel.errors import InvalidEvent, UserErased
from adapters.privacy import decision_key, pgroles
from adapters.privacy.decision_key import DecisionKey
from adapters.privacy.masterkeys import MasterKeys, load_master_keys
from adapters.resilience import Unavailable

DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.user_keys (
    user_id    text PRIMARY KEY,
    kid        text NOT NULL,
    wrapped    bytea NOT NULL,
    master_kid text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- Keys of the system itself, not of any user (today: `control`, the HMAC key of control events,
-- schemas/codec.py). Never erased with a user: a user.erased must verify after their key is gone.
CREATE TABLE IF NOT EXISTS {schema}.system_keys (
    name       text PRIMARY KEY,
    kid        text NOT NULL,
    wrapped    bytea NOT NULL,
    master_kid text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- The erased-users registry: a user here never gets a data key again.
CREATE TABLE IF NOT EXISTS {schema}.erased_users (
    user_id    text PRIMARY KEY,
    erased_at  timestamptz NOT NULL DEFAULT now()
);
-- The key store's role (adapters/privacy/pgroles.py) reads and adds keys and erases a user's;
-- nothing else may (no UPDATE: re-wrapping is the owner's `memstream keys rotate`).
GRANT USAGE ON SCHEMA {schema} TO {keystore};
GRANT SELECT, INSERT, DELETE ON {schema}.user_keys TO {keystore};
GRANT SELECT, INSERT ON {schema}.system_keys, {schema}.erased_users TO {keystore};
"""

CONTROL_KEY = "control"
CHANNEL = "memstream_erased"   # NOTIFY payload: JSON [namespace schema, user]
_DDL_DONE: set[tuple[str, str]] = set()   # (key store DSN, schema) whose DDL this process ran
_DDL_LOCK = threading.Lock()


def forget_ddl(schema: str) -> None:
    """The schema was dropped (namespace drop): the next key store for it runs its DDL again."""
    with _DDL_LOCK:
        _DDL_DONE.difference_update({m for m in _DDL_DONE if m[1] == schema})


log = logging.getLogger("memstream.keystore")


class KeyStore:
    def __init__(self, settings: Settings, master: MasterKeys | None = None, ttl: float = 600.0,
                 role: str = "keystore"):
        # `ttl`: how long a user's write key is used from the cache. Erasure reaches every cache
        # through the NOTIFY listener (step 3 above), so this is only the backstop; a key kept past
        # an erasure seals what nobody can open. At 30 s the memory worker went back to Postgres
        # for every one of 1,000 active users twice a minute (3% of its samples, bench.memory_stage).
        # Data keys belong to the log: a shadow projection of another namespace's log uses that log's keys.
        self._schema = psycopg.sql.Identifier(settings.log_namespace)
        self._master = master or load_master_keys(settings)
        # The key store's own Postgres role (role "owner" for `keys rotate`, which re-wraps in place).
        self._dsn = settings.pg_dsn(settings.pg_keys_database, role=role)
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._ttl = ttl
        self._write: dict[str, tuple[float, str, AESGCM]] = {}
        self._read: dict[tuple[str, str], tuple[float, AESGCM | None]] = {}
        self._control: tuple[str, bytes] | None = None   # (kid, key): a system key is never erased
        self._settings = settings
        # The tables (and their grants) are the owner's: made over a short owner connection, once
        # per process and schema (a serving process opens key stores after its start: those open
        # no owner connection, #28).
        made = (self._dsn, settings.log_namespace)
        with _DDL_LOCK:
            if made not in _DDL_DONE:
                pgroles.run_ddl(settings, settings.pg_keys_database, psycopg.sql.SQL(DDL).format(
                    schema=self._schema, keystore=psycopg.sql.Identifier(pgroles.role_name(settings, "keystore"))))
                _DDL_DONE.add(made)
        self._namespace = settings.log_namespace
        _Listener.attach(self._dsn, self)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
        return self._conn

    def _execute(self, query, params=None, fetch: str | None = None):
        """Run one statement; on a lost connection reconnect and retry once, then raise Unavailable."""
        def run(conn):
            cur = conn.execute(query, params)
            if fetch == "one":
                return cur.fetchone()
            if fetch == "all":
                return cur.fetchall()
            return cur
        return self._retrying(run)

    def _transaction(self, work):
        """Run work(conn) in one transaction; on a lost connection reconnect and retry once (work
        must be idempotent: a lost answer may hide a commit), then raise Unavailable."""
        def run(conn):
            with conn.transaction():
                return work(conn)
        return self._retrying(run)

    def _retrying(self, work):
        """work(conn) under the lock; a lost connection is dropped and tried once more, then Unavailable."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    return work(self._connection())
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    if self._conn is not None:
                        try:
                            self._conn.close()
                        except Exception:  # noqa: BLE001 - already broken
                            pass
                    self._conn = None
                    if attempt == 2:
                        raise Unavailable(f"key store unavailable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc

    def _sql(self, text: str) -> psycopg.sql.Composed:
        return psycopg.sql.SQL(text).format(schema=self._schema)

    # -- KeyRing interface used by schemas.codec ---------------------------------------
    def key_for_write(self, user: str) -> tuple[str, AESGCM]:
        """The user's current data key, created on their first event."""
        now = time.monotonic()
        hit = self._write.get(user)
        if hit and hit[0] > now:
            return hit[1], hit[2]
        row = self._load(user)
        if row is None:
            row = self._create(user)
        kid, key = row
        aead = AESGCM(key)
        self._write[user] = (now + self._ttl, kid, aead)
        self._read[(user, kid)] = (now + 3600.0, aead)
        return kid, aead

    def key_for_read(self, user: str, kid: str) -> AESGCM | None:
        """The key that sealed an event, or None when the user was erased (the content is gone).

        A key id the store never gave this user is not an erasure: it is a record sealed with
        some other key (forged, or from another key store), so it is poison — InvalidEvent, and
        the record goes to the dead-letter topic with that reason instead of being counted as an
        erased user's event. Each user has one data key for life (only its wrapping rotates), so
        "another kid than the user's" and "no key, never erased" are both unknown key ids.
        """
        now = time.monotonic()
        hit = self._read.get((user, kid))
        if hit and hit[0] > now:
            return hit[1]
        row = self._load(user)
        if row is not None and row[0] == kid:
            aead = AESGCM(row[1])
            self._read[(user, kid)] = (now + 3600.0, aead)
            return aead
        if row is None and self.is_erased(user):
            self._read[(user, kid)] = (now + self._ttl, None)
            return None
        held = f"the user's key is {row[0]!r}" if row is not None else "the user has no key and was never erased"
        raise InvalidEvent(f"sealed with an unknown key id {kid[:64]!r} ({held}): not sealed by this key store")

    def control_key(self, kid: str | None = None) -> tuple[str, bytes] | None:
        """The system key that authenticates control events (user.erased, user.forgotten,
        memory.forgotten, decay.ticked). kid None: the current one, created on first use (for
        writers); a kid: that key, or None when the store has no such key (a forged record)."""
        if self._control is not None and (kid is None or kid == self._control[0]):
            return self._control
        row = self._load_system(CONTROL_KEY)
        if row is None and kid is None:
            row = self._create_system(CONTROL_KEY)
        if row is None:
            return None
        self._control = row
        return row if kid is None or kid == row[0] else None

    @functools.cached_property
    def _decision(self) -> DecisionKey | None:
        return decision_key.load(self._settings)

    def decision_key(self) -> DecisionKey | None:
        """The pipeline's decision key (adapters/privacy/decision_key.py), not the key store's: a
        setting or a file that only the workers need. None where this process has neither (a serving
        process: it writes no decisions, and verifies none except as-of replays of what the audit
        index holds, which its projector verified)."""
        return self._decision

    def forget_cached(self, user: str) -> None:
        # Called from the listener thread too: list() copies the keys in one step under the GIL.
        self._write.pop(user, None)
        for k in [k for k in list(self._read) if k[0] == user]:
            self._read.pop(k, None)

    def forget_all_cached(self) -> None:
        self._write.clear()
        self._read.clear()

    # -- operations ------------------------------------------------------------------------
    def erase(self, user: str) -> bool:
        """Erase the user: registry, key deleted, every process told (see the module's steps).
        Returns whether a key existed. Idempotent: a re-run after a crash finishes the job."""
        def work(conn: psycopg.Connection) -> bool:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._lock_name(user),))
            conn.execute(self._sql("INSERT INTO {schema}.erased_users (user_id) VALUES (%s) ON CONFLICT DO NOTHING"),
                         (user,))
            existed = conn.execute(self._sql("DELETE FROM {schema}.user_keys WHERE user_id = %s"), (user,)).rowcount > 0
            # Delivered at commit, to every listening process (this one included).
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, _payload(self._namespace, user)))
            return existed
        existed = self._transaction(work)
        self.forget_cached(user)
        return existed

    def has_key(self, user: str) -> bool:
        return self._load(user) is not None

    def is_erased(self, user: str) -> bool:
        return self._execute(self._sql("SELECT 1 FROM {schema}.erased_users WHERE user_id = %s"), (user,),
                             fetch="one") is not None

    def rotate_master(self) -> int:
        """Re-wrap every data key still wrapped by an older master key. Returns how many."""
        n = 0
        rows = self._execute(self._sql(
            "SELECT user_id, kid, wrapped, master_kid FROM {schema}.user_keys WHERE master_kid <> %s"),
            (self._master.current_kid,), fetch="all")
        for user, kid, wrapped, master_kid in rows:
            key = self._master.unwrap(user, kid, master_kid, bytes(wrapped))
            new_mkid, new_wrapped = self._master.wrap(user, kid, key)
            self._execute(self._sql(
                "UPDATE {schema}.user_keys SET wrapped = %s, master_kid = %s WHERE user_id = %s AND kid = %s"),
                (new_wrapped, new_mkid, user, kid))
            n += 1
        rows = self._execute(self._sql(
            "SELECT name, kid, wrapped, master_kid FROM {schema}.system_keys WHERE master_kid <> %s"),
            (self._master.current_kid,), fetch="all")
        for name, kid, wrapped, master_kid in rows:
            key = self._master.unwrap(_system_aad(name), kid, master_kid, bytes(wrapped))
            new_mkid, new_wrapped = self._master.wrap(_system_aad(name), kid, key)
            self._execute(self._sql(
                "UPDATE {schema}.system_keys SET wrapped = %s, master_kid = %s WHERE name = %s AND kid = %s"),
                (new_wrapped, new_mkid, name, kid))
            n += 1
        return n

    def close(self) -> None:
        _Listener.detach(self._dsn, self)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- storage ---------------------------------------------------------------------------
    def _load(self, user: str) -> tuple[str, bytes] | None:
        row = self._execute(self._sql(
            "SELECT kid, wrapped, master_kid FROM {schema}.user_keys WHERE user_id = %s"), (user,), fetch="one")
        if row is None:
            return None
        kid, wrapped, master_kid = row
        return kid, self._master.unwrap(user, kid, master_kid, bytes(wrapped))

    def _create(self, user: str) -> tuple[str, bytes]:
        kid = uuid.uuid4().hex[:16]
        key = os.urandom(32)
        master_kid, wrapped = self._master.wrap(user, kid, key)

        def work(conn: psycopg.Connection) -> bool:
            # 1. The user's advisory lock: an erase of this user waits for us or we wait for it,
            #    so "not erased" below stays true until our key is committed (or erase deletes it).
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._lock_name(user),))
            # 2. Never a key for an erased user (an in-flight or later event of theirs).
            if conn.execute(self._sql("SELECT 1 FROM {schema}.erased_users WHERE user_id = %s"), (user,)).fetchone():
                return False
            # 3. Two processes may race to create the first key: ON CONFLICT keeps the first, and
            #    both then read the winner back, so every event of the user uses one key. A retry
            #    after a lost answer (the commit happened) is harmless for the same reason.
            conn.execute(self._sql(
                "INSERT INTO {schema}.user_keys (user_id, kid, wrapped, master_kid) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (user_id) DO NOTHING"), (user, kid, wrapped, master_kid))
            return True
        if not self._transaction(work):
            raise UserErased(f"user {user[:200]!r} was erased: no data key is ever created for them again")
        row = self._load(user)
        if row is None:  # deleted between our commit and the read-back: an erasure came right after
            raise UserErased(f"user {user[:200]!r} was erased while their first key was being created")
        return row

    def _lock_name(self, user: str) -> str:
        return f"{self._namespace}\x1f{user}"

    def _load_system(self, name: str) -> tuple[str, bytes] | None:
        row = self._execute(self._sql(
            "SELECT kid, wrapped, master_kid FROM {schema}.system_keys WHERE name = %s"), (name,), fetch="one")
        if row is None:
            return None
        kid, wrapped, master_kid = row
        return kid, self._master.unwrap(_system_aad(name), kid, master_kid, bytes(wrapped))

    def _create_system(self, name: str) -> tuple[str, bytes]:
        # Writers in several processes may race to create it: the first insert wins, all read it back.
        kid = uuid.uuid4().hex[:16]
        master_kid, wrapped = self._master.wrap(_system_aad(name), kid, os.urandom(32))
        self._execute(self._sql(
            "INSERT INTO {schema}.system_keys (name, kid, wrapped, master_kid) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name) DO NOTHING"), (name, kid, wrapped, master_kid))
        row = self._load_system(name)
        if row is None:
            raise Unavailable(f"system key {name!r} vanished while being created; retry")
        return row


def _system_aad(name: str) -> str:
    """What a system key's wrapping is bound to: a name no user id can take (a user id has no NUL)."""
    return f"\x00system:{name}"


def _payload(namespace: str, user: str) -> str:
    import orjson
    return orjson.dumps([namespace, user]).decode()


class _Listener:
    """One LISTEN connection per process and key-store database, shared by every KeyStore there:
    a notification of an erasure drops that user's cached keys in each of them at once."""

    _by_dsn: dict[str, "_Listener"] = {}
    _guard = threading.Lock()

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.stores: weakref.WeakSet[KeyStore] = weakref.WeakSet()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="keystore-erasures", daemon=True)
        self.thread.start()

    @classmethod
    def attach(cls, dsn: str, store: KeyStore) -> None:
        with cls._guard:
            listener = cls._by_dsn.get(dsn)
            if listener is None or not listener.thread.is_alive():
                listener = cls._by_dsn[dsn] = cls(dsn)
            listener.stores.add(store)
        # Until LISTEN is in place a notification could be missed: wait (briefly) for it.
        listener.ready.wait(5.0)

    @classmethod
    def detach(cls, dsn: str, store: KeyStore) -> None:
        with cls._guard:
            listener = cls._by_dsn.get(dsn)
            if listener is not None:
                listener.stores.discard(store)

    def _run(self) -> None:
        from adapters.resilience import Throttled
        lost = Throttled(log)
        first = True
        while True:
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(CHANNEL)))
                    if not first:
                        # Reconnected: an erasure may have been announced while we were away.
                        for store in list(self.stores):
                            store.forget_all_cached()
                    first = False
                    lost.recovered("erasure listener reconnected")
                    self.ready.set()
                    while True:
                        # Wake every few seconds to see whether any key store still listens: one
                        # that has none (all closed or collected) ends, rather than reconnecting
                        # forever to a database that may be gone (a test stack, a dropped cluster).
                        for note in conn.notifies(timeout=5.0):
                            self._deliver(note)
                        if self._unused():
                            return
            except Exception as exc:  # noqa: BLE001 - the listener outlives outages; caches are dropped on return
                if self._unused():
                    return
                lost.warning("erasure listener lost its connection (%s); reconnecting every second", type(exc).__name__)
                for store in list(self.stores):
                    store.forget_all_cached()
                first = False
                time.sleep(1.0)

    def _unused(self) -> bool:
        with self._guard:
            if self.stores:
                return False
            if self._by_dsn.get(self.dsn) is self:
                del self._by_dsn[self.dsn]   # the next attach starts a new listener
            return True

    def _deliver(self, note) -> None:
        import orjson
        try:
            namespace, user = orjson.loads(note.payload)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            return
        for store in list(self.stores):
            if store._namespace == namespace:
                store.forget_cached(user)
