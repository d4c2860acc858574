"""make bench's pure parts (bench/report.py): phases from log lines, medians and ratios, targets,
the README tables. Nothing here is timed: the seconds are made up."""

from __future__ import annotations

import pytest

from bench import report

CLI = "INFO eos_ingest.cli: "
JOB = "2026-11-24 23:10:01,123 INFO eos_ingest.batch.attempt: "

ONE_BATCH = [
    (1.0, CLI + "pipeline bench: phase plan"),
    (1.5, "eos-ingest: planned batch 1"),
    (2.0, CLI + "batch 1: phase submit"),
    (12.0, JOB + "batch 1: fence 1, 6 ranges"),
    (13.0, JOB + "batch 1: phase read"),
    (30.0, JOB + "batch 1: phase gate"),
    (40.0, JOB + "batch 1: phase write"),
    (50.0, JOB + "batch 1: phase written"),
    (50.5, JOB + "batch 1: phase commit"),
    (51.0, JOB + "batch 1 committed: BatchResult(batch_id=1, ...)"),
]
CATCH_UP = [
    *ONE_BATCH,
    (52.0, "2026-11-24 23:11:00,000 INFO eos_ingest.batch.job: pipeline bench: phase plan"),
    (52.5, JOB + "batch 2: phase read"),
    (60.0, JOB + "batch 2: phase gate"),
    (62.0, JOB + "batch 2: phase write"),
    (66.0, JOB + "batch 2: phase written"),
    (66.0, JOB + "batch 2: phase commit"),
    (66.5, JOB + "batch 2 committed: BatchResult(batch_id=2, ...)"),
]


@pytest.mark.parametrize(
    ("lines", "end", "expected"),
    [
        # One batch: each phase runs from its line to the next; finish runs to the process end.
        (ONE_BATCH, 55.0, {"start": 1.0, "plan": 1.0, "spark_start": 11.0, "read": 17.0, "gate": 10.0,
                           "write": 10.0, "check": 0.5, "commit": 0.5, "finish": 4.0}),
        # A catch-up: the phases of every batch are summed; the job's own plan line counts as plan.
        (CATCH_UP, 70.0, {"start": 1.0, "plan": 1.5, "spark_start": 11.0, "read": 24.5, "gate": 12.0,
                          "write": 14.0, "check": 0.5, "commit": 1.0, "finish": 4.5}),
        # No phase line at all (a process that logs none): everything is start.
        ([(0.5, "some other line"), (3.0, "WARN spark: whatever")], 9.0,
         {"start": 9.0} | dict.fromkeys(report.PHASES[1:], 0.0)),
        # Gate off: no gate work between the lines, the phases still line up.
        ([(0.2, CLI + "pipeline p: phase plan"), (1.0, CLI + "batch 3: phase submit"),
          (9.0, JOB + "batch 3: phase read"), (20.0, JOB + "batch 3: phase gate"),
          (20.1, "WARNING bench.ungated: batch 3: the quality gate is OFF"),
          (20.2, JOB + "batch 3: phase write")], 30.0,
         {"start": 0.2, "plan": 0.8, "spark_start": 8.0, "read": 11.0, "gate": 0.2, "write": 9.8,
          "check": 0.0, "commit": 0.0, "finish": 0.0}),
    ],
)  # fmt: skip
def test_phase_seconds_from_log_lines(lines, end, expected):
    assert report.phase_seconds(lines, end) == pytest.approx(expected)


