"""The chaos run's end check (bench/chaos/check.py): the comparison, the Delta log replay, and
that a planted duplicate or a removed file (a skipped range) is caught. No broker, no Spark: the
tables are written here with pyarrow and a hand-made _delta_log."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.chaos import check

T = "t"


@pytest.mark.parametrize(
    ("expected", "found", "duplicates", "missing", "unexpected"),
    [
        ({(T, 0, 0), (T, 0, 1)}, {(T, 0, 0): 1, (T, 0, 1): 1}, 0, 0, 0),
        ({(T, 0, 0), (T, 0, 1)}, {(T, 0, 0): 2, (T, 0, 1): 1}, 1, 0, 0),
        ({(T, 0, 0), (T, 0, 1)}, {(T, 0, 0): 3, (T, 0, 1): 1}, 2, 0, 0),
        ({(T, 0, 0), (T, 0, 1)}, {(T, 0, 0): 1}, 0, 1, 0),
        ({(T, 0, 0)}, {(T, 0, 0): 1, (T, 1, 0): 1}, 0, 0, 1),
        ({(T, 0, 0), (T, 0, 1)}, {(T, 0, 1): 2, (T, 0, 5): 1}, 1, 1, 1),
        (set(), {}, 0, 0, 0),
        ({(T, 0, 0)}, {}, 0, 1, 0),
    ],
)
def test_compare_counts_duplicates_missing_and_unexpected(expected, found, duplicates, missing, unexpected):
    report = check.compare(expected, Counter(found))
    assert (report["duplicates"], report["missing"], report["unexpected"]) == (
        duplicates,
        missing,
        unexpected,
    )
    assert report["expected"] == len(expected) and report["found"] == sum(found.values())


def _write_file(table: Path, name: str, partition: int, offsets: range) -> dict:
    folder = table / "event_date=2026-11-24"
    folder.mkdir(parents=True, exist_ok=True)
    rows = pa.table(
        {
            "kafka_topic": [T] * len(offsets),
            "kafka_partition": pa.array([partition] * len(offsets), pa.int32()),
            "kafka_offset": pa.array(list(offsets), pa.int64()),
            "id": pa.array(list(offsets), pa.int64()),
        }
    )
    pq.write_table(rows, folder / name)
    path = f"event_date=2026-11-24/{name}"
    return {
        "path": path.replace("=", "%3D"),  # Delta URL-encodes paths
        "partitionValues": {"event_date": "2026-11-24"},
        "size": (folder / name).stat().st_size,
        "modificationTime": 0,
        "dataChange": True,
    }


def _commit(table: Path, version: int, actions: list[dict]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """Version 0 writes offsets 0-9 of partition 0 and 0-4 of partition 1; version 1 replaces
    partition 0's file by a rewrite (what a rerun's replaceWhere does)."""
    table = tmp_path / "chaos"
    first = _write_file(table, "a.parquet", 0, range(10))
    second = _write_file(table, "b.parquet", 1, range(5))
    _commit(
        table,
        0,
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {"id": "x", "partitionColumns": ["event_date"], "configuration": {}}},
            {"add": first},
            {"add": second},
        ],
    )
    rewrite = _write_file(table, "c.parquet", 0, range(10))
    _commit(table, 1, [{"remove": {"path": first["path"], "dataChange": True}}, {"add": rewrite}])
    return table


def expected_identities() -> set[check.Identity]:
    return {(T, 0, o) for o in range(10)} | {(T, 1, o) for o in range(5)}


def test_replay_keeps_only_live_files_so_a_replaced_range_counts_once(table: Path) -> None:
    assert sorted(check.live_files(table)) == [
        "event_date=2026-11-24/b.parquet",
        "event_date=2026-11-24/c.parquet",
    ]
    report = check.compare(expected_identities(), check.table_identities([table, table.parent / "absent"]))
    assert (report["duplicates"], report["missing"], report["unexpected"]) == (0, 0, 0)


def test_planted_duplicate_file_is_caught_as_duplicates(table: Path) -> None:
    planted = check.plant_duplicate(table)
    report = check.compare(expected_identities(), check.table_identities([table]))
    assert planted > 0 and report["duplicates"] == planted
    assert report["missing"] == 0 and report["unexpected"] == 0


def test_removed_file_a_skipped_range_is_caught_as_missing(table: Path) -> None:
    planted = check.plant_missing(table)
    report = check.compare(expected_identities(), check.table_identities([table]))
    assert planted > 0 and report["missing"] == planted
    assert report["duplicates"] == 0 and report["unexpected"] == 0


def test_a_table_whose_log_does_not_start_at_zero_is_refused(table: Path) -> None:
    (table / "_delta_log" / f"{0:020d}.json").unlink()
    with pytest.raises(ValueError, match="not every version from 0"):
        check.live_files(table)


def test_a_deletion_vector_is_refused_rather_than_miscounted(table: Path) -> None:
    add = _write_file(table, "d.parquet", 1, range(5, 6))
    _commit(table, 2, [{"add": {**add, "deletionVector": {"storageType": "u"}}}])
    with pytest.raises(ValueError, match="deletion vector"):
        check.live_files(table)


def test_an_optimize_and_vacuum_commits_leave_each_identity_once(table: Path) -> None:
    """What `eos-ingest maintain` adds to the log, which the chaos run's replay must read: an
    OPTIMIZE commit (its files removed and one compacted file added, dataChange false) and VACUUM
    START/END commits (commitInfo only)."""
    live = check.live_files(table)
    compacted = _write_file(table, "compacted.parquet", 0, range(10))
    rest = _write_file(table, "compacted-1.parquet", 1, range(5))
    removes = [{"remove": {"path": add["path"], "dataChange": False}} for add in live.values()]
    adds = [{"add": {**add, "dataChange": False}} for add in (compacted, rest)]
    _commit(table, 2, [{"commitInfo": {"operation": "OPTIMIZE"}}, *removes, *adds])
    _commit(table, 3, [{"commitInfo": {"operation": "VACUUM START"}}])
    _commit(table, 4, [{"commitInfo": {"operation": "VACUUM END"}}])

    assert sorted(check.live_files(table)) == [
        "event_date=2026-11-24/compacted-1.parquet",
        "event_date=2026-11-24/compacted.parquet",
    ]
    report = check.compare(expected_identities(), check.table_identities([table]))
    assert (report["duplicates"], report["missing"], report["unexpected"]) == (0, 0, 0)


def test_maintain_outcomes_are_counted_75_is_not_a_finding_other_exits_are() -> None:
    from bench.chaos.run import maintain_counts

    def entry(outcome: str, **extra: object) -> dict:
        return {"outcome": outcome, "follow_up": False, "killed_holding_lock": None, **extra}

    counts = maintain_counts(
        [
            entry("0"),
            entry("75"),
            entry("75"),
            entry("killed", killed_holding_lock=True),
            entry("killed", killed_holding_lock=False),
            entry("stopped"),
            entry("1"),
            entry("timeout"),
        ]
    )
    assert counts == {
        "started": 8,
        "finished": 1,
        "retriable": 2,
        "killed": 2,
        "killed_holding_lock": 1,
        "stopped": 1,
        "other_exits": {"1": 1, "timeout": 1},
    }


def test_an_iceberg_tables_identities_are_counted_and_a_planted_copy_or_deletion_is_caught(
    tmp_path: Path,
) -> None:
    """An Iceberg table made here with pyiceberg in a JDBC (SQL) catalog on SQLite, as eos-ingest's
    catalog keeps it: counted once each, then a planted copy shows as 2 and a planted delete as 0."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'control.db'}"
    catalog = SqlCatalog("eos_chaos", uri=uri, warehouse=f"file://{tmp_path / 'warehouse'}")
    catalog.create_namespace("chaos")
    rows = pa.table(
        {
            "kafka_topic": pa.array([T] * 30, pa.string()),
            "kafka_partition": pa.array([p for p in (0, 1, 2) for _ in range(10)], pa.int32()),
            "kafka_offset": pa.array([o for _ in (0, 1, 2) for o in range(10)], pa.int64()),
        }
    )
    catalog.create_table("chaos.events", schema=rows.schema).append(rows)
    expected = {(T, p, o) for p in (0, 1, 2) for o in range(10)}
    tables = ["chaos.events", "chaos.events_quarantine"]  # the quarantine table does not exist: empty

    assert check.compare(expected, check.iceberg_identities(uri, "eos_chaos", tables))["found"] == 30
    assert check.compare(expected, check.iceberg_identities(uri, "eos_chaos", tables))["duplicates"] == 0

    assert check.plant_iceberg(uri, "eos_chaos", "chaos.events", "duplicate", rows=4) == 4
    report = check.compare(expected, check.iceberg_identities(uri, "eos_chaos", tables))
    assert (report["duplicates"], report["missing"]) == (4, 0)

    assert check.plant_iceberg(uri, "eos_chaos", "chaos.events", "missing", rows=3) >= 3
    report = check.compare(expected, check.iceberg_identities(uri, "eos_chaos", tables))
    assert report["missing"] == 3
