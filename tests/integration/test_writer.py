"""The Delta replace is the only write: concurrent first writes of one batch leave one copy."""

from __future__ import annotations

import threading

import pytest

from eos_ingest.errors import WriteError
from eos_ingest.planner import PlannedRange
from eos_ingest.writer import replace_ranges

pytestmark = pytest.mark.integration


def test_two_concurrent_first_writes_of_a_batch_to_a_new_table_leave_one_copy(spark, tmp_path) -> None:
    rows = spark.createDataFrame(
        [("t", 0, offset, "2026-11-22") for offset in range(50)],
        "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, event_date STRING",
    )
    ranges = [PlannedRange("t", 0, 0, 50)]
    path = str(tmp_path / "new_table")
    start = threading.Barrier(2)
    errors: list[Exception] = []

    def attempt() -> None:
        start.wait()
        try:
            replace_ranges(spark, rows, path, ranges, batch_id=1, partition_by=["event_date"])
        except WriteError as exc:  # the loser of the race may be refused; it must not duplicate
            errors.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    table = spark.read.format("delta").load(path)
    assert table.count() == 50, errors
    assert table.select("kafka_offset").distinct().count() == 50


def test_a_row_outside_the_batch_ranges_fails_the_write(spark, tmp_path) -> None:
    schema = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, event_date STRING"
    path = str(tmp_path / "table")
    ranges = [PlannedRange("t", 0, 0, 50)]
    replace_ranges(
        spark, spark.createDataFrame([("t", 0, 1, "2026-11-22")], schema), path, ranges, batch_id=1
    )
    stray = spark.createDataFrame([("t", 0, 99, "2026-11-22")], schema)

    with pytest.raises(WriteError):
        replace_ranges(spark, stray, path, ranges, batch_id=2)
    assert [r.kafka_offset for r in spark.read.format("delta").load(path).collect()] == [1]
