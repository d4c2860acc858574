#!/usr/bin/env bash
# The other Pythons eos-ingest supports (pyproject.toml: requires-python), each in a venv with the
# lock's pins (requirements.lock is universal: one set of pins for 3.11 to 3.13):
#   scripts/pythons.sh versions      the versions besides the main venv's 3.11: 3.12 3.13
#   scripts/pythons.sh find 3.12     the interpreter's path (exit 3 when there is none)
#   scripts/pythons.sh venv 3.12     the venv's python, made (or remade, when the lock, pyproject.toml
#                                    or the interpreter changed) under $EOS_STATE_DIR/pythons/3.12
#   scripts/pythons.sh image         the python of a venv that mirrors an official Airflow image
#                                    (Python 3.12, requirements-airflow-image.lock), with eos-ingest's
#                                    wheel installed as docs/install.md says; prints what that install
#                                    changed in the image's packages (also kept in the venv's
#                                    .eos-changes.json). Installs the Debian packages python-ldap and
#                                    mysqlclient build from (as root, or password-less sudo).
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
  want="$( (cat "$ROOT/requirements.lock" "$ROOT/requirements-bootstrap.lock" "$ROOT/pyproject.toml"; "$python" -VV) | sha256sum | cut -c1-16)"
  stamp="$venv/.eos-stamp"
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    rm -rf "$venv"
    "$UV" venv -q --python "$python" "$venv"
    # No --compile-bytecode: the modules a test imports compile as they load (the venv is writable),
    # the thousands it never imports cost nothing. tests/integration/test_pythons.py from a fresh
    # state: 101 -> 65 s of CPU, 72 -> 63 s wall.
    "$UV" pip sync -q --python "$venv/bin/python" "$ROOT/requirements.lock"
    "$UV" pip install -q --python "$venv/bin/python" --no-deps -e "$ROOT"
    # pip, uv (the wheel test builds with it) and setuptools from their hashed lock, after the sync
    # (which removes what its lock does not name); `uv venv --seed` would put the index's newest pip.
    "$UV" pip install -q --python "$venv/bin/python" --require-hashes --no-deps -r "$ROOT/requirements-bootstrap.lock"
    echo "$want" > "$stamp"
    echo "pythons.sh: Python $version venv made in $venv" >&2
  fi
  echo "$venv/bin/python"
}

# The official image's Python, and the pins docs/install.md's command adds: pyspark and pyspark-client
# (pulled by the Spark provider) ship the same pyspark/ files and must be one version; both, and
# delta-spark, equal the jars of jvm/spark-connectors/pom.xml (without the pins the image's pip picks
# pyspark 4.1.4 beside pyspark-client 4.2.0, and delta-spark 4.4.1, whose jar is not published).
IMAGE_PYTHON=3.12
IMAGE_PINS="pyspark==4.1.3 pyspark-client==4.1.3 delta-spark==4.4.0"
# What python-ldap and mysqlclient (the image's ldap and mysql extras) compile against.
IMAGE_DEBIAN="build-essential pkg-config libldap2-dev libsasl2-dev default-libmysqlclient-dev"

debian_packages() {
  local missing=() package sudo=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ "$(id -u)" -ne 0 ]]; then
    sudo -n true 2>/dev/null || { echo "pythons.sh: needs root or password-less sudo to install: apt-get install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo -n)
  fi
  command -v apt-get >/dev/null || { echo "pythons.sh: install ${missing[*]} (no apt-get here)" >&2; exit 1; }
  echo "pythons.sh: installing Debian's ${missing[*]}" >&2
  # A lock held by another apt run (unattended upgrades) is waited for, not an error.
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends "${missing[@]}" >&2
}

