#!/usr/bin/env bash
# A throwaway PostgreSQL for tests: scripts/postgres.sh up | down | url | status | home
#   up      install the server binaries if missing (Debian apt), initdb once, start, wait until
#           it accepts connections, create database eos_test. Harmless when already up.
#   down    stop it (pg_ctl stop -m fast); no process is left. Harmless when already down.
#   url     print the SQLAlchemy URL of database eos_test, with the superuser's password.
#   status  exit 0 when running, 3 when not.
#   home    print the folder of its data, socket and log.
# Data, socket and log live in $EOS_STATE_DIR/postgres (default <repo>/.state/postgres). Run as
# root, the server runs as the OS user postgres, which may not be able to reach the state folder
# (a checkout under /root or a `mktemp -d` folder): then they live in
# /var/tmp/eos-ingest-postgres-<hash of the state folder>, owned by postgres, mode 700.
# It listens on 127.0.0.1:$EOS_PG_PORT (default 25432) only: for tests, never data. The default is
# below Linux's range of ephemeral ports (32768-60999), from which every client connection and every
# server bound to port 0 (Spark's, Py4J's, the test brokers') takes its port: 55432, in that range,
# was once taken by one of them when the server started, and every PostgreSQL test of that xdist
# worker failed (2026-12-07). A TCP login needs
# the superuser's password (scram-sha-256), generated at the first `up` into <home>/superuser.password
# (mode 600) and carried by `url`: any local user can reach 127.0.0.1, not that file. The script's own
# psql goes through the Unix socket (trust), in <home>/run, mode 700: only the server's OS user and
# root reach it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
OS_USER=postgres            # the OS user that runs the server when we are root

# Can the server's OS user reach (search every parent of) the state folder? Only asked as root.
owner_reaches_state() {
  local dir
  dir="$(readlink -m "$STATE")"
  while [[ "$dir" != "/" ]]; do
    dir="$(dirname "$dir")"
    [[ -e "$dir" ]] || continue
    runuser -u "$OS_USER" -- test -x "$dir" 2>/dev/null || return 1
  done
}

pg_home() {
  if [[ "$(id -u)" -eq 0 ]] && id -u "$OS_USER" >/dev/null 2>&1 && ! owner_reaches_state; then
    echo "/var/tmp/eos-ingest-postgres-$(readlink -m "$STATE" | sha256sum | cut -c1-12)"
  else
    echo "$STATE/postgres"
  fi
}

PGHOME="$(pg_home)"
DATA="$PGHOME/data"
SOCKETS="$PGHOME/run"
LOG="$PGHOME/postgres.log"
PORT="${EOS_PG_PORT:-25432}"
PASSWORD_FILE="$PGHOME/superuser.password"
DB=eos_test
SUPERUSER=postgres          # the database role, whatever OS user runs the server
HBA_MARK="# eos-ingest test server (scripts/postgres.sh): socket trust, TCP scram-sha-256"

die() { echo "postgres.sh: $*" >&2; exit 1; }

