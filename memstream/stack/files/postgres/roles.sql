-- memstream's Postgres roles and grants (adapters/privacy/pgroles.py). Run by a superuser,
-- idempotent: `memstream stack up` runs it on every start (memstream/stack/postgres.py), the
-- docker-compose postgres service at its first start (compose-init.sh). psql variables: owner,
-- projector, api, keystore (role names), owner_pw, projector_pw, api_pw, keystore_pw (their
-- passwords), db (the read models' database), kdb (the key store's database).
\set ON_ERROR_STOP on
\set QUIET on

-- 0. Whoever runs this stays a superuser: the owner role cannot be the one running it (a docker
--    volume made by the earlier compose file, whose superuser is `memstream`: see docker-compose.yml).
SELECT format('DO $x$BEGIN RAISE EXCEPTION %L; END$x$', 'roles.sql: the owner role ' || current_user
              || ' is the superuser running this script; run it as another superuser') WHERE :'owner' = current_user \gexec

-- 1. Login roles, none of them a superuser. An older stack's owner was `memstream` LOGIN
--    SUPERUSER: it is demoted in place and keeps everything it owns.
SELECT format('CREATE ROLE %I', r) FROM unnest(ARRAY[:'owner', :'projector', :'api', :'keystore']) AS r
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) \gexec
SELECT format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD %L', r, pw)
  FROM (VALUES (:'owner', :'owner_pw'), (:'projector', :'projector_pw'), (:'api', :'api_pw'),
               (:'keystore', :'keystore_pw')) AS v(r, pw) \gexec

-- 2. The databases, owned by the owner role; a role connects only where it is granted to.
SELECT format('CREATE DATABASE %I OWNER %I', d, :'owner') FROM (SELECT DISTINCT unnest(ARRAY[:'db', :'kdb']) AS d) x
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = d) \gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', d, :'owner') FROM (SELECT DISTINCT unnest(ARRAY[:'db', :'kdb']) AS d) x \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', d) FROM (SELECT DISTINCT unnest(ARRAY[:'db', :'kdb']) AS d) x \gexec
SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', :'db', :'projector') \gexec
-- TEMPORARY: an as-of read replays into a shadow as the API role, and the projectors' batch staging uses temp tables
SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', :'db', :'api') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO %I, %I', :'kdb', :'keystore', :'api') \gexec

-- 3. The storage scrub (memstream/app/storage_scrub.py) as the owner, without superuser: VACUUM
--    FULL of any table, pg_statistic included, is a database owner's right (PG 15: all but the
--    shared catalogs); CHECKPOINT needs pg_checkpoint; pg_switch_wal() and pg_ls_waldir() an
--    EXECUTE grant (below, per database). WAL segments are unlinked, not recycled with their bytes.
SELECT format('GRANT pg_checkpoint TO %I', :'owner')
 WHERE NOT pg_has_role(:'owner', 'pg_checkpoint', 'MEMBER') \gexec
ALTER SYSTEM SET wal_recycle = off;
SELECT pg_reload_conf() \gset

-- 4. The read models: the projectors write, the API reads, in every schema the owner makes
--    (default privileges: a fresh namespace, a replay's `<ns>__*` shadow) and in those it made
--    before (an older stack).
\c :"db"
\set ON_ERROR_STOP on
\set QUIET on
-- the components' DDL lock (projections/pg.py, pgroles.run_ddl), held until the next \c: a GRANT
-- racing another on the same table fails with 'tuple concurrently updated'
SELECT pg_advisory_lock(hashtext('memstream-ddl')) \gset
CREATE EXTENSION IF NOT EXISTS vector;
SELECT format('GRANT EXECUTE ON FUNCTION pg_switch_wal(), pg_ls_waldir() TO %I', :'owner') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %1$I GRANT USAGE ON SCHEMAS TO %2$I, %3$I; '
              'ALTER DEFAULT PRIVILEGES FOR ROLE %1$I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %2$I; '
              'ALTER DEFAULT PRIVILEGES FOR ROLE %1$I GRANT SELECT ON TABLES TO %3$I; '
              'ALTER DEFAULT PRIVILEGES FOR ROLE %1$I GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO %2$I',
              :'owner', :'projector', :'api') \gexec
SELECT format('GRANT USAGE ON SCHEMA %1$I TO %2$I, %3$I; '
              'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %1$I TO %2$I; '
              'GRANT SELECT ON ALL TABLES IN SCHEMA %1$I TO %3$I; '
              'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %1$I TO %2$I', nspname, :'projector', :'api')
  FROM pg_namespace WHERE nspowner = (SELECT oid FROM pg_roles WHERE rolname = :'owner') \gexec

-- 5. The key store: its tables get their grants from their DDL (adapters/privacy/keystore.py,
--    apikeys.py) when a component opens them; here the same grants for the schemas made before.
\c :"kdb"
\set ON_ERROR_STOP on
\set QUIET on
SELECT pg_advisory_lock(hashtext('memstream-ddl')) \gset
SELECT format('GRANT USAGE ON SCHEMA %I TO %I, %I', nspname, :'keystore', :'api')
  FROM pg_namespace WHERE nspowner = (SELECT oid FROM pg_roles WHERE rolname = :'owner') \gexec
SELECT format('GRANT SELECT, INSERT, DELETE ON %I.user_keys TO %I', schemaname, :'keystore')
  FROM pg_tables WHERE tablename = 'user_keys' AND tableowner = :'owner' \gexec
SELECT format('GRANT SELECT, INSERT ON %I.%I TO %I', schemaname, tablename, :'keystore')
  FROM pg_tables WHERE tablename IN ('system_keys', 'erased_users') AND tableowner = :'owner' \gexec
SELECT format('GRANT SELECT ON %I.api_keys TO %I', schemaname, :'api')
  FROM pg_tables WHERE tablename = 'api_keys' AND tableowner = :'owner' \gexec
