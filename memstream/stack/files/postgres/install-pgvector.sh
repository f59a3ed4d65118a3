#!/usr/bin/env bash
# Installs PostgreSQL 15 and builds pgvector 0.8.x from Debian's source package.
# Debian bookworm ships postgresql-15 but no pgvector binary; trixie has pgvector's source,
# which builds against PG 15 in ~20 s. Idempotent: does nothing when `vector` is installed.
set -euo pipefail
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
if [[ -f /usr/share/postgresql/15/extension/vector.control ]] && [[ -x $PG_CONFIG ]]; then
  echo "pgvector: already installed"; exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "pgvector: installing PostgreSQL 15 + pgvector needs root (apt-get); run as root" >&2; exit 2
fi
export DEBIAN_FRONTEND=noninteractive
# 1. A deb-src line for trixie, pointing at the mirror this machine already uses.
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | grep -E '^\s*(URIs:|deb )' | grep -oE 'https?://[^ ]+/debian/?' | grep -v security | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
echo "deb-src ${mirror%/} trixie main" > /etc/apt/sources.list.d/memstream-trixie-src.list
# 2. Index and build tools. (The server itself comes from bookworm.)
apt-get update -qq
apt-get install -y -qq postgresql-15 postgresql-server-dev-15 build-essential dpkg-dev >/dev/null
# 3. Fetch only the source (no build-deps from trixie) and build it against PG 15.
work=$(mktemp -d)
( cd "$work" && apt-get source --download-only -qq pgvector >/dev/null && dpkg-source -x --no-check pgvector_*.dsc src >/dev/null \
  && cd src && make -s PG_CONFIG=$PG_CONFIG >/dev/null && make -s PG_CONFIG=$PG_CONFIG install >/dev/null )
rm -rf "$work"
echo "pgvector: installed $(grep default_version /usr/share/postgresql/15/extension/vector.control)"
