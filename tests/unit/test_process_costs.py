"""What a short process (`eos-ingest audit`) pays besides its work: GX's import and the exit.

GX's import runs with the cyclic GC paused, and the command freezes the heap before the
interpreter's shutdown collects it (bench/HISTORY.md). No Spark, no broker."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from eos_ingest import cli

REPO = Path(__file__).resolve().parents[2]

# Counts the collections that run while GX is imported, in a fresh interpreter (this one may
# have imported GX already), then prints them and whether the collector is on afterwards.
_IMPORT_PROBE = """
import gc, sys
from eos_ingest.quality.gx_import import import_gx
{before}
runs = []
gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "start" else None)
import_gx()
gc.callbacks.clear()
print(len(runs), gc.isenabled(), "great_expectations" in sys.modules)
"""


def _probe(before: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE.format(before=before)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.split()


def test_gx_is_imported_without_automatic_collections_and_the_collector_is_on_again() -> None:
    # A plain `import great_expectations` ran 769 collections (5 of the oldest generation); what
    # is left is a library's own gc.collect() call.
    runs, enabled, imported = _probe("")
    assert int(runs) <= 2
    assert (enabled, imported) == ("True", "True")


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    runs, enabled, imported = _probe("gc.disable()")
    assert int(runs) <= 2
    assert (enabled, imported) == ("False", "True")


def test_the_command_freezes_the_heap_then_exits_with_mains_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "main", lambda argv=None: 3)
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as exited:
            cli.console_main()
        assert exited.value.code == 3
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # this test process goes on collecting


def test_the_installed_command_is_console_main() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["eos-ingest"] == "eos_ingest.cli:console_main"


def test_the_spark_job_script_freezes_the_heap_then_exits_with_mains_code() -> None:
    """The spark-submit driver (spark/ingest_batch.py) skips the same teardown: its `finish`
    phase in `make bench --small` went from 1.6 to 0.7 s."""
    from eos_ingest import paths

    probe = (
        "import atexit, gc, runpy, eos_ingest.batch.job as job\n"
        "job.main = lambda: 3\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        f"runpy.run_path({str(paths.JOB_SCRIPT)!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stdout.split() == ["frozen", "True"], done.stdout


# What every CLI process and Airflow task imports before its command runs: a `run` waits beside its
# Spark driver for the whole batch, so what it holds counts in the batch's memory. Until 2026-12-07
# the audit (service/operations.py) and the table formats' readers (storage/table_formats.py)
# brought pandas, numpy and pyarrow into every command: `import eos_ingest.cli` 154 -> 59 MB of RSS
# and 1.3 -> 0.7 s of CPU. The commands that need them (audit, verify, a batch's Spark driver)
# import them when they run.
_HEAVY = ("pandas", "numpy", "pyarrow", "great_expectations", "pyspark", "deltalake", "pyiceberg")
_LEAN = (
    "eos_ingest.cli",
    "eos_ingest.service.operations",
    "eos_ingest.service.status",
    "eos_ingest.airflow.tasks",
)


def test_the_cli_and_the_service_layer_import_no_dataframe_library_nor_gx_nor_pyspark() -> None:
    probe = (
        "import importlib, json, sys\n"
        f"for name in {_LEAN!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {_HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [], "imported at the CLI's start: " + done.stdout
