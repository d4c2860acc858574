"""The wheel, installed into a fresh virtualenv away from the checkout, runs a batch on the test broker.

The wheel is built from a copy of the files a build reads (pyproject.toml, README.md, eos_ingest/ and
the top-level folders it maps in: spark/, expectations/, plugins/),
installed with pip (`--no-deps --no-index`) into a new venv without system site-packages. The
third-party packages are the project venv's, reached through one .pth line (a line of a .pth file
adds its folder, it does not run that folder's .pth files, so the checkout's editable install stays
out); pyspark's `spark-submit` script is copied beside the venv's python, where pip puts it. Every
command runs in a folder outside the repository, without PYTHONPATH.

The second test is a new user's install: the wheel alone, by plain pip, without the lock (its
dependencies are whatever pyproject.toml's ranges resolve to on the index that day) into a fresh
venv, then the same batch. pip's install alone took 2 to 4 minutes on a loaded 2-core machine (the
test 5 to 8), so it runs in `make test-pythons` (EOS_WHEEL_PIP=1, on every supported Python), not in
`make test`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest import paths
from tests.fixtures.pipelines import JSON_SCHEMA
from tests.helpers.install_probes import AIRFLOW_PROBE, PROBE
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(paths.REPO_ROOT / name, source / name)
    # The package and the top-level folders pyproject.toml's package-dir maps into the wheel
    # (spark/, expectations/, plugins/).
    mapped = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    for folder in sorted(set(mapped.values())):
        shutil.copytree(
            paths.REPO_ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    dist = tmp_path / "dist"
    # uv: in every venv of `make setup` and scripts/pythons.sh (requirements-bootstrap.lock). It builds in
    # an isolated env, with the lock's setuptools rather than the index's newest.
    uv = Path(sys.executable).parent / "uv"
    assert uv.exists(), f"{uv}: make setup installs it"
    constraint = paths.REPO_ROOT / "requirements-bootstrap.lock"
    done = subprocess.run(
        [str(uv), "build", "--wheel", "-b", str(constraint), "-o", str(dist), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (wheel,) = dist.glob("eos_ingest-*.whl")
    return wheel


def install(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # Third-party packages from this venv, through a folder of links to all of its site-packages
    # but our own editable install: its dist-info would register the plugin's entry point twice.
    third_party = tmp_path / "third_party"
    third_party.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).resolve().iterdir():
        if not entry.name.startswith(("eos_ingest", "__editable__", "__editable___eos_ingest")):
            (third_party / entry.name).symlink_to(entry)
    (site / "eos_third_party.pth").write_text(f"{third_party}\n")
    shutil.copy(Path(sys.executable).parent / "spark-submit", venv / "bin" / "spark-submit")
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return venv


def test_the_wheel_installed_away_from_the_checkout_plans_and_runs_a_batch(
    tmp_path: Path, kafka_bootstrap: str, make_topic: Any
) -> None:
    venv = install(tmp_path, build_wheel(tmp_path))
    batch_on_the_broker(tmp_path, venv, kafka_bootstrap, make_topic, airflow=True)


# Every module but the Airflow adapter's (which only Airflow loads) imports with the wheel alone.
IMPORT_ALL_BUT_AIRFLOW = """
import importlib, json, pkgutil
import eos_ingest
failed = {}
for module in pkgutil.walk_packages(eos_ingest.__path__, "eos_ingest."):
    if not module.name.startswith("eos_ingest.airflow"):
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            failed[module.name] = repr(exc)
print(json.dumps(failed))
"""


@pytest.mark.skipif(
    os.environ.get("EOS_WHEEL_PIP") != "1",
    reason="pip from the index without the lock: make test-pythons (EOS_WHEEL_PIP=1; docs/install.md)",
)
def test_the_wheel_alone_installed_by_pip_without_the_lock_plans_runs_and_verifies_a_batch(
    tmp_path: Path, kafka_bootstrap: str, make_topic: Any
) -> None:
    """issue 51: `pip install eos_ingest-*.whl` into a fresh venv, then `eos-ingest plan`, failed with
    No module named 'pyarrow'. No lock, no extra, no Airflow: what the wheel declares is all there is."""
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    started = time.monotonic()
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    print(f"pip install of the wheel: {time.monotonic() - started:.0f} s")  # pytest -s shows it
    assert done.returncode == 0, done.stderr[-4000:]
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout
    imported = subprocess.run(
        [python, "-c", IMPORT_ALL_BUT_AIRFLOW], capture_output=True, text=True, timeout=300, check=False
    )
    assert imported.returncode == 0, imported.stderr[-4000:]
    assert json.loads(imported.stdout) == {}
    batch_on_the_broker(tmp_path, venv, kafka_bootstrap, make_topic, airflow=False)


def batch_on_the_broker(
    tmp_path: Path, venv: Path, kafka_bootstrap: str, make_topic: Any, *, airflow: bool
) -> None:
    """plan, run and verify of a 40-record pipeline with the venv's eos-ingest, in a folder outside
    the repository; with airflow, first where the package's files, its plugin and DAGs are found."""
    work = tmp_path / "elsewhere"  # the working directory: pipelines/ here, nothing of the repo
    (work / "pipelines").mkdir(parents=True)
    (tmp_path / "airflow" / "plugins").mkdir(parents=True)  # Airflow's plugins folder: empty
    state = tmp_path / "state"
    state.mkdir()
    (state / "jars").symlink_to(paths.state_dir() / "jars")  # fetched once by `make setup`
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EOS_PIPELINES_DIR")}
    env.update(
        EOS_STATE_DIR=str(state),
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(tmp_path / "airflow" / "plugins"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )

    def run(*argv: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), cwd=work, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    topic = make_topic(partitions=2)
    records = [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(40)]
    TxProducer(kafka_bootstrap).transaction(topic, records, commit=True)
    doc = {
        "name": "wheel",
        "topics": [topic],
        "kafka": {"bootstrap.servers": kafka_bootstrap},
        "value": {"format": "json", "schema": JSON_SCHEMA},
        "output": {"path": "tables/wheel"},  # relative: under the state folder
        "control_db_url": "sqlite:///${EOS_STATE_DIR}/control.db",
        "schedule": None,
    }
    (work / "pipelines" / "wheel.yaml").write_text(yaml.safe_dump(doc))
    shutil.copytree(paths.REPO_ROOT / "dags", work / "dags", ignore=shutil.ignore_patterns("__pycache__"))
    eos = str(venv / "bin" / "eos-ingest")

    if airflow:
        probe = run(str(venv / "bin" / "python"), "-c", PROBE)
        assert probe.returncode == 0, probe.stderr
        found = json.loads(probe.stdout)
        assert Path(found["package"]).is_relative_to(venv), found["package"]
        assert Path(found["factory"]).is_relative_to(venv)
        # Nothing on sys.path but the venv itself holds an eos_ingest, and the checkout is not on it.
        assert paths.REPO_ROOT.resolve() not in [Path(p or work).resolve() for p in found["sys_path"]]
        others = [
            p for p in found["sys_path"] if not Path(p or work).resolve().is_relative_to(venv.resolve())
        ]
        assert not [p for p in others if (Path(p or work) / "eos_ingest").exists()], found["sys_path"]
        assert found["checkout"] is None and found["state_dir"] == str(state)
        assert found["files"] and all(found["files"].values()), found["files"]
        assert all(Path(f).is_relative_to(venv) for f in found["files"])
        assert found["templates"] == sorted(p.name for p in (paths.PACKAGE_DIR / "templates").glob("*.html"))
        assert found["plugin"] == "eos_ingest"  # the airflow.plugins entry point of the installed wheel
        assert Path(found["plugin_file"]).is_relative_to(venv)  # plugins/eos_ingest_plugin.py, shipped

        dagbag = run(str(venv / "bin" / "python"), "-c", AIRFLOW_PROBE, str(work / "dags"), timeout=300)
        assert dagbag.returncode == 0, dagbag.stderr[-4000:]
        parsed = json.loads(dagbag.stdout.strip().splitlines()[-1])
        assert parsed["plugins"].count("eos_ingest") == 1 and parsed["plugin_errors"] == {}, parsed
        assert parsed["dag_ids"] == ["eos_backfill__wheel", "eos_ingest__wheel"], parsed
        assert parsed["import_errors"] == {}, parsed

    plan = run(eos, "plan", "--pipeline", "wheel")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)["batch"]
    # The ranges end at the last stable offsets: the 40 records and the commit markers.
    assert planned["status"] == "planned" and sum(r["end"] - r["start"] for r in planned["ranges"]) >= 40

    ran = run(eos, "run", "--pipeline", "wheel", timeout=600)  # spark-submit of the wheel's job file
    assert ran.returncode == 0, ran.stderr[-4000:]
    batch = json.loads(ran.stdout)
    assert batch["batch_id"] == planned["batch_id"] and batch["status"] == "committed"
    assert batch["records_read"] == batch["records_written"] == 40
    assert (state / "tables" / "wheel" / "_delta_log").is_dir()

    verify = run(eos, "verify", "--pipeline", "wheel", timeout=600)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-4000:]
    assert json.loads(verify.stdout)["ok"] is True
