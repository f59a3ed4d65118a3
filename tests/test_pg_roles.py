"""Postgres roles per component (adapters/privacy/pgroles.py, memstream/stack/files/postgres/roles.sql):
no role is a superuser at run time; the API reads the read models and verifies API keys, and can
neither touch the key store's keys nor write the read models; the projectors write the read models
and cannot reach the key store; the key store cannot reach the read models; the owner runs the
storage scrub without superuser."""
from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest
from psycopg import sql

from adapters.privacy import pgroles
from projections import pg

pytestmark = [pytest.mark.stack, pytest.mark.timeout(120)]


def connect(settings, role: str, keys_db: bool = False) -> psycopg.Connection:
    db = settings.pg_keys_database if keys_db else settings.pg_database
    return psycopg.connect(settings.pg_dsn(db, role=role), autocommit=True, connect_timeout=5)


def denied(conn: psycopg.Connection, statement: str, *params) -> str:
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
        conn.execute(statement, params or None)
    assert "permission denied" in str(err.value) or "must be owner" in str(err.value)
    return str(err.value)


def q(settings, text: str, schema: str | None = None) -> sql.Composed:
    return sql.SQL(text).format(s=sql.Identifier(schema or settings.namespace))


def test_no_role_is_a_superuser(settings):
    names = [pgroles.role_name(settings, r) for r in pgroles.ROLES]
    assert len(set(names)) == 4
    with connect(settings, "owner") as conn:
        rows = dict(conn.execute("SELECT rolname, rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls "
                                 "FROM pg_roles WHERE rolname = ANY(%s)", (names,)).fetchall())
        assert rows == {n: False for n in names}
    for role in pgroles.ROLES:              # each logs in with its own password, as itself
        with connect(settings, role, keys_db=role == "keystore") as conn:
            assert conn.execute("SELECT current_user, usesuper FROM pg_user WHERE usename = current_user").fetchone() \
                == (pgroles.role_name(settings, role), False)


def test_the_api_role_cannot_touch_the_key_store_or_write_the_read_models(settings, keys):
    keys.key_for_write("pg-roles-user")     # a key exists to be denied
    with connect(settings, "api", keys_db=True) as conn:
        denied(conn, q(settings, "SELECT wrapped FROM {s}.user_keys"))
        denied(conn, q(settings, "DELETE FROM {s}.user_keys"))
        denied(conn, q(settings, "UPDATE {s}.user_keys SET wrapped = ''::bytea"))
        denied(conn, q(settings, "INSERT INTO {s}.user_keys (user_id, kid, wrapped, master_kid) VALUES ('x', 'k', '', 'm')"))
        denied(conn, q(settings, "SELECT * FROM {s}.system_keys"))
        denied(conn, q(settings, "DELETE FROM {s}.erased_users"))
        denied(conn, q(settings, "TRUNCATE {s}.user_keys"))
        # what it needs: verify API keys (read only: creating and revoking is the operator's)
        conn.execute(q(settings, "SELECT count(*) FROM {s}.api_keys")).fetchone()
        denied(conn, q(settings, "UPDATE {s}.api_keys SET revoked_at = now()"))
        denied(conn, q(settings, "INSERT INTO {s}.api_keys (key_id, secret_hash, tenant, scopes) VALUES ('x', '', 't', '{{}}')"))
    with connect(settings, "api") as conn:
        for table in ("memory_items", "preferences", "projector_positions", "session_messages", "task_buffer_steps"):
            if conn.execute("SELECT to_regclass(%s)", (f'"{settings.namespace}".{table}',)).fetchone()[0]:
                conn.execute(q(settings, "SELECT count(*) FROM {s}." + table)).fetchone()
        denied(conn, q(settings, "DELETE FROM {s}.memory_items"))
        denied(conn, q(settings, "UPDATE {s}.preferences SET value = 'x'"))
        denied(conn, q(settings, "INSERT INTO {s}.projector_positions VALUES ('p', 't', 0, 1)"))
        denied(conn, q(settings, "TRUNCATE {s}.memory_items"))
        denied(conn, q(settings, "CREATE TABLE {s}.api_made (x int)"))
        denied(conn, "CREATE SCHEMA api_made")