find_bindir() {
  local dir
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"
    return 0
  fi
  # Debian keeps the server binaries off PATH, one folder per major version: take the newest.
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

install_server() {
  local sudo=()
  [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
  command -v apt-get >/dev/null || die "initdb/pg_ctl not found and apt-get is not available: install the PostgreSQL server (13 or newer) and put its bin folder on PATH"
  echo "postgres.sh: PostgreSQL server not found; installing Debian's 'postgresql' package" >&2
  "${sudo[@]}" apt-get update -qq >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
}

# Run a server command as an unprivileged user: initdb and postgres refuse to run as root.
as_owner() {
  if [[ "$(id -u)" -eq 0 ]]; then
    # From a folder it can enter: psql and pg_ctl complain about a working directory they cannot.
    (cd "$PGHOME" 2>/dev/null || cd /; runuser -u "$OS_USER" -- "$@")
  else
    "$@"
  fi
}

prepare_owner() {
  if [[ "$(id -u)" -eq 0 ]] && ! id -u "$OS_USER" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$OS_USER"
    PGHOME="$(pg_home)"; DATA="$PGHOME/data"; SOCKETS="$PGHOME/run"; LOG="$PGHOME/postgres.log"
    PASSWORD_FILE="$PGHOME/superuser.password"
  fi
  if [[ "$PGHOME" == /var/tmp/* ]]; then
    # A fixed name in a world-writable folder: refuse one that someone else made (or a symlink).
    mkdir -p -m 700 "$PGHOME"
    [[ -d "$PGHOME" && ! -L "$PGHOME" ]] || die "$PGHOME is not a folder; remove it"
    local owner
    owner="$(stat -c %U "$PGHOME")"
    [[ "$owner" == root || "$owner" == "$OS_USER" ]] || die "$PGHOME belongs to '$owner', not to '$OS_USER'; remove it"
    chmod 700 "$PGHOME"
  fi
  mkdir -p "$PGHOME" "$SOCKETS"
  # The socket logs in without a password: only the server's OS user (and root) may reach it.
  chmod 700 "$PGHOME" "$SOCKETS"
  [[ "$(id -u)" -eq 0 ]] || return 0
  chown -R "$OS_USER:" "$PGHOME"
  as_owner test -w "$PGHOME" || die "user '$OS_USER' cannot write $PGHOME: set EOS_STATE_DIR to a folder it can reach"
}

running() { [[ -f "$DATA/PG_VERSION" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

psql_() { as_owner "$BIN/psql" -X -q -h "$SOCKETS" -p "$PORT" -U "$SUPERUSER" -v ON_ERROR_STOP=1 "$@"; }

# The superuser's password: made once, URL-safe, in a 600 file of the server's folder.
ensure_password() {
  if [[ ! -s "$PASSWORD_FILE" ]]; then
    (umask 077; head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$PASSWORD_FILE.tmp")
    mv -f "$PASSWORD_FILE.tmp" "$PASSWORD_FILE"
  fi
  chmod 600 "$PASSWORD_FILE"
  [[ "$(id -u)" -ne 0 ]] || chown "$OS_USER:" "$PASSWORD_FILE"
}

# Who may log in how; written at every `up`, so a server made by an older script (trust over TCP
# too) is fixed as well. Returns 0 when the file changed (the server must reload it).
write_hba() {
  local wanted
  wanted="$HBA_MARK
local   all   all                  trust
host    all   all   127.0.0.1/32   scram-sha-256"
  [[ "$(cat "$DATA/pg_hba.conf" 2>/dev/null)" != "$wanted" ]] || return 1
  printf '%s\n' "$wanted" >"$DATA/pg_hba.conf"
  [[ "$(id -u)" -ne 0 ]] || chown "$OS_USER:" "$DATA/pg_hba.conf"
}

# The role's password from the file, through the socket and stdin (never a command line).
set_password() {
  printf "SET password_encryption = 'scram-sha-256';\nALTER ROLE %s PASSWORD '%s';\n" \
    "$SUPERUSER" "$(cat "$PASSWORD_FILE")" | psql_ -d postgres >/dev/null
}

up() {
  if ! BIN="$(find_bindir)"; then
    install_server
    BIN="$(find_bindir)" || die "the 'postgresql' package is installed but initdb/pg_ctl are still not found"
  fi
  prepare_owner
  # One `up` at a time (parallel test workers): the others wait, then find it running.
  exec 9>"$PGHOME/.lock"
  flock -w 120 9 || die "timed out waiting for another 'postgres.sh up' (lock $PGHOME/.lock)"
  ensure_password
  if [[ ! -f "$DATA/PG_VERSION" ]]; then
    rm -rf "$DATA"
    (cd "$PGHOME" && as_owner "$BIN/initdb" -D "$DATA" -U "$SUPERUSER" --auth-local=trust \
      --auth-host=scram-sha-256 --pwfile="$PASSWORD_FILE" -E UTF8 --no-locale --no-sync) \
      >"$PGHOME/initdb.log" 2>&1 || { cat "$PGHOME/initdb.log" >&2; die "initdb failed"; }
    # Throwaway test server: durability off makes it fast; loopback only; socket in the state folder.
    cat >>"$DATA/postgresql.conf" <<EOF

# --- eos-ingest test server (scripts/postgres.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCKETS'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
  fi
  local reload=0
  write_hba && reload=1
  # A server started on another port (an older default, another EOS_PG_PORT): stopped and started
  # on this one, so that `url` names where it listens. postmaster.pid's 4th line is its port.
  local running_port
  running_port="$(sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true)"
  if running && [[ "$running_port" != "$PORT" ]]; then
    echo "postgres.sh: running on port $running_port; restarting it on $PORT (EOS_PG_PORT)" >&2
    (cd "$PGHOME" && as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop) >/dev/null
  fi
  if running; then
    echo "postgres.sh: already running ($DATA)" >&2
    [[ "$reload" -eq 0 ]] || as_owner "$BIN/pg_ctl" -D "$DATA" reload >/dev/null
  else
    # 9>&-: the server must not inherit the lock, or it would hold it for its whole life.
    (cd "$PGHOME" && as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -o "-p $PORT" -w -t 30 start 9>&-) >/dev/null \
      || { tail -n 30 "$LOG" >&2 || true; die "the server did not start within 30 s (log: $LOG; if it says the address is in use, another program holds 127.0.0.1:$PORT: set EOS_PG_PORT to a free port)"; }
  fi
  set_password
  if [[ -z "$(psql_ -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]]; then
    psql_ -d postgres -c "CREATE DATABASE $DB" >/dev/null
  fi
  echo "postgres.sh: up at postgresql+psycopg://$SUPERUSER:***@127.0.0.1:$PORT/$DB (password in $PASSWORD_FILE)" >&2
}

down() {
  BIN="$(find_bindir)" || { echo "postgres.sh: no PostgreSQL installed, nothing to stop" >&2; return 0; }
  if running; then
    (cd "$PGHOME" && as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop) >/dev/null
    echo "postgres.sh: stopped" >&2
  else
    echo "postgres.sh: not running" >&2
  fi
}

url() {
  [[ -s "$PASSWORD_FILE" ]] || die "no password yet ($PASSWORD_FILE): run '$0 up' first"
  echo "postgresql+psycopg://$SUPERUSER:$(cat "$PASSWORD_FILE")@127.0.0.1:$PORT/$DB"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  url) url ;;
  home) echo "$PGHOME" ;;
  status)
    BIN="$(find_bindir)" || exit 3
    running || exit 3
    ;;
  *) die "usage: $0 up | down | url | status | home" ;;
esac
