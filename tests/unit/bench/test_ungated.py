"""The bench's batch without the gate (bench/ungated.py) and the package it leaves alone: no
module of eos_ingest reads a bench setting, and the bench's gate step keeps the shape of the
package's seam (bench/ is outside mypy, so a change of GateStep would not show there)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import eos_ingest
from bench.ungated import UNGATED_JOB, Ungated, ungated_argv
from eos_ingest.batch.gate_step import GateStep, QualityGate
from eos_ingest.spark import submit
from tests.helpers.fake_jars import fake_jars_state

PACKAGE = Path(eos_ingest.__file__).parent


def test_no_module_of_the_package_reads_a_bench_setting() -> None:
    readers = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"EOS_BENCH|\bbench\b.*environ|environ.*\bbench\b", line, re.IGNORECASE)
    ]
    assert readers == [], "a production code path reads a benchmark's switch"


@pytest.mark.parametrize("step", ["preload", "start_count", "check"])
def test_the_bench_gate_step_takes_what_the_package_s_seam_passes(step: str) -> None:
    expected = list(inspect.signature(getattr(GateStep, step)).parameters)
    assert list(inspect.signature(getattr(Ungated, step)).parameters) == expected
    assert list(inspect.signature(getattr(QualityGate, step)).parameters) == expected


def test_the_ungated_job_is_the_package_s_command_with_only_its_script_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(fake_jars_state(tmp_path / "state")))
    pipeline = tmp_path / "orders.yaml"
    pipeline.write_text("name: orders\n")
    argv = submit.spark_submit_argv(pipeline, 7)
    swapped = ungated_argv(argv)
    assert [i for i, (a, b) in enumerate(zip(argv, swapped, strict=True)) if a != b] == [
        argv.index(str(submit.JOB_SCRIPT))
    ]
    assert str(UNGATED_JOB) in swapped and UNGATED_JOB.is_file()
    alone = [p.name for p in UNGATED_JOB.parent.glob("*.py")] == [UNGATED_JOB.name]
    assert alone, "alone in its folder: a script's folder comes first on sys.path"