def test_seconds_per_batch_keeps_each_batch_of_a_catch_up_apart():
    # Read: 17.0 s in batch 1 (ONE_BATCH), 7.5 s in batch 2; summed, phase_seconds says 24.5.
    assert report.seconds_per_batch(CATCH_UP, 70.0, "read") == [17.0, 7.5]
    assert report.seconds_per_batch(ONE_BATCH, 55.0, "gate") == [10.0]
    assert report.seconds_per_batch([(0.5, "no phase line")], 9.0, "read") == []


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("2026-11-24 23:10:01,123 INFO eos_ingest.batch.attempt: batch 12: phase gate", "gate"),
        ("INFO eos_ingest.cli: pipeline my-pipe: phase plan", "plan"),
        ("INFO eos_ingest.cli: batch 7: phase submit", "submit"),
        (
            "2026-11-24 23:10:01,123 INFO eos_ingest.batch.attempt: batch 7 committed: BatchResult(...)",
            "committed",
        ),
        ("2026-11-24 23:10:01,123 INFO eos_ingest.batch.attempt: batch 7: fence 3, 6 ranges", None),
        ("batch 7: phase unknown_thing", None),
        ("eos-ingest: planned batch 7", None),
    ],
)
def test_phase_markers_recognise_the_job_and_cli_lines(text, marker):
    found = report.phase_markers([(1.0, text)])
    assert found == ([] if marker is None else [(1.0, marker)])


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([{"seconds": 3.0}, {"seconds": 1.0}, {"seconds": 2.0}], {"seconds": 2.0, "runs": 3}),
        ([{"seconds": 1.0}, {"seconds": 4.0}], {"seconds": 2.5, "runs": 2}),
        ([{"seconds": 5.0, "note": "text is not a figure", "ok": True}], {"seconds": 5.0, "runs": 1}),
        (
            [{"seconds": 10.0, "phases": {"gate": 4.0, "read": 1.0}},
             {"seconds": 30.0, "phases": {"gate": 2.0, "read": 3.0}},
             {"seconds": 20.0, "phases": {"gate": 3.0}}],
            {"seconds": 20.0, "runs": 3, "phases": {"gate": 3.0, "read": 1.0}},
        ),
        # A figure a system does not have (no JVM in a raw consume) stays None, not 0.
        ([{"seconds": 1.0, "peak_rss_jvm_mb": None}, {"seconds": 3.0, "peak_rss_jvm_mb": None}],
         {"seconds": 2.0, "peak_rss_jvm_mb": None, "runs": 2}),
        ([], {}),
    ],
)  # fmt: skip
def test_medians_per_field_and_per_phase(runs, expected):
    assert report.medians(runs) == expected


@pytest.mark.parametrize(
    ("over", "under", "expected"),
    [
        ({"records_per_s": 900.0}, {"records_per_s": 1000.0}, 0.9),
        ({"records_per_s": 1000.0}, {"records_per_s": 3000.0}, 0.333),
        ({"records_per_s": 1000.0}, {}, None),
        ({}, {"records_per_s": 1.0}, None),
        ({"records_per_s": 5.0}, {"records_per_s": 0.0}, None),
    ],
)
def test_ratio_is_records_per_second_over_records_per_second(over, under, expected):
    assert report.ratio(over, under) == expected


def test_throughput_from_records_bytes_and_seconds():
    assert report.throughput(1_000_000, 200_000_000, 50.0) == {
        "seconds": 50.0,
        "records_per_s": 20_000.0,
        "mb_per_s": 4.0,
    }


def full_result(d_s: float, b_s: float, gate_s: float, audit_s: float, records: int = 1_000_000) -> dict:
    med = {
        "a": report.throughput(records, records * 200, 8.0),
        "b": report.throughput(records, records * 200, b_s),
        "d": {**report.throughput(records, records * 200, d_s), "phases": {"gate": gate_s, "read": 20.0}},
        "f": report.throughput(records, records * 200, audit_s),
    }
    return {"mode": "full", "records_committed": records, "medians": med, "runs": 3, "partitions": 6}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (full_result(d_s=50.0, b_s=49.5, gate_s=4.0, audit_s=5.0),
         {"d/b": (0.99, True), "gate share of (d)": (0.08, True), "audit (f) vs (d)": (0.1, True)}),
        (full_result(d_s=85.6, b_s=49.5, gate_s=36.5, audit_s=30.0),
         {"d/b": (0.578, False), "gate share of (d)": (0.426, False), "audit (f) vs (d)": (0.35, False)}),
        ({"mode": "small", "records_committed": 9_500,
          "medians": {"b": {"seconds": 40.0}, "d": {"seconds": 50.0}, "g": {"seconds": 61.0}}},
         {"10k batch vs plain Spark": (1.25, True), "DAG run of 10k": (61.0, False)}),
        ({"mode": "small", "records_committed": 9_500, "medians": {"b": {"seconds": 40.0}}}, {}),
    ],
)  # fmt: skip
def test_targets_measured_and_met(result, expected):
    found = {t["target"]: (t["measured"], t["met"]) for t in report.targets(result)}
    assert found == expected


