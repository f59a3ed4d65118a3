"""The owner's narrow doors for serving processes (#28 item 2): SECURITY DEFINER functions.

An as-of read (replay/timetravel.py) replays one user's history into a throw-away schema, and an
erasure deletes the user's rows from the namespace's shadows (adapters/erasure.py). Both were done
over an owner connection from the API, MCP or console process: a serving process held the
database owner's password, which can read, rewrite or drop every read model. Instead the owner
defines three functions that do exactly these jobs and nothing else, and only the API role may
call them:

- `make_asof_shadow(live, shadow)`: creates `shadow` (it must be `<live>__asof_<10 hex>`) with an
  empty copy of each table of the live namespace (`LIKE … INCLUDING ALL`: columns, defaults,
  constraints, indexes), and lets the API role write those tables only: the as-of replay projects
  into them as the API role, which can write nothing else;
- `drop_asof_shadow(live, shadow)`: drops such a schema, and no other;
- `erase_from_shadows(live, users)`: deletes the users' rows from every shadow of the namespace
  (`<live>__…`; the erasure tombstones stay), returning rows per table;
- `request_scrub(live, token)`: files a storage scrub after the erasure at that log position in
  `<live>.scrub_requests`, which the pipeline runs as the owner (memstream/app/storage_scrub.py:
  the rewrite, VACUUM FULL and CHECKPOINT it takes are no serving process's work).

Each runs with the owner's rights, a fixed search_path, arguments checked; EXECUTE is revoked from
PUBLIC and granted to the API role. Created (CREATE OR REPLACE) with the read models' tables by
whoever runs their DDL as the owner (projections/pg.py: ensure_schema), so a new version replaces
an older one at the next start.
"""
from __future__ import annotations

from psycopg import sql

from kernel.config import Settings, pg_role_name

SCHEMA = "memstream_admin"

_DDL = r"""
CREATE SCHEMA IF NOT EXISTS memstream_admin;
REVOKE ALL ON SCHEMA memstream_admin FROM PUBLIC;

CREATE OR REPLACE FUNCTION memstream_admin.is_asof_shadow(live text, shadow text) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $f$
    SELECT length(live) > 0 AND shadow = live || '__asof_' || right(shadow, 10) AND right(shadow, 10) ~ '^[0-9a-f]{{10}}$'
$f$;

CREATE OR REPLACE FUNCTION memstream_admin.make_asof_shadow(live text, shadow text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    t text;
    n integer := 0;
BEGIN
    IF NOT memstream_admin.is_asof_shadow(live, shadow) THEN
        RAISE EXCEPTION 'make_asof_shadow: % is not an as-of shadow name of namespace %', shadow, live;
    END IF;
    IF to_regnamespace(quote_ident(live)) IS NULL THEN
        RAISE EXCEPTION 'make_asof_shadow: no namespace %', live;
    END IF;
    EXECUTE format('CREATE SCHEMA %I', shadow);
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
             WHERE s.nspname = live AND c.relkind IN ('r', 'p') ORDER BY 1 LOOP
        EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', shadow, t, live, t);
        n := n + 1;
    END LOOP;
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', shadow, {api_name});
    RETURN n;
END
$f$;

CREATE OR REPLACE FUNCTION memstream_admin.drop_asof_shadow(live text, shadow text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF NOT memstream_admin.is_asof_shadow(live, shadow) THEN
        RAISE EXCEPTION 'drop_asof_shadow: % is not an as-of shadow name of namespace %', shadow, live;
    END IF;
    EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', shadow);
END
$f$;

CREATE OR REPLACE FUNCTION memstream_admin.erase_from_shadows(live text, users text[])
RETURNS TABLE (place text, deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    s text;
    t text;
    n bigint;
BEGIN
    IF length(live) = 0 THEN
        RAISE EXCEPTION 'erase_from_shadows: no namespace';
    END IF;
    FOR s, t IN SELECT c.table_schema, c.table_name FROM information_schema.columns c
                WHERE c.column_name = 'user_id' AND starts_with(c.table_schema, live || '__')
                AND c.table_name NOT LIKE '%\_erasures' ORDER BY 1, 2 LOOP
        EXECUTE format('DELETE FROM %I.%I WHERE user_id = ANY($1)', s, t) USING users;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n > 0 THEN
            place := s || '.' || t;
            deleted := n;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$f$;

CREATE OR REPLACE FUNCTION memstream_admin.request_scrub(live text, token text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF to_regnamespace(quote_ident(live)) IS NULL THEN
        RAISE EXCEPTION 'request_scrub: no namespace %', live;
    END IF;
    IF token !~ '^[A-Za-z0-9._-]{{1,249}}:[0-9]{{1,9}}:[0-9]{{1,19}}$' THEN
        RAISE EXCEPTION 'request_scrub: % is not a log position', token;
    END IF;
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I.scrub_requests (token text PRIMARY KEY, '
                   'requested_at timestamptz NOT NULL DEFAULT now(), done_at timestamptz, report jsonb)', live);
    EXECUTE format('INSERT INTO %I.scrub_requests (token) VALUES ($1) ON CONFLICT DO NOTHING', live) USING token;
END
$f$;

REVOKE ALL ON FUNCTION memstream_admin.make_asof_shadow(text, text), memstream_admin.drop_asof_shadow(text, text),
    memstream_admin.erase_from_shadows(text, text[]), memstream_admin.request_scrub(text, text) FROM PUBLIC;
GRANT USAGE ON SCHEMA memstream_admin TO {api};
GRANT EXECUTE ON FUNCTION memstream_admin.is_asof_shadow(text, text), memstream_admin.make_asof_shadow(text, text),
    memstream_admin.drop_asof_shadow(text, text), memstream_admin.erase_from_shadows(text, text[]),
    memstream_admin.request_scrub(text, text) TO {api};
"""


def ddl(settings: Settings) -> sql.Composed:
    """The functions' DDL for this stack's role names (run as the owner, under the DDL lock)."""
    api = pg_role_name(settings, "api")
    return sql.SQL(_DDL).format(api=sql.Identifier(api), api_name=sql.Literal(api))  # type: ignore[arg-type]


def make_asof_shadow(conn, live: str, shadow: str) -> int:
    return conn.execute("SELECT memstream_admin.make_asof_shadow(%s, %s)", (live, shadow)).fetchone()[0]


def drop_asof_shadow(conn, live: str, shadow: str) -> None:
    conn.execute("SELECT memstream_admin.drop_asof_shadow(%s, %s)", (live, shadow))


def request_scrub(conn, live: str, token: str) -> None:
    conn.execute("SELECT memstream_admin.request_scrub(%s, %s)", (live, token))


def erase_from_shadows(conn, live: str, users: list[str]) -> dict[str, int]:
    return {place: n for place, n in conn.execute("SELECT place, deleted FROM memstream_admin.erase_from_shadows(%s, %s)",
                                                  (live, users)).fetchall()}
