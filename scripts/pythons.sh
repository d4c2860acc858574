#!/usr/bin/env bash
# The other Pythons eos-ingest supports (pyproject.toml: requires-python), each in a venv with the
# lock's pins (requirements.lock is universal: one set of pins for 3.11 to 3.13):
#   scripts/pythons.sh versions      the versions besides the main venv's 3.11: 3.12 3.13
#   scripts/pythons.sh find 3.12     the interpreter's path (exit 3 when there is none)
#   scripts/pythons.sh venv 3.12     the venv's python, made (or remade, when the lock, pyproject.toml
#                                    or the interpreter changed) under $EOS_STATE_DIR/pythons/3.12
# Interpreters are looked for on PATH (python3.12) and under pyenv ($PYENV_ROOT/versions/3.12.*).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
UV="$ROOT/.venv/bin/uv"  # installed by scripts/setup.sh
VERSIONS="3.12 3.13"

find_python() {
  local version="$1" candidate
  # PATH first (a pyenv shim on PATH may name a version it cannot run: each is tried), then pyenv's
  # builds, newest patch release first.
  for candidate in "$(command -v "python$version" || true)" \
    $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".*/bin/"python$version" 2>/dev/null | sort -rV); do
    if [[ -n "$candidate" ]] && "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 3
}

make_venv() {
  local version="$1" python venv want stamp
  if ! python="$(find_python "$version")"; then
    echo "pythons.sh: Python $version not found on PATH or under pyenv; install it (pyenv install" \
      "$version, or your distribution's python$version) and run again" >&2
    exit 3
  fi
  venv="$STATE/pythons/$version"
  want="$( (cat "$ROOT/requirements.lock" "$ROOT/pyproject.toml"; "$python" -VV) | sha256sum | cut -c1-16)"
  stamp="$venv/.eos-stamp"
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    rm -rf "$venv"
    "$UV" venv -q --seed --python "$python" "$venv"  # --seed: pip too, which the wheel test builds with
    # No --compile-bytecode: the modules a test imports compile as they load (the venv is writable),
    # the thousands it never imports cost nothing. tests/integration/test_pythons.py from a fresh
    # state: 101 -> 65 s of CPU, 72 -> 63 s wall.
    "$UV" pip sync -q --python "$venv/bin/python" "$ROOT/requirements.lock"
    "$UV" pip install -q --python "$venv/bin/python" --no-deps -e "$ROOT"
    echo "$want" > "$stamp"
    echo "pythons.sh: Python $version venv made in $venv" >&2
  fi
  echo "$venv/bin/python"
}

case "${1:-}" in
  versions) echo "$VERSIONS" ;;
  find) find_python "${2:?a version, e.g. 3.12}" ;;
  venv) make_venv "${2:?a version, e.g. 3.12}" ;;
  *)
    echo "usage: scripts/pythons.sh versions | find VERSION | venv VERSION" >&2
    exit 2
    ;;
esac
