#!/usr/bin/env bash
# Starts and stops a Spark standalone cluster on 127.0.0.1: one master and one worker, from the
# classes of the pyspark package in the venv (org.apache.spark.deploy.master.Master and
# org.apache.spark.deploy.worker.Worker, through pyspark's bin/spark-class).
#   spark.sh up | down | status
# Environment: EOS_STATE_DIR (default ./.state), SPARK_MASTER_PORT (7077), SPARK_MASTER_WEBUI_PORT
# (18080), SPARK_WORKER_WEBUI_PORT (18081), SPARK_WORKER_CORES (2), SPARK_WORKER_MEMORY (2g),
# SPARK_CLUSTER_DIR (default $EOS_STATE_DIR/spark-<master port>: pids, logs/, the worker's work/),
# SPARK_START_TIMEOUT (seconds, 60), PYTHON (default ./.venv/bin/python, whose pyspark is used).
# Airflow's 8080 is never used. The tests start their own cluster on free ports through this script.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
MASTER_PORT="${SPARK_MASTER_PORT:-7077}"
MASTER_WEB="${SPARK_MASTER_WEBUI_PORT:-18080}"
WORKER_WEB="${SPARK_WORKER_WEBUI_PORT:-18081}"
HOME_DIR="${SPARK_CLUSTER_DIR:-$STATE/spark-$MASTER_PORT}"
LOG_DIR="$HOME_DIR/logs"
WORK_DIR="$HOME_DIR/work"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
TIMEOUT="${SPARK_START_TIMEOUT:-60}"
MASTER_URL="spark://127.0.0.1:$MASTER_PORT"

running() { [[ -f "$HOME_DIR/$1.pid" ]] && kill -0 "$(cat "$HOME_DIR/$1.pid")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The number of alive workers in the master's JSON status; fails while the master does not answer.
alive_workers() {
  "$PYTHON" -c 'import json, sys, urllib.request
print(json.load(urllib.request.urlopen(sys.argv[1], timeout=2)).get("aliveworkers", 0))' \
    "http://127.0.0.1:$MASTER_WEB/json/" 2>/dev/null
}

# Waits (at most SPARK_START_TIMEOUT) until the master answers ($1 = master) or counts a worker.
wait_for() {
  local what="$1" deadline=$((SECONDS + TIMEOUT)) n
  until n="$(alive_workers)" && { [[ "$what" == master ]] || ((n > 0)); }; do
    if ! running "$what"; then
      echo "spark: the $what exited during start-up; see $LOG_DIR/$what.log" >&2
      tail -20 "$LOG_DIR/$what.log" >&2 || true
      down >&2
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "spark: the $what is not ready after ${TIMEOUT}s; see $LOG_DIR/$what.log" >&2
      down >&2
      exit 1
    fi
    sleep 0.5
  done
}

start() {  # start <master|worker> <class> <args...>
  local role="$1"
  shift
  nohup "$SPARK_HOME/bin/spark-class" "$@" >"$LOG_DIR/$role.log" 2>&1 &
  echo $! >"$HOME_DIR/$role.pid"
}

up() {
  if running master && running worker; then
    echo "spark: already running, master $MASTER_URL (web http://127.0.0.1:$MASTER_WEB)"
    return 0
  fi
  running master || running worker && down
  SPARK_HOME="${SPARK_HOME:-$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null || true)}"
  [[ -x "$SPARK_HOME/bin/spark-class" ]] || { echo "spark: no pyspark for $PYTHON: run 'make setup' first" >&2; exit 1; }
  export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1
  for port in "$MASTER_PORT" "$MASTER_WEB" "$WORKER_WEB"; do
    if port_open "$port"; then
      echo "spark: port $port is taken by another process; stop it or set SPARK_MASTER_PORT/SPARK_MASTER_WEBUI_PORT/SPARK_WORKER_WEBUI_PORT" >&2
      exit 1
    fi
  done
  mkdir -p "$LOG_DIR" "$WORK_DIR"
  start master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "$MASTER_WEB"
  wait_for master
  start worker org.apache.spark.deploy.worker.Worker "$MASTER_URL" --host 127.0.0.1 --webui-port "$WORKER_WEB" \
    --cores "${SPARK_WORKER_CORES:-2}" --memory "${SPARK_WORKER_MEMORY:-2g}" --work-dir "$WORK_DIR"
  wait_for worker
  echo "spark: up, master $MASTER_URL (web http://127.0.0.1:$MASTER_WEB), worker web http://127.0.0.1:$WORKER_WEB, work in $WORK_DIR"
}

stop() {
  local role="$1" pid
  if ! running "$role"; then
    rm -f "$HOME_DIR/$role.pid"
    return 0
  fi
  pid="$(cat "$HOME_DIR/$role.pid")"
  kill -TERM "$pid"
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$HOME_DIR/$role.pid"
  echo "spark: $role stopped (pid $pid)"
}

down() {
  # The worker first: it kills the executors it launched.
  stop worker
  stop master
}

status() {
  if running master && running worker; then
    echo "spark: running, master $MASTER_URL (web http://127.0.0.1:$MASTER_WEB)"
  else
    echo "spark: stopped"
    return 3
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: spark.sh up|down|status" >&2; exit 2 ;;
esac
