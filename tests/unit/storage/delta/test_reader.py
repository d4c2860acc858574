"""The Delta reader (the audit's) reads only the files whose Delta statistics may hold the batch's
rows, and finds the same rows as a scan of every file (delta-rs writes real Delta tables here; no
Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_ingest.control.batches import Batch
from eos_ingest.control.schema import BatchStatus
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.storage import batch_rows
from eos_ingest.storage.delta.reader import batch_files, committed_rows
from tests.helpers.batches import batch_row


@pytest.fixture(autouse=True, params=["filter", "join"])
def rows_kept_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: the batch's rows kept by the Arrow filter (few ranges), then by the join."""
    monkeypatch.setattr(batch_rows, "FILTER_MAX_RANGES", 10_000 if request.param == "filter" else -1)
    return str(request.param)


def batch(batch_id: int, *ranges: PlannedRange) -> Batch:
    return batch_row(batch_id, *ranges, status=BatchStatus.COMMITTED, fence=1)


def rows(topic: str, partition: int, offsets: range, batch_id: int) -> pa.Table:
    n = len(offsets)
    return pa.table(
        {
            "kafka_topic": [topic] * n,
            "kafka_partition": pa.array([partition] * n, pa.int32()),
            "kafka_offset": pa.array(list(offsets), pa.int64()),
            "batch_id": pa.array([batch_id] * n, pa.int64()),
            "value": [f"v{o}" for o in offsets],
        }
    )


def reference(path: Path, wanted: Batch) -> list[int]:
    """The batch's offsets by its definition, over every row of the table: inside one of its
    ranges, or carrying its id."""
    return sorted(
        row["kafka_offset"]
        for row in DeltaTable(str(path)).to_pyarrow_dataset().to_table().to_pylist()
        if row["batch_id"] == wanted.batch_id
        or any(
            (row["kafka_topic"], row["kafka_partition"]) == (r.topic, r.partition)
            and r.start <= row["kafka_offset"] < r.end
            for r in wanted.ranges
        )
    )


def kept_files(path: Path, wanted: Batch) -> int:
    """How many of the table's files the audit reads for `wanted`."""
    return len(list(batch_files(DeltaTable(str(path)), wanted).get_fragments()))


def write_files(path: Path, configuration: dict[str, str | None] | None = None) -> None:
    for table in (
        rows("t", 0, range(0, 10), 1),  # batch 1
        rows("t", 1, range(0, 10), 1),
        rows("t", 0, range(10, 20), 2),  # batch 2
        rows("t", 1, range(500, 502), 2),  # batch 2's id outside its ranges: the audit must see it
        rows("other", 0, range(10, 20), 7),  # another topic, same offsets
        rows("t", 0, range(20, 30), 3),  # batch 3
    ):
        write_deltalake(str(path), table, mode="append", configuration=configuration)


def test_only_files_that_may_hold_the_batch_are_read_and_the_rows_are_those_of_a_full_scan(
    tmp_path: Path,
) -> None:
    write_files(tmp_path)
    second = batch(2, PlannedRange("t", 0, 10, 20))

    assert kept_files(tmp_path, second) == 2  # of 6
    found = committed_rows(tmp_path, second)
    assert found is not None
    assert sorted(found.column("kafka_offset").to_pylist()) == reference(tmp_path, second)
    assert sorted(found.column("kafka_offset").to_pylist()) == [*range(10, 20), 500, 501]


def test_a_range_that_spans_files_keeps_each_of_them_and_an_empty_range_keeps_none(tmp_path: Path) -> None:
    write_files(tmp_path)
    spanning = batch(9, PlannedRange("t", 0, 5, 25), PlannedRange("t", 1, 3, 3))
    assert kept_files(tmp_path, spanning) == 3  # batch 1's, 2's and 3's files of partition 0
    found = committed_rows(tmp_path, spanning)
    assert found is not None and sorted(found.column("kafka_offset").to_pylist()) == list(range(5, 25))


def test_without_statistics_every_file_is_read(tmp_path: Path) -> None:
    write_files(tmp_path, {"delta.dataSkippingNumIndexedCols": "0"})
    second = batch(2, PlannedRange("t", 0, 10, 20))
    assert kept_files(tmp_path, second) == 6
    found = committed_rows(tmp_path, second)
    assert found is not None and found.num_rows == 12


def test_a_topic_name_with_a_quote_or_sql_words_is_a_literal(tmp_path: Path) -> None:
    # Kafka refuses such names; a name is still never read as SQL.
    for topic in ("t' OR '1'='1", "t"):
        write_deltalake(str(tmp_path), rows(topic, 0, range(0, 10), 4), mode="append")
    odd = batch(4, PlannedRange("t' OR '1'='1", 0, 0, 10))
    assert kept_files(tmp_path, odd) == 2  # both files carry batch id 4
    write_deltalake(str(tmp_path), rows("t", 0, range(0, 10), 5), mode="append")
    assert kept_files(tmp_path, batch(6, PlannedRange("t' OR '1'='1", 0, 0, 10))) == 1


def test_partition_values_that_the_log_url_encodes_are_still_found(tmp_path: Path) -> None:
    table = rows("t", 0, range(10, 20), 2).append_column("hour", pa.array(["2026-11-25 10:00:00"] * 10))
    write_deltalake(str(tmp_path), table, mode="append", partition_by=["hour"])
    write_deltalake(str(tmp_path), table.slice(0, 0), mode="append", partition_by=["hour"])
    second = batch(2, PlannedRange("t", 0, 10, 20))
    found = committed_rows(tmp_path, second)
    assert found is not None and found.num_rows == 10
    assert kept_files(tmp_path, second) == 1


def test_many_ranges_and_several_intervals_of_a_partition_find_exactly_the_batchs_rows(
    tmp_path: Path,
) -> None:
    for q in range(40):
        write_deltalake(str(tmp_path), rows("t", q, range(0, 50), 1), mode="append")
    write_deltalake(str(tmp_path), rows("u", 3, range(0, 50), 8), mode="append")  # its id, another topic
    many = batch(
        8,
        *(PlannedRange("t", q, q, q + 5) for q in range(40)),
        PlannedRange("t", 7, 30, 33),  # a second interval of partition 7
        PlannedRange("t", 99, 0, 10),  # a partition without rows
        PlannedRange("t", 2, 9, 9),  # an empty range
    )
    found = committed_rows(tmp_path, many, ["kafka_offset"])
    assert found is not None and found.column_names == ["kafka_offset"]
    expected = reference(tmp_path, many)
    assert len(expected) == 40 * 5 + 3 + 50
    assert sorted(found.column("kafka_offset").to_pylist()) == expected
