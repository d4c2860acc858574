#!/usr/bin/env bash
# Waits (at most 10 minutes) for the class-data archive that `EOS_SETUP_ARCHIVE=background
# scripts/setup.sh` makes beside the lint checks, then prints what it said. A missing pid file:
# nothing to wait for.
set -euo pipefail
STATE="${EOS_STATE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.state}"
pid_file="$STATE/class-archive.pid"
[[ -f "$pid_file" ]] || exit 0
pid="$(cat "$pid_file")"
for _ in $(seq 1200); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
if kill -0 "$pid" 2>/dev/null; then
  echo "setup: the class-data archive (pid $pid) is still being made after 10 minutes; tests start without waiting" >&2
else
  rm -f "$pid_file"
fi
cat "$STATE/class-archive.log" 2>/dev/null || true
