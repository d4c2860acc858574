"""bench/README.md's growth section names each figure against its target, from the result files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import growth_report


def summary(one: float, hundred: float) -> dict:
    return {
        "median_s": {"1": one, "100": hundred},
        "last_ratio": hundred / one,
        "within_target": hundred / one <= 1.2,
    }


def test_each_growth_figure_is_shown_with_whether_it_met_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = {
        "date": "d", "commit": "c", "load_before": [0.5], "trial": None,
        "parameters": {"checkpoints": [1, 100], "batch_records": 10000, "partitions": 6, "runs": 3},
        "growth": {"summary": {"replace_table": summary(1.0, 1.1), "audit": summary(0.4, 0.9)}},
        "memory": {
            "sizes": [
                {"records_committed": 475000, "recount": {"peak_rss_mb": 145}, "verify": {"peak_rss_python_mb": 251, "peak_rss_jvm_mb": 1039, "seconds": 22.7}},
            ],
            "ratio_largest_over_smallest": {"records": 10.0, "recount_peak_rss": 1.04, "verify_peak_rss_python": 1.08, "verify_peak_rss_jvm": 1.45},
        },
    }  # fmt: skip
    trial = {**doc, "trial": True, "growth": {"summary": {"replace_table": summary(1.0, 9.0)}}}
    (tmp_path / "table_growth.jsonl").write_text(json.dumps(doc) + "\n" + json.dumps(trial) + "\n")
    monkeypatch.setattr(growth_report, "RESULTS", tmp_path)

    text = growth_report.render()

    assert "| Delta replace of the table | 1.00 | 1.10 | 1.10 | yes |" in text  # the trial is not shown
    assert "| audit (read with delta-rs + GX validation) | 0.40 | 0.90 | 2.25 | **no** |" in text
    assert "| 475,000 | 145 | 251 | 1039 | 22.7 |" in text


def test_without_results_the_section_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(growth_report, "RESULTS", tmp_path)
    assert "No growth run yet." in growth_report.render()
