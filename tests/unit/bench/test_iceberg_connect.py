"""The Iceberg side-by-side bench's arithmetic: how a table's keys compare with Kafka's committed
view, and the README rows of both sides (a row written before eos-ingest had a side is the sink's)."""

from __future__ import annotations

import numpy as np

from bench.iceberg_connect import report
from bench.iceberg_connect.measure import compare


def test_compare_counts_duplicates_missing_and_unexpected_keys() -> None:
    expected = np.array([1, 2, 3, 4], dtype=np.int64)
    rows = np.array([1, 1, 2, 4, 9], dtype=np.int64)
    assert compare(rows, expected) == {"rows": 5, "duplicates": 1, "missing": 1, "unexpected": 1}


def test_rows_name_their_side_and_an_older_row_is_the_sinks() -> None:
    run = {"kind": "clean", "kills": [], "seconds": 12.3, "records_per_s": 1545, "snapshots": 3,
           "final": {"rows": 19000, "duplicates": 0, "missing": 0, "unexpected": 0}}  # fmt: skip
    doc = {"records_committed": 19000}
    assert report._row(doc, {**run, "side": "eos"}).startswith("| eos | 19,000 | clean | 0 | 12.3 | 1,545 |")
    assert report._row(doc, run).startswith("| connect | 19,000 |")
    assert report._versions({"versions": {}}) == "eos-ingest only"


def test_medians_are_per_size_side_and_kind_and_keep_the_worst_counts() -> None:
    def run(side: str, seconds: float, duplicates: int = 0) -> dict:
        final = {"rows": 10, "duplicates": duplicates, "missing": 0, "unexpected": 0}
        return {
            "side": side,
            "kind": "clean",
            "seconds": seconds,
            "records_per_s": int(100 / seconds),
            "final": final,
        }

    docs = [
        {"records_committed": 100, "runs": [run("eos", 1.0), run("connect", 2.0, duplicates=3)]},
        {"records_committed": 100, "runs": [run("eos", 3.0), run("connect", 4.0)]},
        {"records_committed": 100, "runs": [run("eos", 2.0)]},
        {"records_committed": 5, "runs": [run("eos", 9.0)]},
    ]
    rows = report.medians(docs)[2:]
    assert rows == [
        "| 100 | eos | clean | 3 | 2.0 | 50 | 0 | 0 |",
        "| 100 | connect | clean | 2 | 3.0 | 38 | 3 | 0 |",
        "| 5 | eos | clean | 1 | 9.0 | 11 | 0 | 0 |",
    ]