def test_the_projector_role_writes_the_read_models_and_cannot_reach_the_key_store(settings):
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect(settings, "projector", keys_db=True)
    with connect(settings, "projector") as conn, conn.transaction(force_rollback=True):
        conn.execute(q(settings, "INSERT INTO {s}.projector_positions VALUES ('pg-roles', 't', 0, 1)"))
        conn.execute(q(settings, "DELETE FROM {s}.projector_positions WHERE projector = 'pg-roles'"))
    with connect(settings, "projector") as conn:
        denied(conn, q(settings, "DROP TABLE {s}.projector_positions"))
        denied(conn, q(settings, "CREATE TABLE {s}.projector_made (x int)"))


def test_the_key_store_role_cannot_reach_the_read_models_nor_rewrite_keys(settings, keys):
    keys.key_for_write("pg-roles-user")
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect(settings, "keystore")
    with connect(settings, "keystore", keys_db=True) as conn:
        assert conn.execute(q(settings, "SELECT count(*) FROM {s}.user_keys")).fetchone()[0] >= 1
        denied(conn, q(settings, "UPDATE {s}.user_keys SET wrapped = wrapped"))   # re-wrapping: the owner's
        denied(conn, q(settings, "TRUNCATE {s}.user_keys"))
        denied(conn, q(settings, "DELETE FROM {s}.erased_users"))                  # erasure stays erased
        denied(conn, q(settings, "SELECT * FROM {s}.api_keys"))


def test_tables_made_later_get_the_grants(settings):
    """A fresh schema the owner makes (a test namespace, a replay's `<ns>__*` shadow) is readable by
    the API and writable by the projectors at once: the owner's default privileges."""
    shadow = settings.model_copy(update={"namespace": settings.namespace + "__pgroles"})
    pg.ensure_schema(shadow)
    try:
        with connect(settings, "projector") as conn, conn.transaction(force_rollback=True):
            conn.execute(q(settings, "INSERT INTO {s}.projector_positions VALUES ('pg-roles', 't', 0, 1)", shadow.namespace))
        with connect(settings, "api") as conn:
            assert conn.execute(q(settings, "SELECT count(*) FROM {s}.memory_items", shadow.namespace)).fetchone() == (0,)
            denied(conn, q(settings, "DELETE FROM {s}.memory_items", shadow.namespace))
    finally:
        with connect(settings, "owner") as conn:
            conn.execute(q(settings, "DROP SCHEMA {s} CASCADE", shadow.namespace))


def test_the_owner_runs_the_storage_scrub_without_superuser(settings, keys):
    """Each step the scrub takes beyond its own tables: VACUUM FULL of the key store's table and of
    pg_statistic in both databases (a database owner's right), CHECKPOINT (pg_checkpoint),
    pg_switch_wal() and pg_ls_waldir() (granted), pg_control_checkpoint(), the WAL gap checks."""
    from memstream.app.storage_scrub import _rewrite, purge_wal
    keys.key_for_write("pg-roles-user")
    _rewrite(settings.pg_dsn(settings.pg_keys_database), [(settings.log_namespace, "user_keys")], analyze=True)
    for db in (settings.pg_database, settings.pg_keys_database):
        _rewrite(settings.pg_dsn(db), [("pg_catalog", "pg_statistic")])
    wal, gaps = purge_wal(settings)
    assert gaps == [] and wal["switches"] >= 1


def test_passwords_are_files_of_their_own_and_never_shown(settings):
    from kernel.config import Settings
    for role in pgroles.ROLES:
        path = pgroles.password_file(settings, role)
        assert path.stat().st_mode & 0o777 == 0o600
        assert len(path.read_text().strip()) >= 32
    assert len({pgroles.password(settings, r) for r in pgroles.ROLES}) == 4
    shown = subprocess.run([sys.executable, "-m", "memstream.app.cli", "config"], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    for role in pgroles.ROLES:
        assert pgroles.password(settings, role) not in shown.stdout + shown.stderr
    # a setting wins over the file (a deployment's secret manager)
    s = Settings(pg_api_password="from-env")
    assert "password='from-env'" in s.pg_dsn(role="api") and "user='memstream_api'" in s.pg_dsn(role="api")
    json.dumps(settings.masked(), default=str)   # masked() still serialises with the new settings
