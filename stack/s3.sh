#!/usr/bin/env bash
# Starts and stops an S3 API server on 127.0.0.1 for the tests and for trying s3a:// tables:
# s3proxy (fetched by `make setup` into $EOS_STATE_DIR/jars/s3proxy) with jclouds' filesystem
# provider, so buckets are folders under S3_DIR. It takes SigV4 (and V2) requests. It does NOT
# honour If-None-Match, like many S3-compatible stores: see docs/object-storage.md.
#   s3.sh up | down | status | env
# Environment: EOS_STATE_DIR (default ./.state), S3_PORT (default 9090), S3_DIR (default
# $EOS_STATE_DIR/s3-<port>: data/, s3proxy.properties, s3.log, s3.pid), S3_ACCESS_KEY and
# S3_SECRET_KEY (the only identity it accepts; defaults are fixed local test values),
# S3_START_TIMEOUT (seconds, 30). `env` prints the AWS_* variables that reach it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
PORT="${S3_PORT:-9090}"
HOME_DIR="${S3_DIR:-$STATE/s3-$PORT}"
ACCESS_KEY="${S3_ACCESS_KEY:-eos-ingest-local}"
SECRET_KEY="${S3_SECRET_KEY:-eos-ingest-local-secret}"
TIMEOUT="${S3_START_TIMEOUT:-30}"
ENDPOINT="http://127.0.0.1:$PORT"
PID_FILE="$HOME_DIR/s3.pid"
LOG_FILE="$HOME_DIR/s3.log"
NAME=s3
# shellcheck source=stack/daemon.sh
source "$ROOT/stack/daemon.sh"

# Any HTTP answer (an anonymous request gets 403) means it serves requests; without curl, an open port.
answers() {
  if command -v curl >/dev/null; then
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$ENDPOINT/" 2>/dev/null | grep -q '^[1-5]'
  else
    port_open "$PORT"
  fi
}

up() {
  if running; then
    echo "s3: already running at $ENDPOINT (data in $HOME_DIR/data)"
    return 0
  fi
  local jar
  jar="$(ls "$STATE"/jars/s3proxy/s3proxy-*-jar-with-dependencies.jar 2>/dev/null | head -1 || true)"
  [[ -n "$jar" ]] || { echo "s3: no s3proxy jar in $STATE/jars/s3proxy: run 'make setup' first" >&2; exit 1; }
  daemon_port_free S3_PORT
  mkdir -p "$HOME_DIR/data"
  # The secret goes into a file only its owner reads, never onto the command line.
  (umask 077 && cat >"$HOME_DIR/s3proxy.properties" <<PROPS
s3proxy.endpoint=$ENDPOINT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$ACCESS_KEY
s3proxy.credential=$SECRET_KEY
jclouds.provider=filesystem
jclouds.filesystem.basedir=$HOME_DIR/data
PROPS
  )
  daemon_start java -Xmx256m -jar "$jar" --properties "$HOME_DIR/s3proxy.properties"
  echo "s3: up at $ENDPOINT (data in $HOME_DIR/data; '$0 env' prints the AWS_* variables)"
}

case "${1:-}" in
  up) up ;;
  down) daemon_stop ;;
  status) daemon_status "$ENDPOINT" ;;
  env)
    # The last: s3proxy refuses (501) the x-amz-checksum-mode header newer AWS SDKs send on GetObject
    # (pyarrow's, which pyiceberg reads with); "when_required" leaves it out.
    printf 'AWS_ENDPOINT_URL=%s\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nAWS_REGION=us-east-1\nAWS_RESPONSE_CHECKSUM_VALIDATION=when_required\n' \
      "$ENDPOINT" "$ACCESS_KEY" "$SECRET_KEY"
    ;;
  *) echo "usage: s3.sh up|down|status|env" >&2; exit 2 ;;
esac
