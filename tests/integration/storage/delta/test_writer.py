"""The Delta replace is the only write: concurrent first writes of one batch leave one copy, a
concurrent writer on other ranges costs a retry, not the batch, and a superseded attempt's write
is skipped by Delta itself."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from eos_ingest.errors import WriteConflictError, WriteError
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.storage.delta.writer import Txn, replace_ranges, version_written_by
from eos_ingest.storage.table_format import Replace

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
            replace_ranges(spark, Replace(rows, path, ranges, batch_id=1, partition_by=["event_date"]))
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
        spark, Replace(spark.createDataFrame([("t", 0, 1, "2026-11-22")], schema), path, ranges, batch_id=1)
    )
    stray = spark.createDataFrame([("t", 0, 99, "2026-11-22")], schema)

    with pytest.raises(WriteError):
        replace_ranges(spark, Replace(stray, path, ranges, batch_id=2))
    assert [r.kafka_offset for r in spark.read.format("delta").load(path).collect()] == [1]


SCHEMA = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, v STRING, event_date STRING"


def make_rows(spark, partition: int, value: str, offsets=range(50)):
    return spark.createDataFrame(
        [("t", partition, offset, value, "2026-11-22") for offset in offsets], SCHEMA
    ).coalesce(1)


def held_rows(spark, partition: int, value: str, folder: Path):
    """Rows whose computation, once per try of a write, signals `started-<n>` and then waits for
    `release-<n>`: the test commits a concurrent write while this writer's Delta transaction is
    open (it read the table before it computes the rows), so its commit conflicts for certain."""
    from pyspark.sql import functions as F

    def hold(v):  # no type hints: they would make Spark look for an Arrow UDF
        n = len(list(folder.glob("started-*"))) + 1
        (folder / f"started-{n}").touch()
        deadline = time.monotonic() + 120
        while not (folder / f"release-{n}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return v

    folder.mkdir(exist_ok=True)
    hold_once = F.udf(hold, "string")
    rows = spark.createDataFrame([("t", partition, 0, value, "2026-11-22")], SCHEMA).coalesce(
        1
    )  # one row: one call per try
    return rows.withColumn("v", hold_once("v"))


def wait_for(path: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def values(spark, path: str) -> dict[tuple[int, int], str]:
    return {(r.kafka_partition, r.kafka_offset): r.v for r in spark.read.format("delta").load(path).collect()}


def test_a_concurrent_replace_on_disjoint_ranges_is_retried_and_both_land_once(spark, tmp_path) -> None:
    path = str(tmp_path / "table")
    seed = make_rows(spark, 0, "seed", range(1)).union(make_rows(spark, 1, "seed", range(1)))
    replace_ranges(
        spark, Replace(seed, path, [PlannedRange("t", 0, 0, 1), PlannedRange("t", 1, 0, 1)], batch_id=1)
    )
    gate = tmp_path / "gate"
    outcome: dict[str, object] = {}

    def slow_writer() -> None:  # the loser: its transaction is open while the other one commits
        try:
            outcome["result"] = replace_ranges(
                spark,
                Replace(held_rows(spark, 0, "loser", gate), path, [PlannedRange("t", 0, 0, 1)], batch_id=2),
                attempts=3,
                backoff_s=0.1,
            )
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=slow_writer)
    thread.start()
    wait_for(gate / "started-1")
    winner = replace_ranges(
        spark, Replace(make_rows(spark, 1, "winner", range(1)), path, [PlannedRange("t", 1, 0, 1)], 3)
    )
    (gate / "release-1").touch()
    wait_for(gate / "started-2")  # the retry
    (gate / "release-2").touch()
    thread.join(timeout=300)

    assert "error" not in outcome, outcome.get("error")
    assert winner.attempts == 1
    assert outcome["result"].attempts == 2  # type: ignore[attr-defined]
    assert values(spark, path) == {(0, 0): "loser", (1, 0): "winner"}


def test_a_conflict_on_every_try_raises_a_retriable_write_conflict_and_writes_nothing(
    spark, tmp_path
) -> None:
    path = str(tmp_path / "table")
    replace_ranges(
        spark, Replace(make_rows(spark, 0, "seed", range(1)), path, [PlannedRange("t", 0, 0, 1)], batch_id=1)
    )
    gate = tmp_path / "gate"
    outcome: dict[str, object] = {}

    def loser() -> None:
        try:
            replace_ranges(
                spark,
                Replace(held_rows(spark, 0, "loser", gate), path, [PlannedRange("t", 0, 0, 1)], batch_id=2),
                attempts=2,
                backoff_s=0.1,
            )
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=loser)
    thread.start()
    for n in (1, 2):
        wait_for(gate / f"started-{n}")
        replace_ranges(
            spark,
            Replace(make_rows(spark, 1, f"other-{n}", range(1)), path, [PlannedRange("t", 1, 0, 1)], 2 + n),
        )
        (gate / f"release-{n}").touch()
    thread.join(timeout=300)

    error = outcome.get("error")
    assert isinstance(error, WriteConflictError), error
    assert error.retriable and "2 times" in str(error)
    assert values(spark, path) == {(0, 0): "seed", (1, 0): "other-2"}


def test_delta_skips_a_write_whose_fence_is_not_above_the_recorded_one_for_that_batch(
    spark, tmp_path
) -> None:
    """Delta 4.4's idempotent writes, as the job uses them: txnVersion lower or equal -> skipped."""
    path = str(tmp_path / "table")
    ranges = [PlannedRange("t", 0, 0, 50)]
    app = "eos-ingest/p/batch-7/2026-11-24T00:00:00+00:00/table"

    winner = replace_ranges(spark, Replace(make_rows(spark, 0, "winner"), path, ranges, 7, txn=Txn(app, 2)))
    zombie = replace_ranges(spark, Replace(make_rows(spark, 0, "zombie"), path, ranges, 7, txn=Txn(app, 1)))
    assert set(values(spark, path).values()) == {"winner"}
    assert (zombie.version, zombie.written_by_fence) == (winner.version, 2)

    # The same attempt again (a retry after an ambiguous failure): skipped, its version still found.
    again = replace_ranges(spark, Replace(make_rows(spark, 0, "again"), path, ranges, 7, txn=Txn(app, 2)))
    assert set(values(spark, path).values()) == {"winner"}
    assert (again.version, again.written_by_fence) == (winner.version, 2)
    assert version_written_by(path, 7) == (winner.version, 2)

    # A later batch over the same ranges (a backfill) has its own app id: never skipped.
    backfill = "eos-ingest/p/batch-8/2026-11-24T01:00:00+00:00/table"
    later = replace_ranges(
        spark, Replace(make_rows(spark, 0, "backfill"), path, ranges, 8, txn=Txn(backfill, 1))
    )
    assert set(values(spark, path).values()) == {"backfill"} and len(values(spark, path)) == 50
    assert later.version == winner.version + 1 and later.written_by_fence == 1

    # A higher fence of the first batch writes again.
    newer = replace_ranges(spark, Replace(make_rows(spark, 0, "newer"), path, ranges, 7, txn=Txn(app, 3)))
    assert set(values(spark, path).values()) == {"newer"} and newer.written_by_fence == 3
