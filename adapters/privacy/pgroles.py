"""Postgres roles per component: each connection logs in with only the rights its component needs.

Roles (names derive from MEMSTREAM_PG_USER, default `memstream`):

  owner      `memstream`            owns both databases, their schemas and tables: runs the DDL
                                     (every `ensure_*`), replay rebuilds and shadows, erasure's row
                                     deletes, the storage scrub, the operator's CLI (API keys, key
                                     rotation). No superuser: the scrub's VACUUM FULL of pg_statistic
                                     is a database owner's right; CHECKPOINT comes from pg_checkpoint,
                                     pg_switch_wal() and pg_ls_waldir() from an EXECUTE grant.
  projector  `memstream_projector`  the read models: SELECT/INSERT/UPDATE/DELETE on the tables of the
                                     read-model database (positions included) and TEMPORARY (batch
                                     staging); cannot connect to the key-store database.
  api        `memstream_api`        the query side (API, MCP, console): SELECT on the read models,
                                     SELECT on `<ns>.api_keys`; nothing else in the key store (its
                                     user_keys, system_keys, erased_users are denied).
  keystore   `memstream_keystore`   the key store (adapters/privacy/keystore.py) in every process
                                     that seals or opens: SELECT/INSERT/DELETE on user_keys,
                                     SELECT/INSERT on system_keys and erased_users; cannot connect to
                                     the read-model database.

Runtime grants come from two places: `stack up` (memstream/stack/files/postgres/roles.sql, also
the docker-compose init script) sets the roles, database grants and the owner's default privileges
in the read-model database (so every table the owner creates later — a test's fresh namespace, a
replay's `<ns>__*` shadow — is readable by the API and writable by the projectors); the key
store's tables get their grants from their own DDL (keystore.py, apikeys.py), run as the owner.

Passwords: MEMSTREAM_PG_PASSWORD (owner), MEMSTREAM_PG_PROJECTOR_PASSWORD, _API_PASSWORD,
_KEYSTORE_PASSWORD; each one unset is read from <stack_dir>/secrets/pg-<role>.password, created
by `stack up` (0600, random, never logged).
"""
from __future__ import annotations

import secrets


from kernel.config import PG_ROLES as ROLES
from adapters.secret_files import write_new_secret
from kernel.config import pg_password as password
from kernel.config import pg_password_file as password_file
from kernel.config import pg_role_name as role_name

__all__ = ["ROLES", "role_name", "password_file", "password", "ensure_passwords", "psql_variables", "run_ddl"]


def ensure_passwords(settings) -> str:
    """Create a random password file for each role whose setting is unset and that has none yet.

    O_EXCL + 0600 at creation (as master.keys): never readable by others, never written twice by
    concurrent `up`s. Returns a status line, never a password."""
    made = []
    for role in ROLES:
        if (settings.pg_password if role == "owner" else getattr(settings, f"pg_{role}_password")) is not None:
            continue
        if write_new_secret(password_file(settings, role), secrets.token_urlsafe(32) + "\n"):
            made.append(role)
    return f"created ({', '.join(made)})" if made else "present"


def psql_variables(settings) -> dict[str, str]:
    """The variables of roles.sql: role names, their passwords, the two databases."""
    out: dict[str, str] = {}
    for role in ROLES:
        out[role] = role_name(settings, role)
        out[f"{role}_pw"] = password(settings, role)
    out["db"] = settings.pg_database
    out["kdb"] = settings.pg_keys_database
    return out


def run_ddl(settings, database: str, ddl) -> None:
    """Run DDL (and its grants) as the owner, in one transaction under the database's DDL lock:
    components opening their tables at once must not race (two GRANTs on one table at the same
    moment fail with 'tuple concurrently updated'). A lost server is Unavailable, as elsewhere."""
    import psycopg

    from adapters.resilience import Unavailable
    try:
        with psycopg.connect(settings.pg_dsn(database), connect_timeout=5) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('memstream-ddl'))")
            conn.execute(ddl)
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise Unavailable(f"Postgres unavailable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
