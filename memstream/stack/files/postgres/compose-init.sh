#!/usr/bin/env bash
# docker-compose.yml's postgres service: memstream's roles and grants, the same script `memstream
# stack up` runs (roles.sql, mounted at /memstream/roles.sql). The image runs this once, on the
# first start with an empty volume; it is idempotent, so `docker compose exec -u postgres postgres
# /docker-entrypoint-initdb.d/10-memstream.sh` re-applies it (changed passwords, an older volume).
# Passwords come from the same variables the memstream processes read.
set -eo pipefail
: "${MEMSTREAM_PG_PASSWORD:?}" "${MEMSTREAM_PG_PROJECTOR_PASSWORD:?}" "${MEMSTREAM_PG_API_PASSWORD:?}" \
  "${MEMSTREAM_PG_KEYSTORE_PASSWORD:?}"
owner="${MEMSTREAM_PG_USER:-memstream}"
# The passwords reach psql through its environment (\getenv), never its argv (`ps`).
{ printf '%s\n' '\getenv owner_pw MEMSTREAM_PG_PASSWORD' '\getenv projector_pw MEMSTREAM_PG_PROJECTOR_PASSWORD' \
    '\getenv api_pw MEMSTREAM_PG_API_PASSWORD' '\getenv keystore_pw MEMSTREAM_PG_KEYSTORE_PASSWORD'
  cat "${MEMSTREAM_ROLES_SQL:-/memstream/roles.sql}"; } |
psql -X -q -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v owner="$owner" -v projector="${owner}_projector" -v api="${owner}_api" -v keystore="${owner}_keystore" \
  -v db="${MEMSTREAM_PG_DATABASE:-memstream}" -v kdb="${MEMSTREAM_PG_KEYS_DATABASE:-memstream_keys}" -f -
# The image's superuser is for this script and the health check, over the socket inside the
# container: refused over TCP (its password is a random one nobody knows anyway).
hba="${PGDATA:-/var/lib/postgresql/data}/pg_hba.conf"
if ! grep -q '# memstream: no superuser over TCP$' "$hba"; then
  { echo "host all ${POSTGRES_USER:-postgres} all reject # memstream: no superuser over TCP"; cat "$hba"; } > "$hba.new"
  mv "$hba.new" "$hba"
  psql -X -q --username "${POSTGRES_USER:-postgres}" --dbname postgres -c "SELECT pg_reload_conf()" > /dev/null
fi
