#!/usr/bin/env bash
# Starts and stops the local Apache Kafka broker (one KRaft node, broker+controller) from the jars
# that scripts/fetch-jars.sh put in the state folder.
#   stack.sh up | down | status
# Environment: EOS_STATE_DIR (default ./.state), KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093),
# KAFKA_HEAP (512m), KAFKA_START_TIMEOUT (seconds, 90). Tests run a second broker on other ports
# and in their own folder, through this same script.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
HOME_DIR="${KAFKA_HOME_DIR:-$STATE/kafka-$KAFKA_PORT}"
JARS="$STATE/jars/kafka"
PID_FILE="$HOME_DIR/kafka.pid"
LOG_DIR="$HOME_DIR/logs"

running() { [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

up() {
  if running; then
    echo "kafka: already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$KAFKA_PORT"
    return 0
  fi
  [[ -d "$JARS" ]] || { echo "kafka: no broker jars in $JARS: run 'make setup' first" >&2; exit 1; }
  if port_open "$KAFKA_PORT" || port_open "$CONTROLLER_PORT"; then
    echo "kafka: port $KAFKA_PORT or $CONTROLLER_PORT is taken by another process; stop it or set KAFKA_PORT/KAFKA_CONTROLLER_PORT" >&2
    exit 1
  fi
  mkdir -p "$HOME_DIR/data" "$LOG_DIR"
  sed -e "s#@KAFKA_PORT@#$KAFKA_PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
      -e "s#@DATA_DIR@#$HOME_DIR/data#g" "$ROOT/stack/server.properties.in" > "$HOME_DIR/server.properties"
  local java=(java -Xmx"${KAFKA_HEAP:-512m}" -XX:+UseG1GC -Djava.awt.headless=true
              -Dlog4j2.configurationFile="$ROOT/stack/log4j2.yaml" -Dkafka.logs.dir="$LOG_DIR" -cp "$JARS/*")
  # Format once per data folder; the meta.properties file marks a formatted one.
  if [[ ! -f "$HOME_DIR/data/meta.properties" ]]; then
    local cluster_id
    cluster_id="$("${java[@]}" kafka.tools.StorageTool random-uuid)"
    "${java[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$HOME_DIR/server.properties" --standalone >"$LOG_DIR/format.log"
  fi
  nohup "${java[@]}" kafka.Kafka "$HOME_DIR/server.properties" >"$LOG_DIR/stdout.log" 2>&1 &
  echo $! >"$PID_FILE"
  local deadline=$((SECONDS + ${KAFKA_START_TIMEOUT:-90}))
  until grep -q "Kafka Server started" "$LOG_DIR/server.log" 2>/dev/null && port_open "$KAFKA_PORT"; do
    if ! running; then
      echo "kafka: the broker exited during start-up; see $LOG_DIR/server.log and $LOG_DIR/stdout.log" >&2
      tail -20 "$LOG_DIR/stdout.log" >&2 || true
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "kafka: not ready after ${KAFKA_START_TIMEOUT:-90}s; see $LOG_DIR/server.log" >&2
      down
      exit 1
    fi
    sleep 0.5
  done
  echo "kafka: up on 127.0.0.1:$KAFKA_PORT (pid $(cat "$PID_FILE"), data in $HOME_DIR)"
}

down() {
  if ! running; then
    rm -f "$PID_FILE"
    echo "kafka: not running"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  kill -TERM "$pid"
  # A clean shutdown lets the next start skip log recovery; kill -9 only if it hangs.
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$PID_FILE"
  echo "kafka: stopped (pid $pid)"
}

status() {
  if running; then echo "kafka: running (pid $(cat "$PID_FILE")) on 127.0.0.1:$KAFKA_PORT"; else echo "kafka: stopped"; return 3; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: stack.sh up|down|status" >&2; exit 2 ;;
esac
