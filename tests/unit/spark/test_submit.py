"""The spark-submit command line: what it ships (package zip, pipeline file) and what argv holds."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eos_ingest.spark import submit
from tests.helpers.fake_jars import fake_jars_state


@pytest.fixture
def jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = fake_jars_state(tmp_path / "state")
    monkeypatch.setenv("EOS_STATE_DIR", str(state))
    return state


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize(
    ("master", "until_caught_up", "job_tail"),
    [
        ("local[*]", False, ["--config-file", "orders.yaml", "--batch-id", "7"]),
        ("spark://127.0.0.1:7077", False, ["--config-file", "orders.yaml", "--batch-id", "7"]),
        ("yarn", True, ["--config-file", "orders.yaml", "--batch-id", "7", "--until-caught-up"]),
        ("k8s://https://10.0.0.1:6443", False, ["--config-file", "orders.yaml", "--batch-id", "7"]),
    ],
)
def test_the_pipeline_file_and_the_package_are_shipped_and_argv_names_the_file_only(
    jars: Path, tmp_path: Path, master: str, until_caught_up: bool, job_tail: list[str]
) -> None:
    yaml_file = tmp_path / "pipelines" / "orders.yaml"
    yaml_file.parent.mkdir()
    yaml_file.write_text("name: orders\nkafka: {sasl.password: s3cret}\n")
    argv = submit.spark_submit_argv(yaml_file, 7, master=master, until_caught_up=until_caught_up)

    assert _value(argv, "--master") == master
    assert _value(argv, "--files") == str(yaml_file.resolve())
    py_files = Path(_value(argv, "--py-files"))
    assert py_files.parent == jars / "py-files" and py_files.name.startswith("eos_ingest-")
    assert _value(argv, "--name") == "eos-ingest orders batch 7"
    assert argv[-len(job_tail) :] == job_tail
    assert argv[-len(job_tail) - 1] == str(submit.JOB_SCRIPT)
    assert not any("s3cret" in a for a in argv), "the file's text never reaches argv"


def test_the_package_zip_is_built_once_per_content_and_imports_from_the_zip(tmp_path: Path) -> None:
    first = submit.package_zip(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert submit.package_zip(tmp_path) == first and first.stat().st_mtime_ns == mtime, "cached"
    names = set(zipfile.ZipFile(first).namelist())
    assert {"eos_ingest/__init__.py", "eos_ingest/batch/job.py", "eos_ingest/spark/submit.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert not list(first.parent.glob(".eos_ingest-*")), "no temporary file left"
    # Python imports the package from the zip alone (as the executors do).
    probe = "import eos_ingest.plan.ranges as p, sys; print(p.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe], env={"PYTHONPATH": str(first)}, cwd=tmp_path,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip().startswith(str(first))
    # Laid out as the wheel: the top-level expectations/ and spark/ inside, and read from there
    # by a driver that imports the package from the zip (cluster deploy mode).
    assert {
        "eos_ingest/expectations/suites/eos_default.json",
        "eos_ingest/spark_job/ingest_batch.py",
    } <= names
    probe = "import json; from eos_ingest import paths; print(json.loads(paths.shipped_text(paths.DEFAULT_SUITE))['name'])"
    out = subprocess.run(
        [sys.executable, "-c", probe], env={"PYTHONPATH": str(first)}, cwd=tmp_path,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "eos_default"


def test_a_changed_package_gets_a_new_zip_and_the_same_content_the_same_bytes(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("A = 1\n")
    first = submit.package_zip(tmp_path / "a", package)
    again = submit.package_zip(tmp_path / "b", package)
    assert first.name == again.name and first.read_bytes() == again.read_bytes(), "reproducible"
    (package / "__init__.py").write_text("A = 2\n")
    changed = submit.package_zip(tmp_path / "a", package)
    assert changed.name != first.name and first.exists()
