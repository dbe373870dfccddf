#!/usr/bin/env bash
# Makes sure a PostgreSQL server is up on 127.0.0.1:5432 with a `weft_test` database, and prints
#   export WEFT_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/weft_test
# on stdout, so that `.ci/run` can say: eval "$(bash .ci/postgres.sh)".
# Everything else goes to stderr. The machine runs PostgreSQL with trust auth on loopback.
set -euo pipefail

HOST=127.0.0.1
PORT=5432
DB=weft_test

log() { echo "postgres.sh: $*" >&2; }

if ! command -v pg_isready >/dev/null 2>&1; then
  log "PostgreSQL client tools are not installed; installing the postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
fi

ready() { pg_isready -q -h "$HOST" -p "$PORT" >/dev/null 2>&1; }

if ! ready; then
  # shellcheck disable=SC2012
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$version" ]; then
    log "no PostgreSQL cluster under /etc/postgresql"
    exit 1
  fi
  log "PostgreSQL $version is down: starting its main cluster"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
  for _ in $(seq 1 60); do
    ready && break
    sleep 0.5
  done
fi

if ! ready; then
  log "PostgreSQL is not accepting connections on $HOST:$PORT after 30 s"
  pg_isready -h "$HOST" -p "$PORT" >&2 || true
  exit 1
fi
log "PostgreSQL is accepting connections on $HOST:$PORT"

psql_admin() { psql -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PORT" -U postgres "$@"; }

exists=$(psql_admin -d postgres -tA -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")
if [ "$exists" != "1" ]; then
  log "creating database $DB"
  # A concurrent creator may win the race: that is fine as long as the database exists after.
  psql_admin -d postgres -c "CREATE DATABASE $DB" >&2 || true
  exists=$(psql_admin -d postgres -tA -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")
  if [ "$exists" != "1" ]; then
    log "could not create database $DB"
    exit 1
  fi
fi

echo "export WEFT_TEST_POSTGRES_URL=postgres://postgres@$HOST:$PORT/$DB"
