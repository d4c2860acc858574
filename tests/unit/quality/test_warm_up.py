"""Warming GX up before the gate: it opens the cached context, and never raises (the gate reports
errors). No Spark, no broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from eos_ingest.quality import context as gx_context
from eos_ingest.quality import gate as quality
from tests.helpers.gx import expecting, unchecked


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_warm_up_opens_the_gx_context_the_gate_then_reuses(tmp_path: Path) -> None:
    config = expecting(tmp_path, [])
    assert gx_context.gx_root() not in gx_context._contexts

    assert quality.warm_up(config) is True

    assert gx_context.gx_root() in gx_context._contexts
    assert (gx_context.gx_root() / "great_expectations.yml").is_file()


def test_warm_up_leaves_a_bad_expectation_for_the_gate_to_report(tmp_path: Path) -> None:
    # Made in code: a file with this type is refused when it loads.
    config = unchecked(tmp_path, [{"type": "expect_column_values_to_not_be_nul", "column": "id"}])

    assert (
        quality.warm_up(config) is False
    )  # no raise: the gate builds the suite again and raises ConfigError
