"""The package on another Python it supports: the short part of `make test-pythons`.

A version gets a venv with the lock's pins (scripts/pythons.sh, kept in the state folder between
runs); in it every module of the package imports, the DAG folder parses through Airflow's DagBag,
and the version-bound GX import tricks (quality/gx_import.py) hold. `make test` runs it on the
newest version only (3.13: what a release of a dependency breaks first; 3.12 cost 70 s more of the
suite's time); `make test-pythons` runs it on each (EOS_TEST_PYTHONS=all), with all the unit tests
and a real batch (the wheel test) on each.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from eos_ingest import paths

pytestmark = pytest.mark.integration

PYTHONS = paths.REPO_ROOT / "scripts" / "pythons.sh"
SUPPORTED = subprocess.run(
    [str(PYTHONS), "versions"], capture_output=True, text=True, check=True
).stdout.split()
VERSIONS = SUPPORTED if os.environ.get("EOS_TEST_PYTHONS") == "all" else SUPPORTED[-1:]

IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
import eos_ingest
failed = {}
for module in pkgutil.walk_packages(eos_ingest.__path__, "eos_ingest."):
    try:
        importlib.import_module(module.name)
    except Exception as exc:
        failed[module.name] = repr(exc)
print(json.dumps({"version": list(sys.version_info[:2]), "failed": failed}))
"""


@pytest.fixture(scope="module", params=VERSIONS)
def python(request: pytest.FixtureRequest) -> str:
    """The version's venv python (made on first use: a minute or two, then cached)."""
    version = request.param
    if subprocess.run([str(PYTHONS), "find", version], capture_output=True, check=False).returncode == 3:
        pytest.skip(f"Python {version} is not installed here (scripts/pythons.sh find {version})")
    made = subprocess.run(
        [str(PYTHONS), "venv", version], capture_output=True, text=True, timeout=1200, check=False
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def test_every_module_imports(python: str) -> None:
    import json

    done = subprocess.run(
        [python, "-c", IMPORT_EVERY_MODULE], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["failed"] == {}, report
    assert ".".join(map(str, report["version"])) in SUPPORTED


def test_the_dag_folder_and_the_gx_import_tricks_hold(python: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__", "PYTEST_"))}
    # Not the unit tests' shared AIRFLOW_HOME: the suite's own DagBag test may run beside this one.
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow")
    done = subprocess.run(
        [
            python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "tests/unit/airflow/test_dagbag.py", "tests/unit/quality/test_gx_import.py",
        ],
        cwd=paths.REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1], done.stdout[-2000:]
