"""The lock installs the way the Airflow image installs it (docker/airflow.Dockerfile), without Docker.

The image runs docker/install-lock.sh with Debian bookworm's Python 3.11 and its pip; so does this
check, as a dry run (pip still fetches every file and checks it against the lock's hash). It
failed on the lock of 2026-11 the day uvicorn 0.55.0 came out, as the image's build did: with the
install command of that time (pip resolving the lock), pip 23.0.1 took the new uvicorn for
fastapi-cli's `uvicorn[standard]` and refused it as unpinned in hash mode. The lock's completeness,
which the image's `pip check` proves at build, is checked here on the project's venv (setup.sh
installs exactly the lock into it, for the same Python 3.11).

Mostly network: 1-2 minutes on a fresh machine, little CPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eos_ingest import paths

pytestmark = pytest.mark.integration

SCRIPT = paths.REPO_ROOT / "docker" / "install-lock.sh"
LOCK = paths.REPO_ROOT / "requirements.lock"
UV = Path(sys.executable).parent / "uv"  # scripts/setup.sh installs it beside the venv's python


def image_pip_version() -> str:
    found = re.search(r"^IMAGE_PIP_VERSION=(\S+)$", SCRIPT.read_text(), re.MULTILINE)
    assert found, f"{SCRIPT} names no IMAGE_PIP_VERSION"
    return found.group(1)


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of Python 3.11 (the image's: bookworm's python3) with the image's pip."""
    assert sys.version_info[:2] == (3, 11), "the project's venv is the image's Python, 3.11"
    venv = tmp_path_factory.mktemp("image-pip") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            f"pip=={image_pip_version()}",
        ],
        check=True,
        timeout=300,
    )
    return venv


def test_the_lock_installs_with_the_images_installer(image_venv: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{image_venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(image_venv),
    }
    env.pop("PIP_FIND_LINKS", None)  # the index alone, as in the image
    done = subprocess.run(
        [str(SCRIPT), str(LOCK), "--dry-run", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, (
        f"the Airflow image's install of requirements.lock (docker/install-lock.sh under pip "
        f"{image_pip_version()}) fails:\n{done.stderr[-3000:]}\nThe image would not build: change the lock "
        "(make lock) or the install, and check again with this test"
    )


def test_the_lock_is_complete() -> None:
    """Every requirement of every package in the lock is in the lock (the image's `pip check`)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (
        f"requirements.lock is not complete for Python 3.11:\n{done.stdout}{done.stderr}"
    )
