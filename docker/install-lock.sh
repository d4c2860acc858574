#!/bin/sh
# Installs a lock file into the active venv the way the Airflow image does (docker/airflow.Dockerfile),
# and is the very command tests/integration/test_image_lock.py runs with --dry-run under Debian
# bookworm's Python 3.11 and pip (the image's): one place for the flags, so the check cannot drift
# from the image.
#
# Why --no-deps: the lock is complete (uv compiles every transitive pin into it), so nothing is left
# to resolve, and pip installs exactly its lines whatever the index publishes next. Letting pip
# resolve it made the build depend on the index: bookworm's pip 23.0.1 in hash mode fetches the
# newest release for an extra that a pinned package asks for (fastapi-cli's uvicorn[standard]) and
# then refuses it as unpinned, which broke the image the day uvicorn 0.55.0 came out. `pip check`
# after a real install proves the lock complete on the image's platform.
#
# Usage: install-lock.sh LOCK [pip install options, e.g. --dry-run]
set -eu
# The pip of Debian bookworm's python3.11-venv (python3-pip-whl), which the image's venv gets. The
# check installs this version to run the script; the image refuses to build if bookworm's differs,
# so the check always runs the image's pip.
IMAGE_PIP_VERSION=23.0.1
pip_version="$(python -m pip --version | cut -d' ' -f2)"
if [ "$pip_version" != "$IMAGE_PIP_VERSION" ]; then
  echo "install-lock.sh: pip $pip_version here, the image's is $IMAGE_PIP_VERSION; set IMAGE_PIP_VERSION" \
    "in docker/install-lock.sh to the image's pip so that tests/integration/test_image_lock.py checks" \
    "the lock with it" >&2
  exit 1
fi
lock="$1"
shift
python -m pip install --no-cache-dir --disable-pip-version-check --no-deps --require-hashes "$@" -r "$lock"
case " $* " in
  *" --dry-run "*) ;;
  *) python -m pip check ;;
esac
