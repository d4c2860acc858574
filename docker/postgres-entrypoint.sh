#!/bin/bash
# The entry point of docker/postgres.Dockerfile, run as the postgres user.
#   first start (no $PGDATA/PG_VERSION): initdb, superuser $POSTGRES_USER with the password in
#   $POSTGRES_PASSWORD_FILE; then, against a server listening on its socket only (so a healthcheck
#   over TCP stays red meanwhile), every /docker-entrypoint-initdb.d/*.sql (psql, stop at the first
#   error) and *.sh (sourced), in name order; the database is marked initialised only when all ran.
#   every start: `postgres` in the foreground, listening on all interfaces, password logins (scram)
#   from the network, peer logins on the socket.
set -euo pipefail
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=postgres}"
: "${POSTGRES_PASSWORD_FILE:?set POSTGRES_PASSWORD_FILE to a file holding the superuser password}"
DONE="$PGDATA/.eos-initialised"

if [[ -s "$PGDATA/PG_VERSION" && ! -f "$DONE" ]]; then
  echo "postgres-entrypoint: $PGDATA holds a half-initialised cluster (an earlier first start failed); remove the volume (docker compose down -v)" >&2
  exit 1
fi
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$POSTGRES_PASSWORD_FILE" \
    --auth-local=peer --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  for script in /docker-entrypoint-initdb.d/*; do
    case "$script" in
      *.sql) echo "postgres-entrypoint: running $script"
             psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" -f "$script" ;;
      *.sh)  echo "postgres-entrypoint: sourcing $script"
             # shellcheck disable=SC1090
             . "$script" ;;
      *)     [[ -e "$script" ]] && echo "postgres-entrypoint: ignoring $script" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
  touch "$DONE"
  echo "postgres-entrypoint: initialised $PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