# The image venv in two steps, each with its stamp: the image (the lock and the interpreter), then
# eos-ingest (its sources and pyproject.toml). A changed checkout re-syncs the lock (undoing the last
# install: a cached, quick step) and installs the new wheel; only a changed lock remakes the venv.
image_venv() {
  local python venv image_want eos_want build before after
  if ! python="$(find_python "$IMAGE_PYTHON")"; then
    echo "pythons.sh: Python $IMAGE_PYTHON not found on PATH or under pyenv; install it and run again" >&2
    exit 3
  fi
  venv="$STATE/pythons/airflow-image"
  image_want="$( (cat "$ROOT/requirements-airflow-image.lock"; "$python" -VV) | sha256sum | cut -c1-16)"
  eos_want="$( (echo "$IMAGE_PINS"; cat "$ROOT/pyproject.toml" "$ROOT/README.md";
    cd "$ROOT" && find eos_ingest -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | sort | xargs cat) | sha256sum | cut -c1-16)"
  if [[ ! -f "$venv/.eos-stamp" || "$(cat "$venv/.eos-stamp")" != "$image_want" ]]; then
    debian_packages $IMAGE_DEBIAN
    rm -rf "$venv"
    "$UV" venv -q --python "$python" "$venv"
    SECONDS=0
    # --compile-bytecode here, unlike make_venv: the image's packages come compiled (pip compiles
    # what it installs), and a first DagBag load that compiled Airflow, the providers, pyspark and GX
    # took 73 s once, past Airflow's 30 s dagbag_import_timeout (test_airflow_image.py); compiled, 7.3 s.
    "$UV" pip sync -q --compile-bytecode --python "$venv/bin/python" "$ROOT/requirements-airflow-image.lock"
    echo "$image_want" > "$venv/.eos-stamp"
    echo "pythons.sh: the Airflow image's venv made in $venv (lock synced in ${SECONDS} s)" >&2
  fi
  if [[ ! -f "$venv/.eos-wheel-stamp" || "$(cat "$venv/.eos-wheel-stamp")" != "$eos_want" ]]; then
    rm -f "$venv/.eos-wheel-stamp"
    "$UV" pip sync -q --compile-bytecode --python "$venv/bin/python" "$ROOT/requirements-airflow-image.lock"
    # The wheel from a copy of what it is made of: no build/ or egg-info left in the checkout.
    build="$(mktemp -d)"
    mkdir "$build/source"
    cp "$ROOT/pyproject.toml" "$ROOT/README.md" "$build/source/"
    # The package and the top-level folders that pyproject.toml's package-dir maps into the wheel
    # (spark/, plugins/, expectations/): without them the build fails.
    mapped="$(python3 -c 'import sys, tomllib
print(" ".join(sorted(set(tomllib.load(open(sys.argv[1], "rb"))["tool"]["setuptools"]["package-dir"].values()))))' \
      "$ROOT/pyproject.toml")"
    # shellcheck disable=SC2086
    (cd "$ROOT" && find eos_ingest $mapped -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 \
      | xargs -0 cp --parents -t "$build/source")
    "$UV" build -q --wheel -b "$ROOT/requirements-bootstrap.lock" -o "$build/dist" "$build/source"
    before="$("$UV" pip freeze -q --python "$venv/bin/python")"
    SECONDS=0
    # The image's own pip, as its users run it: what is installed stays unless a range needs otherwise.
    # Not from a lock, on purpose: what this measures is what a user's install changes in the image.
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install -q --no-input "$(ls "$build"/dist/eos_ingest-*.whl)[airflow]" $IMAGE_PINS >&2
    after="$("$UV" pip freeze -q --python "$venv/bin/python")"
    echo "pythons.sh: eos-ingest[airflow] installed in ${SECONDS} s" >&2
    rm -rf "$build"
    "$venv/bin/python" "$ROOT/scripts/package_changes.py" "$venv/.eos-changes.json" <(echo "$before") <(echo "$after") >&2
    echo "$eos_want" > "$venv/.eos-wheel-stamp"
  fi
  echo "$venv/bin/python"
}

case "${1:-}" in
  versions) echo "$VERSIONS" ;;
  image) image_venv ;;
  find) find_python "${2:?a version, e.g. 3.12}" ;;
  venv) make_venv "${2:?a version, e.g. 3.12}" ;;
  *)
    echo "usage: scripts/pythons.sh versions | find VERSION | venv VERSION | image" >&2
    exit 2
    ;;
esac
