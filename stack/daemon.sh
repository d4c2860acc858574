# Sourced by stack/s3.sh and stack/registry.sh: one background server on 127.0.0.1 kept by a pid
# file. The caller sets NAME (for messages), PID_FILE, LOG_FILE, PORT, TIMEOUT (seconds) and
# defines `answers` (true once the server serves requests), then calls these.

running() { [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Refuses a port another process holds: the caller's server would fail to bind, or worse, the
# readiness check would see the other process answer.
daemon_port_free() {
  if port_open "$PORT"; then
    echo "$NAME: port $PORT is taken by another process; stop it or set $1" >&2
    exit 1
  fi
}

# Starts "$@" in the background (output to LOG_FILE) and waits until `answers`; a server that
# exits, or does not answer within TIMEOUT, is reported with its log's tail and stopped.
daemon_start() {
  nohup "$@" >"$LOG_FILE" 2>&1 &
  echo $! >"$PID_FILE"
  local deadline=$((SECONDS + TIMEOUT))
  until answers; do
    if ! running; then
      echo "$NAME: the server exited during start-up; see $LOG_FILE" >&2
      tail -20 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "$NAME: the server does not answer after ${TIMEOUT}s; see $LOG_FILE" >&2
      daemon_stop >&2
      exit 1
    fi
    sleep 0.2
  done
}

# SIGTERM, up to 10 s for a clean exit, then SIGKILL.
daemon_stop() {
  if ! running; then
    rm -f "$PID_FILE"
    echo "$NAME: stopped"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  kill -TERM "$pid"
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$PID_FILE"
  echo "$NAME: stopped (pid $pid)"
}

# Exit 3 (LSB's "not running") unless the server runs and answers.
daemon_status() {
  if running && answers; then
    echo "$NAME: running at $1"
  else
    echo "$NAME: stopped"
    return 3
  fi
}
