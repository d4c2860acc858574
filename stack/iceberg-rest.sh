#!/usr/bin/env bash
# Starts and stops an Iceberg REST catalog on 127.0.0.1 for the tests and for trying
# output.catalog.type rest: Iceberg's own REST request handling over a JDBC catalog on a SQLite file
# (jvm/iceberg-rest, fetched and built by `make setup` into $EOS_STATE_DIR/jars/iceberg-rest), its
# warehouse a local folder. It authenticates: an OAuth2 client-credentials token for the one client
# id and secret below, or the static bearer token below; anything else gets 401.
#   iceberg-rest.sh up | down | status | env
# Environment: EOS_STATE_DIR (default ./.state), REST_PORT (default 8181), REST_DIR (default
# $EOS_STATE_DIR/iceberg-rest-<port>: catalog.db, warehouse/, rest.log, rest.pid), REST_CLIENT_ID,
# REST_CLIENT_SECRET and REST_TOKEN (the only credentials it accepts; defaults are fixed local test
# values), REST_START_TIMEOUT (seconds, 30). `env` prints an AIRFLOW_CONN_ line for the catalog.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
PORT="${REST_PORT:-8181}"
HOME_DIR="${REST_DIR:-$STATE/iceberg-rest-$PORT}"
CLIENT_ID="${REST_CLIENT_ID:-eos-ingest-local}"
CLIENT_SECRET="${REST_CLIENT_SECRET:-eos-ingest-local-secret}"
TOKEN="${REST_TOKEN:-eos-ingest-local-token}"
TIMEOUT="${REST_START_TIMEOUT:-30}"
ENDPOINT="http://127.0.0.1:$PORT"
PID_FILE="$HOME_DIR/rest.pid"
LOG_FILE="$HOME_DIR/rest.log"
NAME=iceberg-rest
# shellcheck source=stack/daemon.sh
source "$ROOT/stack/daemon.sh"

# Any HTTP answer (a request without a token gets 401) means it serves requests.
answers() {
  if command -v curl >/dev/null; then
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$ENDPOINT/v1/config" 2>/dev/null | grep -q '^[1-5]'
  else
    port_open "$PORT"
  fi
}

up() {
  if running; then
    echo "iceberg-rest: already running at $ENDPOINT (warehouse $HOME_DIR/warehouse)"
    return 0
  fi
  local jars="$STATE/jars/iceberg-rest"
  [[ -f "$jars/eos-iceberg-rest.jar" ]] || {
    echo "iceberg-rest: no eos-iceberg-rest.jar in $jars: run 'make setup' first" >&2; exit 1; }
  daemon_port_free REST_PORT
  mkdir -p "$HOME_DIR/warehouse"
  # The credentials reach the server in its environment, never on its command line.
  EOS_REST_PORT="$PORT" EOS_REST_CATALOG_DB="$HOME_DIR/catalog.db" EOS_REST_WAREHOUSE="$HOME_DIR/warehouse" \
    EOS_REST_CLIENT_ID="$CLIENT_ID" EOS_REST_CLIENT_SECRET="$CLIENT_SECRET" EOS_REST_TOKEN="$TOKEN" \
    daemon_start java -Xmx256m -XX:TieredStopAtLevel=1 -cp "$jars/*" eos.ingest.rest.RestCatalogServer
  echo "iceberg-rest: up at $ENDPOINT (warehouse $HOME_DIR/warehouse; '$0 env' prints its connection)"
}

case "${1:-}" in
  up) up ;;
  down) daemon_stop ;;
  status) daemon_status "$ENDPOINT" ;;
  env)
    # An Airflow connection (URI form) for output.catalog.conn_id: the client id and secret as its
    # login and password (OAuth2 client credentials).
    printf 'AIRFLOW_CONN_ICEBERG_REST=http://%s:%s@127.0.0.1:%s\n' "$CLIENT_ID" "$CLIENT_SECRET" "$PORT"
    ;;
  *) echo "usage: iceberg-rest.sh up|down|status|env" >&2; exit 2 ;;
esac
