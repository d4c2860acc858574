"""eos-ingest installed into a venv that mirrors an official Airflow image (docs/install.md).

The venv (scripts/pythons.sh image, kept in the state folder between runs) holds Python 3.12 with
requirements-airflow-image.lock (Airflow 3.3.2 and the Dockerfile's default extras, resolved for
3.12), then eos-ingest's wheel installed with [airflow] and its own pyproject ranges, as the image's
user would. Too slow for `make test` (the first venv takes minutes): `make test-pythons` runs it,
or EOS_AIRFLOW_IMAGE=1 pytest tests/integration/test_airflow_image.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from eos_ingest import paths
from tests.helpers.install_probes import AIRFLOW_PROBE

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("EOS_AIRFLOW_IMAGE") != "1",
        reason="the Airflow image venv takes minutes to make: EOS_AIRFLOW_IMAGE=1 (make test-pythons)",
    ),
]

PYTHONS = paths.REPO_ROOT / "scripts" / "pythons.sh"
IMAGE_LOCK = paths.REPO_ROOT / "requirements-airflow-image.lock"
# The first DagBag load in a fresh venv took 73 s once (a venv installed without bytecode: Python
# compiled Airflow, the providers, pyspark and GX on first import, on a loaded 2-core machine),
# above Airflow's 30 s dagbag_import_timeout, which would report the DAG file as an import error.
# scripts/pythons.sh compiles the bytecode (7.3 s measured then), but the test keeps the room so a
# cold machine does not fail it, and prints the time (-s shows it).
DAGBAG_IMPORT_TIMEOUT = 600

INSTALLED = """
import importlib.metadata, json, re
print(json.dumps({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
                  for d in importlib.metadata.distributions()}))
"""


def lock_pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
        if m:
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


@pytest.fixture(scope="module")
def python() -> Path:
    """The image venv's python (made on first use: minutes, then cached by its stamps)."""
    made = subprocess.run([str(PYTHONS), "image"], capture_output=True, text=True, timeout=2400, check=False)
    assert made.returncode == 0, made.stderr[-4000:]
    return Path(made.stdout.strip().splitlines()[-1])


def installed(python: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(python), "-c", INSTALLED], capture_output=True, text=True, timeout=120, check=True
    )
    found: dict[str, str] = json.loads(done.stdout)
    return found


def test_airflow_and_its_providers_stay_the_image_locks(python: Path) -> None:
    pins = lock_pins(IMAGE_LOCK)
    airflow = {n: v for n, v in pins.items() if n.startswith("apache-airflow")}
    assert "apache-airflow" in airflow and len(airflow) > 20, airflow  # the lock parsed
    now = installed(python)
    assert {n: now.get(n) for n in airflow} == airflow
    # What the install did to the image (scripts/pythons.sh writes it): only added packages beside
    # Airflow's, nothing removed, and the Spark provider ([airflow]) is the one provider added.
    changes = json.loads((python.parent.parent / ".eos-changes.json").read_text())
    assert changes["removed"] == {}, changes
    assert not [n for n in changes["changed"] if n.startswith("apache-airflow")], changes
    assert [n for n in changes["added"] if n.startswith("apache-airflow")] == [
        "apache-airflow-providers-apache-spark"
    ], changes
    assert "eos-ingest" in changes["added"] and now["eos-ingest"], changes
    # Every requirement of every package still holds (importlib-metadata's downgrade included).
    check = subprocess.run(
        [str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    # The pins docs/install.md's command adds: pyspark and pyspark-client one version, the jars'.
    assert now["pyspark"] == now["pyspark-client"] == "4.1.3", now
    assert now["delta-spark"] == "4.4.0", now


def test_the_dag_folder_imports_in_the_image(python: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"  # the DAGs folder with pipelines/ beside it, nothing else of the repo
    shutil.copytree(paths.REPO_ROOT / "dags", work / "dags", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(paths.REPO_ROOT / "pipelines", work / "pipelines")
    names = sorted(p.stem for p in (work / "pipelines").glob("*.yaml"))
    assert names, "no pipeline file in pipelines/"
    (tmp_path / "airflow" / "plugins").mkdir(parents=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW_", "AIRFLOW__", "PYTEST_"))
        and k not in ("PYTHONPATH", "EOS_PIPELINES_DIR")
    }
    env.update(
        EOS_STATE_DIR=str(tmp_path / "state"),
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(tmp_path / "airflow" / "plugins"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT=str(DAGBAG_IMPORT_TIMEOUT),
    )
    started = time.monotonic()
    done = subprocess.run(
        [str(python), "-c", AIRFLOW_PROBE, str(work / "dags")],
        cwd=work, env=env, capture_output=True, text=True, timeout=DAGBAG_IMPORT_TIMEOUT + 300, check=False,
    )  # fmt: skip
    print(f"DagBag of dags/ in the image venv: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stderr[-4000:]
    parsed = json.loads(done.stdout.strip().splitlines()[-1])
    assert parsed["import_errors"] == {}, parsed
    assert parsed["plugins"].count("eos_ingest") == 1 and parsed["plugin_errors"] == {}, parsed
    for name in names:
        assert {f"eos_ingest__{name}", f"eos_backfill__{name}"} <= set(parsed["dag_ids"]), parsed


def test_the_cli_and_the_plugin_work_in_the_image(python: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow"), EOS_STATE_DIR=str(tmp_path / "state"))
    cli = subprocess.run(
        [str(python.parent / "eos-ingest"), "--help"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr[-4000:]
    assert "usage: eos-ingest" in cli.stdout, cli.stdout
    plugin = subprocess.run(
        [str(python), "-c", "import eos_ingest_plugin as p; print(p.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert plugin.returncode == 0, plugin.stderr[-4000:]
    # The wheel's module, not the checkout's.
    assert Path(plugin.stdout.strip()).is_relative_to(python.parent.parent), plugin.stdout
