"""API keys: created for a tenant with scopes (and optionally one end user), stored hashed, verified fast.

A key reads `msk_<key id>_<secret>`. The secret is 32 random bytes, shown once at creation and
stored only as SHA-256(key id, secret): a random 256-bit secret needs no slow password hash, and a
copy of the table lets nobody call the API. Keys live in the key-store database (state not derived
from the log, backed up with it), table `<namespace>.api_keys`.

Verification caches a verified key in-process for MEMSTREAM_API_KEY_CACHE_S seconds (default 5),
so a recall pays a dictionary lookup, not a database round trip. The price: a revoked key keeps
working for at most that long in a process that verified it just before. Unknown keys are cached
(as unknown) for the same time, so a flood of bad keys does not become a flood of queries. Both
caches are bounded, and apart: a flood of random keys evicts only the oldest unknown ones, never a
verified key (#28: emptying every entry at the bound made each legitimate caller query again).

`memstream stack up` creates a local admin key (tenant `default`, every scope) into
<stack_dir>/secrets/api.key (mode 0600, never printed); the CLI, the demo, the HTTP SDK and the
tests use it unless MEMSTREAM_API_KEY is set.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections import OrderedDict

import psycopg
import psycopg.sql

from kernel.config import Settings
from adapters.privacy import pgroles
from adapters.privacy.tenants import (DEFAULT_TENANT, SCOPES, Principal, check_scopes, check_tenant, internal_user,
                                       local_key_file)
from adapters.resilience import Unavailable

PREFIX = "msk"
CACHE_MAX = 10_000      # verified keys held (the oldest-expiring beyond it go first)
MISSES_MAX = 10_000     # unknown keys held, least recently seen evicted first

DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.api_keys (
    key_id      text PRIMARY KEY,
    secret_hash bytea NOT NULL,
    tenant      text NOT NULL,
    scopes      text[] NOT NULL,
    end_user    text,
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
-- The API's role (adapters/privacy/pgroles.py) verifies keys; creating and revoking them is the
-- operator's (`memstream keys`, `stack up`: the owner role).
GRANT USAGE ON SCHEMA {schema} TO {api};
GRANT SELECT ON {schema}.api_keys TO {api};
"""


def _hash(key_id: str, secret: str) -> bytes:
    return hashlib.sha256(f"{key_id}:{secret}".encode()).digest()


def _parse(token: str) -> tuple[str, str] | None:
    prefix, _, rest = token.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not key_id or not secret or len(token) > 200:
        return None
    if not (token.isascii() and token.isprintable()):   # keys are hex and URL-safe base64: a NUL is no key
        return None                                     # (and would reach Postgres, which refuses it in text)
    return key_id, secret