def test_targets_say_when_the_run_is_too_small_for_the_ratio_target():
    (db,) = [t for t in report.targets(full_result(50, 50, 1, 1, records=95_000)) if t["target"] == "d/b"]
    assert "only 95,000 records" in db["note"]


def test_readme_table_has_a_row_per_system_measured_in_order():
    result = full_result(d_s=80.0, b_s=40.0, gate_s=8.0, audit_s=4.0)
    result["medians"]["d"].update(peak_rss_jvm_mb=1234, peak_rss_python_mb=321)
    table = report.render_table(result).splitlines()
    assert table[0].startswith("| | system | seconds | records/s | MB/s |")
    assert [row.split("|")[1].strip() for row in table[2:]] == ["a", "b", "d", "f"]
    d_row = next(row for row in table if row.startswith("| d |"))
    assert "| 80.0 | 12,500 | 2.50 | 1,234 | 321 |" in d_row
    assert next(row for row in table if row.startswith("| f |")).endswith("| - | - |")


def test_readme_section_shows_ratios_phases_and_targets():
    result = full_result(d_s=80.0, b_s=40.0, gate_s=8.0, audit_s=4.0)
    result.update(label="development run", file="bench/results/bench-x.json", machine={"cores": 2})
    text = report.render_result(result, "Side by side")
    assert "d/b = 0.500" in text and "d/a = 0.100" in text and "d/c = -" in text
    assert "| gate | 8.0 |" in text and "| **total** | 80.0 |" in text
    assert "| d/b | >= 0.9 | 0.500 | **no** |" in text
    assert "| gate share of (d) | <= 10% | 0.100 | yes |" in text
    assert "development run" in text


def test_readme_section_names_a_failed_system():
    result = full_result(d_s=80.0, b_s=40.0, gate_s=8.0, audit_s=4.0)
    result["errors"] = [{"system": "g", "run": 1, "error": "airflow.sh up failed:\nlong tail"}]
    assert "Failed: (g) run 1: airflow.sh up failed:" in report.render_result(result, "x")


def test_the_iceberg_ratio_is_eos_ingest_over_the_sink_in_records_per_second():
    med = {"i": {"records_per_s": 50_000.0}, "j": {"records_per_s": 40_000.0}}
    assert report.ratios(med)["i/j"] == 1.25
    assert report.ratios({"i": med["i"]})["i/j"] is None


def iceberg_result(i_s: float, j_s: float, produced: int = 1_000_000) -> dict:
    records = produced * 95 // 100
    med = {key: report.throughput(records, records * 200, s) for key, s in (("i", i_s), ("j", j_s))}
    return {"mode": "full", "records_produced": produced, "records_committed": records, "medians": med}


@pytest.mark.parametrize(
    ("i_s", "j_s", "measured", "met"),
    [(16.0, 16.7, 1.044, True), (21.7, 16.7, 0.77, False), (20.0, 20.0, 1.0, True)],
)
def test_iceberg_target_is_eos_ingest_at_least_as_fast_as_the_sink(i_s, j_s, measured, met):
    (row,) = report.targets(iceberg_result(i_s, j_s))
    assert (row["target"], row["wanted"], row["measured"], row["met"]) == (
        "Iceberg i/j",
        ">= 1.0",
        measured,
        met,
    )
    assert "the sink's worker started before the clock" in row["note"]
    assert "only" not in row["note"]


def test_iceberg_target_says_when_the_run_is_smaller_than_1m_and_needs_both_sides():
    (row,) = report.targets(iceberg_result(10.0, 12.0, produced=20_000))
    assert row["note"].startswith("only 20,000 records: the target is on >= 1M")
    one_side = iceberg_result(10.0, 12.0)
    del one_side["medians"]["j"]
    assert report.targets(one_side) == []


def one_batch_result(
    d_s: float, g_s: float | None, python_mb: float | None, produced: int = 1_000_000
) -> dict:
    records = produced * 95 // 100
    med = {"d": {**report.throughput(records, records * 200, d_s), "peak_rss_python_mb": python_mb}}
    if g_s is not None:
        med["g"] = report.throughput(records, records * 200, g_s)
    return {"mode": "full", "records_produced": produced, "records_committed": records, "medians": med}


