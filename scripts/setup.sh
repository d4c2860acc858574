#!/usr/bin/env bash
# `make setup`: everything a fresh machine needs beyond Python 3.11, JDK 17 and Maven.
# Idempotent and fast when done: each step keeps a stamp of the inputs it was built from.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
VENV="$ROOT/.venv"
PYTHON="${EOS_PYTHON:-python3.11}"

need() {
  command -v "$1" >/dev/null || { echo "setup: '$1' not found. $2" >&2; exit 1; }
}
need "$PYTHON" "Install Python 3.11 (Debian: apt-get install python3.11 python3.11-venv) or set EOS_PYTHON."
need java "Install OpenJDK 17 (Debian: apt-get install openjdk-17-jdk-headless)."
need mvn "Install Maven (Debian: apt-get install maven)."
java_major="$(java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -1)"
if [[ "$java_major" -lt 17 ]]; then
  echo "setup: Java $java_major found; Kafka 4 and Spark 4.1 need JDK 17 or newer." >&2
  exit 1
fi
mkdir -p "$STATE"

# 1. The virtualenv, from the committed lock. uv makes a cold install take seconds, not minutes.
# "bytecode" is part of the stamp: a venv made before packages were installed compiled gets redone.
want="$( (cat "$ROOT/requirements.lock" "$ROOT/requirements-bootstrap.lock" "$ROOT/pyproject.toml"; echo bytecode) | sha256sum | cut -c1-16)"
stamp="$VENV/.eos-stamp"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  # uv (and pip, setuptools) from their own hashed lock: nothing here is the index's newest.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps \
    -r "$ROOT/requirements-bootstrap.lock"
  # Compiled at install, as pip does by default and uv does not: with PYTHONDONTWRITEBYTECODE set
  # (CI machines, containers) nothing is ever cached, and every process would compile what it
  # imports; GX's import alone took 8.4 s of CPU instead of 3.9 s (bench/HISTORY.md).
  "$VENV/bin/uv" pip sync -q --compile-bytecode --python "$VENV/bin/python" "$ROOT/requirements.lock"
  # An egg-info an earlier build left at the root is found first by importlib.metadata wherever the
  # root is on sys.path (pytest, `python -m` from it), with its stale entry points (the plugin's).
  # Builds now write it to plugins/ (pyproject.toml's package-dir root), which Airflow appends to
  # sys.path, after site-packages.
  rm -rf "$ROOT/eos_ingest.egg-info" "$ROOT/plugins/eos_ingest.egg-info"
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps -e "$ROOT"
  echo "$want" > "$stamp"
  echo "setup: Python packages installed into $VENV"
fi

# 2. JVM artifacts from Maven Central: the Kafka broker, the Spark Kafka source, Delta.
"$ROOT/scripts/fetch-jars.sh"

# 3. The Schema Registry server of the test stack (stack/registry.sh), built from stack/registry/.
"$ROOT/scripts/build-registry.sh"

# 3b. Toxiproxy, the TCP fault proxy of the network fault tests, from the Go module proxy (pinned).
"$ROOT/scripts/build-toxiproxy.sh"

# 4. The class-data archive of the job's driver JVM (eos_ingest/spark/class_archive.py): ~40 s once,
# then every local job starts ~3 s sooner. Only a speed-up: if it cannot be made, jobs run without.
# EOS_SETUP_ARCHIVE=background (make test): made beside what runs next (lint's mypy, ~26 s), its
# output in $STATE/class-archive.log; scripts/wait-archive.sh waits for it before the tests.
archive() {
  EOS_STATE_DIR="$STATE" "$VENV/bin/python" -m eos_ingest.spark.class_archive ||
    echo "setup: warning: no class-data archive for the job's JVM (see above); jobs start without it" >&2
}
if [[ "${EOS_SETUP_ARCHIVE:-}" == background ]]; then
  archive > "$STATE/class-archive.log" 2>&1 &
  echo $! > "$STATE/class-archive.pid"
else
  archive
fi
