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


def test_the_object_storage_section_shows_the_latest_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import object_storage_report

    line = {
        "at": "t", "commit": "c", "cpus": 2, "load_1m_before": 0.5, "load_1m_after": 0.6, "note": "quiet",
        "commits_per_arm": 20, "commit_ms_median_without_coordinator": 40.0, "commit_ms_median_with_coordinator": 52.5,
        "coordinator_ms_per_commit": 12.5, "commit_ms_without": [30.0, 90.0], "commit_ms_with": [45.0, 80.0],
        "batch_records_produced": 100000, "batch_records_committed": 95000, "batch_runs": 3,
        "batch_seconds_median_local": 20.1, "batch_seconds_median_s3a": 24.2,
        "batch_seconds_local": [20.1], "batch_seconds_s3a": [24.2],
    }  # fmt: skip
    results = tmp_path / "object_storage.jsonl"
    results.write_text(json.dumps({**line, "commit": "older"}) + "\n" + json.dumps(line) + "\n")
    monkeypatch.setattr(object_storage_report, "RESULTS", results)

    text = object_storage_report.render()

    assert "| Delta commit to s3a, median of 20 (ms) | 40 | 52 |" in text
    assert "difference of the medians): 12 ms" in text
    assert "| `eos-ingest run`, median of 3 (s) | 20.1 | 24.2 |" in text
    assert "older" not in text
    assert "Commits that race: without" not in text  # a run without the race


def test_the_object_storage_section_shows_the_race_and_the_race_app_reports_each_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import object_storage, object_storage_report

    line = {
        "at": "t", "commit": "c", "cpus": 2, "load_1m_before": 0.5, "load_1m_after": 0.6, "note": "",
        "commits_per_arm": 20, "commit_ms_median_without_coordinator": 40.0, "commit_ms_median_with_coordinator": 52.5,
        "coordinator_ms_per_commit": 12.5, "commit_ms_without": [30.0], "commit_ms_with": [45.0],
        "race_rounds_without_coordinator": 7, "race_commits_lost_without_coordinator": 1,
        "race_rounds_with_coordinator": 7, "race_commits_lost_with_coordinator": 0,
        "batch_records_produced": 100000, "batch_records_committed": 95000, "batch_runs": 1,
        "batch_seconds_median_local": 20.1, "batch_seconds_median_s3a": 24.2,
        "batch_seconds_local": [20.1], "batch_seconds_s3a": [24.2],
    }  # fmt: skip
    results = tmp_path / "object_storage.jsonl"
    results.write_text(json.dumps(line) + "\n")
    monkeypatch.setattr(object_storage_report, "RESULTS", results)

    assert (
        "without the coordinator 1 of 14 commits were lost in 7 rounds (each reported as a success); "
        "with it 0 of 14 in 7 rounds." in object_storage_report.render()
    )
    app_output = "committed a 0 version 1\ncommitted a 1 version 3\ncollided a 1 version 3\n"
    assert object_storage.committed_rounds(app_output) == [("a", 0), ("a", 1)]


def test_the_iceberg_growth_shows_the_latest_run_of_each_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(label: str, one: float, thousand: float, trial: bool = False) -> str:
        summary = {
            "median_s": {"1": one, "1000": thousand},
            "last_ratio": thousand / one,
            "within_target": thousand / one <= 1.2,
        }
        return json.dumps({
            "date": "2026-12-06T10:00:00Z", "commit": "c", "label": label, "load_before": [3.0], "trial": trial,
            "parameters": {"checkpoints": [1, 1000], "batch_records": 10, "runs": 5},
            "growth": {"summary": {"batch": summary, "write_phase": summary}},
        })  # fmt: skip

    lines = [
        run("before", 8.0, 20.0),
        run("after", 8.0, 16.0),
        run("after", 8.0, 8.8),
        run("after", 1.0, 9.0, True),
    ]
    (tmp_path / "iceberg_growth.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(growth_report, "RESULTS", tmp_path)

    text = growth_report.render()

    assert "| whole batch, before (c, 2026-12-06, load 3.0) | 8.00 | 20.00 | 2.50 | **no** |" in text
    assert "| whole batch, after (c, 2026-12-06, load 3.0) | 8.00 | 8.80 | 1.10 | yes |" in text
    assert "16.00" not in text and "9.00" not in text  # an older run of a label, a trial