@pytest.mark.parametrize(
    ("d_s", "g_s", "python_mb", "expected"),
    [
        (24.8, 29.0, 280.0, {"DAG run vs `eos-ingest run`": (1.169, True), "peak RSS Python of (d)": (280.0, True)}),
        (24.8, 39.2, 601.0, {"DAG run vs `eos-ingest run`": (1.581, False), "peak RSS Python of (d)": (601.0, False)}),
        (20.0, 24.0, 300.0, {"DAG run vs `eos-ingest run`": (1.2, True), "peak RSS Python of (d)": (300.0, True)}),
        # No DAG run in the result (--no-dag), no RSS figure: those rows are left out.
        (24.8, None, None, {}),
    ],
)  # fmt: skip
def test_dag_over_run_and_python_rss_targets_of_a_1m_batch(d_s, g_s, python_mb, expected):
    found = {
        t["target"]: (t["measured"], t["met"]) for t in report.targets(one_batch_result(d_s, g_s, python_mb))
    }
    assert found == expected


def test_one_batch_targets_on_fewer_than_1m_say_so_and_small_runs_have_none_of_them():
    notes = {
        t["target"]: t["note"] for t in report.targets(one_batch_result(10.0, 11.0, 250.0, produced=20_000))
    }
    assert notes["DAG run vs `eos-ingest run`"].startswith("only 20,000 records")
    assert notes["peak RSS Python of (d)"].startswith("only 20,000 records")
    small = {**one_batch_result(10.0, 11.0, 250.0, produced=10_000), "mode": "small"}
    assert {t["target"] for t in report.targets(small)} == {"DAG run of 10k"}


@pytest.mark.parametrize(("g_s", "met"), [(14.9, True), (15.0, True), (15.1, False), (21.1, False)])
def test_dag_run_of_10k_is_wanted_within_15_seconds(g_s, met):
    result = {"mode": "small", "records_committed": 9_500, "medians": {"g": {"seconds": g_s}}}
    (row,) = report.targets(result)
    assert (row["target"], row["wanted"], row["met"]) == ("DAG run of 10k", "trigger -> success <= 15 s", met)


@pytest.mark.parametrize(
    ("produced", "batches", "shaped"),
    [(5_000_000, 5, True), (5_000_000, 10, False), (1_000_000, 5, False), (1_000_000, 1, False)],
)
def test_catch_up_target_names_its_shape_5m_in_batches_of_1m(produced, batches, shaped):
    records = produced * 95 // 100
    med = {k: report.throughput(records, records * 200, s) for k, s in (("b", 34.7), ("h", 51.0))}
    result = {"mode": "catch_up", "records_produced": produced, "records_committed": records,
              "catch_up_batches": batches, "medians": med}  # fmt: skip
    (row,) = report.targets(result)
    assert (row["target"], row["measured"], row["met"]) == ("catch-up h/b", 0.68, False)
    assert ("the target is 5M in batches of 1M" not in row["note"]) == shaped
    assert row["note"].startswith(f"{records:,} records in {batches} batches")


def test_ratios_line_shows_i_over_j_only_when_both_were_measured():
    without = full_result(d_s=80.0, b_s=40.0, gate_s=8.0, audit_s=4.0)
    assert "i/j" not in report.render_ratios(without)
    with_iceberg = {**without, "medians": {**without["medians"], **iceberg_result(20.0, 16.0)["medians"]}}
    assert report.render_ratios(with_iceberg).endswith("i/j = 0.800")


def test_readme_section_shows_the_worst_duplicate_and_missing_counts_of_the_iceberg_tables():
    result = {**iceberg_result(20.0, 16.0), "runs": 3, "partitions": 6}
    result["every_run"] = {
        "i": [{"duplicates": 0, "missing": 0}] * 3,
        "j": [{"duplicates": 0, "missing": 0}, {"duplicates": 7, "missing": 0}],
    }
    text = report.render_result(result, "Iceberg")
    assert (
        "read_committed view: (i) at most 0 duplicates and 0 missing in 3 run(s); "
        "(j) at most 7 duplicates and 0 missing in 2 run(s)." in text
    )
    assert "| i | `eos-ingest run` into an Iceberg table" in text
    assert "| Iceberg i/j | >= 1.0 | 0.800 | **no** |" in text
    assert "read back" not in report.render_result(full_result(80.0, 40.0, 8.0, 4.0), "Delta")
