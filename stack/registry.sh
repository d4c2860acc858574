#!/usr/bin/env bash
# Starts and stops a Schema Registry with the Confluent REST API on 127.0.0.1, for the tests and
# for trying Avro pipelines: Conduit's schema registry (built by `make setup` into
# $EOS_STATE_DIR/tools/eos-schema-registry from stack/registry/). Schemas are kept in memory:
# `down` forgets them. It serves what producers and the job use (register under a subject, get a
# schema by id, a subject's versions), not the admin API (docs/formats.md).
#   registry.sh up | down | status | env
# Environment: EOS_STATE_DIR (default ./.state), REGISTRY_PORT (default 8081), REGISTRY_DIR
# (default $EOS_STATE_DIR/registry-<port>: registry.log, registry.pid), REGISTRY_START_TIMEOUT
# (seconds, 30). `env` prints EOS_SCHEMA_REGISTRY_URL, the variable pipelines/demo.yaml reads.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
PORT="${REGISTRY_PORT:-8081}"
HOME_DIR="${REGISTRY_DIR:-$STATE/registry-$PORT}"
TIMEOUT="${REGISTRY_START_TIMEOUT:-30}"
BINARY="$STATE/tools/eos-schema-registry"
URL="http://127.0.0.1:$PORT"
PID_FILE="$HOME_DIR/registry.pid"
LOG_FILE="$HOME_DIR/registry.log"
NAME=registry
# shellcheck source=stack/daemon.sh
source "$ROOT/stack/daemon.sh"

# An unknown id gets the registry's 404 (error 40403): it serves the API. Without curl, an open port.
answers() {
  if command -v curl >/dev/null; then
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/schemas/ids/0" 2>/dev/null | grep -q '^404$'
  else
    port_open "$PORT"
  fi
}

up() {
  if running; then
    echo "registry: already running at $URL"
    return 0
  fi
  [[ -x "$BINARY" ]] || { echo "registry: no $BINARY: run 'make setup' first" >&2; exit 1; }
  daemon_port_free REGISTRY_PORT
  mkdir -p "$HOME_DIR"
  daemon_start "$BINARY" -addr "127.0.0.1:$PORT"
  echo "registry: up at $URL (schemas in memory; log in $HOME_DIR/registry.log)"
}

case "${1:-}" in
  up) up ;;
  down) daemon_stop ;;
  status) daemon_status "$URL" ;;
  env) printf 'EOS_SCHEMA_REGISTRY_URL=%s\n' "$URL" ;;
  *) echo "usage: registry.sh up|down|status|env" >&2; exit 2 ;;
esac
