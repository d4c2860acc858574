#!/usr/bin/env bash
# Starts and stops `airflow standalone` (api-server, scheduler, dag-processor, triggerer) for this
# repository: DAGs from dags/, the UI plugin from the installed package, SQLite metadata in the state folder.
#   airflow.sh up | down | status | url | env
# Environment (all optional):
#   EOS_STATE_DIR             state folder (default ./.state); AIRFLOW_HOME is $EOS_STATE_DIR/airflow
#   EOS_AIRFLOW_HOME          another AIRFLOW_HOME (the e2e test uses a temporary one)
#   EOS_AIRFLOW_PORT          api-server port; default 8080, or a free port when 8080 is taken
#   EOS_AIRFLOW_ADMIN_PASSWORD  the admin password; default: generated once, kept in
#                             $AIRFLOW_HOME/simple_auth_manager_passwords.json ({"admin": "..."})
#   EOS_AIRFLOW_START_TIMEOUT seconds to wait for a healthy start (default 240)
#   EOS_KAFKA_BOOTSTRAP       brokers of the kafka_default connection (default 127.0.0.1:9092)
#   AIRFLOW_CONN_KAFKA_DEFAULT, AIRFLOW_CONN_SPARK_DEFAULT  override the two connections
# The api-server listens on 127.0.0.1 only. Processes run in their own session: `down` stops
# the standalone process and every process it started, by pid, and waits for the port to close.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
AF_HOME="${EOS_AIRFLOW_HOME:-$STATE/airflow}"
VENV="$ROOT/.venv"
PID_FILE="$AF_HOME/standalone.pid"
PORT_FILE="$AF_HOME/api-port"
LOG_FILE="$AF_HOME/standalone.log"
PASSWORDS="$AF_HOME/simple_auth_manager_passwords.json"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
running() { [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }
free_port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

choose_port() {
  if [[ -n "${EOS_AIRFLOW_PORT:-}" ]]; then
    if port_open "$EOS_AIRFLOW_PORT"; then
      echo "airflow: port $EOS_AIRFLOW_PORT (EOS_AIRFLOW_PORT) is taken; free it or choose another" >&2
      exit 1
    fi
    echo "$EOS_AIRFLOW_PORT"
  elif ! port_open 8080; then
    echo 8080
  else
    local port
    port="$(free_port)"
    echo "airflow: port 8080 is taken; using $port (set EOS_AIRFLOW_PORT to choose)" >&2
    echo "$port"
  fi
}

# A secret made once per AIRFLOW_HOME, readable by its owner only.
secret_file() {
  local file="$1"
  if [[ ! -s "$file" ]]; then
    (umask 077 && "$VENV/bin/python" -c 'import secrets; print(secrets.token_urlsafe(24))' >"$file")
  fi
  cat "$file"
}

write_passwords() {
  if [[ -n "${EOS_AIRFLOW_ADMIN_PASSWORD:-}" || ! -s "$PASSWORDS" ]]; then
    (umask 077 && "$VENV/bin/python" -c '
import json, os, secrets, sys
password = os.environ.get("EOS_AIRFLOW_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
open(sys.argv[1], "w").write(json.dumps({"admin": password}) + "\n")' "$PASSWORDS")
  fi
}

# Everything Airflow reads from the environment; `airflow.sh env` prints it for other shells.
airflow_env() {
  local port="$1"
  export EOS_STATE_DIR="$STATE"
  export AIRFLOW_HOME="$AF_HOME"
  export PATH="$VENV/bin:$PATH"
  export AIRFLOW__CORE__LOAD_EXAMPLES=False
  export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
  # The repository's plugins/, as docker-compose.yaml mounts it: the Ingestion page's plugin is
  # registered from there; the installed package's entry point then yields (plugins/eos_ingest_plugin.py).
  export AIRFLOW__CORE__PLUGINS_FOLDER="$ROOT/plugins"
  export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False
  # A new or edited pipelines/*.yaml shows up within about 15 s.
  export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="${AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL:-15}"
  export AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL="${AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL:-15}"
  # The scheduler's sleep between idle loops: Airflow's 1 s cost a DAG run 2-3 s of waits for its 4
  # tasks and its end (bench (g) of 10k, Airflow's own dates: 0.4-1.6 s from the trigger to the run's
  # start, ~1 s after spark_ingest, ~0.5 s after validate); at 0.25 s these are ~0.1 s each. Its
  # price: the idle scheduler's CPU, airflow standalone's 7.1 -> 14.1 % of a core (90 s idle).
  export AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="${AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME:-0.25}"
  export AIRFLOW__API__HOST=127.0.0.1
  export AIRFLOW__API__PORT="$port"
  export AIRFLOW__API__BASE_URL="http://127.0.0.1:$port"
  export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$port/execution/"
  # One api-server worker and a few task slots: a laptop (or 2 cores) runs Spark beside it.
  export AIRFLOW__API__WORKERS="${AIRFLOW__API__WORKERS:-1}"
  export AIRFLOW__CORE__PARALLELISM="${AIRFLOW__CORE__PARALLELISM:-4}"
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$PASSWORDS"
  # The same secrets for every component, or the api-server rejects tokens the scheduler signs.
  AIRFLOW__API_AUTH__JWT_SECRET="$(secret_file "$AF_HOME/jwt_secret")"
  AIRFLOW__API__SECRET_KEY="$(secret_file "$AF_HOME/api_secret_key")"
  export AIRFLOW__API_AUTH__JWT_SECRET AIRFLOW__API__SECRET_KEY
  # Connections as JSON in the environment: nothing to create, and they win over the database.
  local spark_conn='{"conn_type": "spark", "host": "local[*]"}'
  local kafka_conn="{\"conn_type\": \"kafka\", \"extra\": {\"bootstrap.servers\": \"${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}\"}}"
  export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-$spark_conn}"
  export AIRFLOW_CONN_KAFKA_DEFAULT="${AIRFLOW_CONN_KAFKA_DEFAULT:-$kafka_conn}"
}

wait_healthy() {
  local port="$1" deadline=$((SECONDS + ${EOS_AIRFLOW_START_TIMEOUT:-240}))
  local url="http://127.0.0.1:$port/api/v2/monitor/health"
  until "$VENV/bin/python" - "$url" <<'EOF' 2>/dev/null
import json, sys, urllib.request
health = json.load(urllib.request.urlopen(sys.argv[1], timeout=5))
parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
sys.exit(0 if all((health.get(p) or {}).get("status") == "healthy" for p in parts) else 1)
EOF
  do
    if ! running; then
      echo "airflow: standalone exited during start-up; last lines of $LOG_FILE:" >&2
      tail -30 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "airflow: not healthy after ${EOS_AIRFLOW_START_TIMEOUT:-240}s; see $LOG_FILE" >&2
      down
      exit 1
    fi
    sleep 2
  done
}

up() {
  mkdir -p "$AF_HOME"
  if running; then
    echo "airflow: already running (pid $(cat "$PID_FILE")) at http://127.0.0.1:$(cat "$PORT_FILE")"
    return 0
  fi
  [[ -x "$VENV/bin/airflow" ]] || { echo "airflow: $VENV/bin/airflow missing: run 'make setup'" >&2; exit 1; }
  local port
  port="$(choose_port)"
  echo "$port" >"$PORT_FILE"
  write_passwords
  airflow_env "$port"
  local started=$SECONDS
  # setsid: its own session and process group, so `down` finds every process it started.
  setsid nohup airflow standalone >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  wait_healthy "$port"
  echo "airflow: up at http://127.0.0.1:$port in $((SECONDS - started))s (pid $(cat "$PID_FILE"), AIRFLOW_HOME $AF_HOME)"
}

# The pids of a process and of all its descendants, children first.
descendants() {
  local pid="$1" child
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
    descendants "$child"
  done
  echo "$pid"
}

# True for a process that exists and is not a zombie (a zombie has exited, its parent not yet reaped it).
alive() {
  local stat
  stat="$(ps -o stat= -p "$1" 2>/dev/null)" && [[ "$stat" != Z* ]]
}

down() {
  if ! running; then
    rm -f "$PID_FILE"
    echo "airflow: not running"
    return 0
  fi
  local pid pids sid port left
  pid="$(cat "$PID_FILE")"
  port="$(cat "$PORT_FILE" 2>/dev/null || echo)"
  # Collected before anything stops: orphans would be re-parented and lost from the tree.
  sid="$(ps -o sid= -p "$pid" | tr -d ' ')"
  pids="$( (descendants "$pid"; ps -e -o pid=,sid= | awk -v s="$sid" '$2 == s {print $1}') | sort -u)"
  # SIGINT to the whole group, as Ctrl-C in a terminal: every component runs its own clean
  # shutdown. The standalone process itself ignores SIGINT (a background job of a script starts
  # with SIGINT ignored), so it gets SIGTERM once its components are gone.
  kill -INT -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    left="$(for p in $pids; do [[ "$p" != "$pid" ]] && alive "$p" && echo "$p"; done || true)"
    [[ -z "$left" ]] && break
    sleep 0.5
  done
  kill -TERM "$pid" 2>/dev/null || true
  for signal in TERM KILL; do
    for _ in $(seq 1 20); do
      left="$(for p in $pids; do alive "$p" && echo "$p"; done || true)"
      [[ -z "$left" ]] && break
      sleep 0.5
    done
    [[ -z "$left" ]] && break
    echo "airflow: sending SIG$signal to $(echo $left | wc -w) process(es) that did not stop" >&2
    # shellcheck disable=SC2086
    kill -"$signal" $left 2>/dev/null || true
  done
  rm -f "$PID_FILE"
  if [[ -n "$port" ]]; then
    for _ in $(seq 1 20); do
      port_open "$port" || break
      sleep 0.5
    done
  fi
  echo "airflow: stopped (pid $pid and its processes)"
}

status() {
  if running; then
    echo "airflow: running (pid $(cat "$PID_FILE")) at http://127.0.0.1:$(cat "$PORT_FILE")"
  else
    echo "airflow: stopped"
    return 3
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  url) running && echo "http://127.0.0.1:$(cat "$PORT_FILE")" || { echo "airflow: stopped" >&2; exit 3; } ;;
  env)
    # For a shell that runs `airflow` commands against this instance: eval "$(scripts/airflow.sh env)"
    airflow_env "$(cat "$PORT_FILE" 2>/dev/null || echo 8080)"
    for name in $(compgen -e | grep -E '^(AIRFLOW_HOME|AIRFLOW__|AIRFLOW_CONN_|EOS_STATE_DIR|PATH$)' | grep -v SECRET); do
      printf 'export %s=%q\n' "$name" "${!name}"
    done ;;
  *) echo "usage: airflow.sh up|down|status|url|env" >&2; exit 2 ;;
esac