class ApiKeys:
    def __init__(self, settings: Settings, cache_s: float | None = None, role: str = "api"):
        """role: the Postgres role (adapters/privacy/pgroles.py): `api` only verifies keys (the
        API, MCP, console); `owner` also creates and revokes them (the CLI, `stack up`)."""
        self._schema = psycopg.sql.Identifier(settings.namespace)
        self._dsn = settings.pg_dsn(settings.pg_keys_database, role=role)
        self._cache_s = settings.api_key_cache_s if cache_s is None else cache_s
        self._cache: dict[bytes, tuple[float, Principal]] = {}
        self._misses: OrderedDict[bytes, float] = OrderedDict()
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._cache_lock = threading.Lock()   # verifications run on worker threads
        pgroles.run_ddl(settings, settings.pg_keys_database, psycopg.sql.SQL(DDL).format(
            schema=self._schema, api=psycopg.sql.Identifier(pgroles.role_name(settings, "api"))))

    # -- storage ------------------------------------------------------------------------------
    def _execute(self, text: str, params=None, fetch: str | None = None):
        """One statement; a lost connection is re-opened once, then Unavailable (a 503, never a 401)."""
        query = psycopg.sql.SQL(text).format(schema=self._schema)
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
                    cur = self._conn.execute(query, params)
                    return cur.fetchone() if fetch == "one" else cur.fetchall() if fetch == "all" else cur
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    self._conn = None
                    if attempt == 2:
                        raise Unavailable("API key store unavailable") from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- operations -----------------------------------------------------------------------------
    def create(self, tenant: str, scopes, user: str | None = None, name: str = "") -> tuple[dict, str]:
        """A new key: (its description, the key itself — shown once, stored only hashed)."""
        check_tenant(tenant)
        scopes = check_scopes(scopes)
        if user is not None:
            internal_user(tenant, user)         # the same id rules as the HTTP edge
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        self._execute("INSERT INTO {schema}.api_keys (key_id, secret_hash, tenant, scopes, end_user, name) "
                      "VALUES (%s, %s, %s, %s, %s, %s)", (key_id, _hash(key_id, secret), tenant, list(scopes), user, name))
        info = {"key_id": key_id, "tenant": tenant, "scopes": list(scopes), "user": user, "name": name}
        return info, f"{PREFIX}_{key_id}_{secret}"

    def list(self, tenant: str | None = None) -> list[dict]:
        rows = self._execute("SELECT key_id, tenant, scopes, end_user, name, created_at, revoked_at FROM {schema}.api_keys "
                             "WHERE %s::text IS NULL OR tenant = %s ORDER BY created_at, key_id", (tenant, tenant), fetch="all")
        return [{"key_id": r[0], "tenant": r[1], "scopes": list(r[2]), "user": r[3], "name": r[4],
                 "created_at": r[5].isoformat(), "revoked_at": r[6].isoformat() if r[6] else None} for r in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key: refused by every API process within MEMSTREAM_API_KEY_CACHE_S seconds."""
        cur = self._execute("UPDATE {schema}.api_keys SET revoked_at = now() WHERE key_id = %s AND revoked_at IS NULL",
                            (key_id,))
        self._cache.clear()                   # this process at once
        self._misses.clear()
        return cur.rowcount > 0

    # -- verification ---------------------------------------------------------------------------
    def cached(self, token: str) -> tuple[bool, Principal | None]:
        """(known, principal) from the in-process cache alone: no I/O, safe on an event loop."""
        digest, now = hashlib.sha256(token.encode()).digest(), time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            return True, hit[1]
        missed = self._misses.get(digest)
        return (True, None) if missed is not None and missed > now else (False, None)

    def was_valid(self, token: str) -> bool:
        """Whether this process verified the key as valid before (its cache entry may have expired,
        until evicted): a re-check of a key in use, which no limit on unknown keys should hold back."""
        return hashlib.sha256(token.encode()).digest() in self._cache

    def verify(self, token: str) -> Principal | None:
        """The key's principal, or None for an unknown, malformed or revoked key."""
        known, principal = self.cached(token)
        if known:
            return principal
        principal = self._lookup(token)
        self._remember(hashlib.sha256(token.encode()).digest(), principal)
        return principal

    def _remember(self, digest: bytes, principal: Principal | None) -> None:
        with self._cache_lock:
            self._remember_locked(digest, principal)

    def _remember_locked(self, digest: bytes, principal: Principal | None) -> None:
        until = time.monotonic() + self._cache_s
        if principal is None:
            self._misses[digest] = until
            self._misses.move_to_end(digest)
            while len(self._misses) > MISSES_MAX:
                self._misses.popitem(last=False)
            return
        if len(self._cache) >= CACHE_MAX and digest not in self._cache:
            now = time.monotonic()
            for d in [d for d, (t, _) in self._cache.items() if t <= now]:
                del self._cache[d]
            while len(self._cache) >= CACHE_MAX:
                del self._cache[min(self._cache, key=lambda d: self._cache[d][0])]
        self._cache[digest] = (until, principal)

    def _lookup(self, token: str) -> Principal | None:
        parsed = _parse(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        row = self._execute("SELECT secret_hash, tenant, scopes, end_user, name FROM {schema}.api_keys "
                            "WHERE key_id = %s AND revoked_at IS NULL", (key_id,), fetch="one")
        if row is None or not hmac.compare_digest(bytes(row[0]), _hash(key_id, secret)):
            return None
        return Principal(key_id, row[1], frozenset(row[2]), row[3], row[4])


# -- the local admin key ------------------------------------------------------------------------

def ensure_local_admin_key(settings: Settings) -> str:
    """Create the local admin key (tenant default, every scope) unless a valid one is on file.

    Written to a 0600 temporary file and renamed into place: never readable by others, never
    half-written. Returns a status word, never the key.
    """
    path = local_key_file(settings)
    store = ApiKeys(settings, cache_s=0, role="owner")
    try:
        existing = path.read_text().strip() if path.exists() else ""
        if existing and store.verify(existing) is not None:
            return f"present ({path})"
        _, token = store.create(DEFAULT_TENANT, SCOPES, name="local-admin (stack up)")
    finally:
        store.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return f"{'replaced' if existing else 'created'} ({path})"
