"""`eos-ingest maintain` on an Iceberg pipeline (real Spark, Iceberg's JDBC catalog on the SQLite
control DB, no Kafka: the batches are planned and fenced in the control DB and their writes staged
with the Iceberg format directly, as the batch sequence stages them).

- compaction leaves one file with every row once, and the files it replaced are deleted;
- a failed attempt's unpublished branch is removed, with its files, and so are the orphan files
  of an attempt that crashed before its snapshot was committed;
- a planned batch's branch of its current fence (the running attempt's) survives maintain and
  publishes after it, while the branch of its older, fenced-out attempt is removed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from eos_ingest.cli import main as cli_main
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from eos_ingest.service.operations import maintain, open_store
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.format import IcebergFormat
from eos_ingest.storage.iceberg.refs import branch_name
from eos_ingest.storage.table_format import Replace, Txn

pytestmark = pytest.mark.integration

SCHEMA = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, batch_id BIGINT, v STRING"


def pipeline(folder: Path, name: str, table: str):
    """An Iceberg pipeline whose catalog and control DB are one SQLite file (no broker is asked)."""
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "topics": [name], "kafka": {"bootstrap.servers": "localhost:9"},
        "value": {"format": "json", "schema": "v STRING"},
        "output": {"format": "iceberg", "table": table, "path": str(folder / "wh")},
        "control_db_url": f"sqlite:///{folder / 'control.db'}", "schedule": None,
    }))  # fmt: skip
    config = load_pipeline(path)
    return config, open_store(config), IcebergFormat(IcebergCatalog.of(config))


def frame(spark, topic: str, offsets: range, batch_id: int, value: str):
    rows = [(topic, 0, o, batch_id, value) for o in offsets]
    return spark.createDataFrame(rows, SCHEMA).coalesce(1)  # one file per write


def planned(store, config, start: int, end: int):
    """A planned scheduled batch of offsets [start, end) of the pipeline's topic."""
    ranges, partition = (PlannedRange(config.name, 0, start, end),), TopicPartition(config.name, 0)
    batch, created = store.plan_scheduled(
        config.name,
        lambda committed: Plan(ranges, new_partitions=() if partition in committed else (partition,)),
    )
    assert batch is not None and created
    return batch


def main_rows(spark, fmt: IcebergFormat, table: str) -> list[tuple[int, str]]:
    found = spark.table(fmt.catalog.identifier(table)).select("kafka_offset", "v").collect()
    return sorted((r.kafka_offset, r.v) for r in found)


def refs(fmt: IcebergFormat, spark, table: str) -> set[str]:
    return {str(name) for name in fmt.catalog.java_table(spark, table).refs().keySet()}


def data_files(config) -> set[str]:
    return {p.name for p in Path(config.output.path).rglob("*.parquet")}


def replace_of(spark, config, table: str, offsets: range, batch_id: int, label: str, txn: Txn) -> Replace:
    """The replace of `offsets` of the topic's partition 0 by frame()'s rows labelled `label`."""
    rows = frame(spark, config.name, offsets, batch_id, label)
    return Replace(
        rows, table, [PlannedRange(config.name, 0, offsets.start, offsets.stop)], batch_id, txn=txn
    )


def test_maintain_compacts_and_removes_a_failed_attempt_s_branch_and_a_crashed_attempt_s_orphans(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, store, fmt = pipeline(tmp_path, "icemaint", "lake.events")
    table = config.output_tables[0]
    for i in range(2):  # two small committed writes: two files (rewrite_data_files needs 2)
        offsets = range(i * 5, i * 5 + 5)
        fmt.replace_ranges(
            spark, replace_of(spark, config, table, offsets, 100 + i, "kept", Txn(f"app{i}", 1))
        )
    # A failed attempt: staged on its branch, never published.
    failed = planned(store, config, 10, 15)
    fence = store.take_fence(failed.batch_id)
    fmt.stage(
        spark,
        replace_of(spark, config, table, range(10, 15), failed.batch_id, "failed", Txn("failed", fence)),
    )
    assert store.fail_batch(failed.batch_id, fence, "crashed")
    stale = branch_name(failed.batch_id, Txn("failed", fence))
    # A crashed attempt's file that no snapshot references (written an hour ago).
    some = next(Path(config.output.path).rglob("*.parquet"))
    orphan = some.with_name("00000-crashed-orphan.parquet")
    shutil.copy(some, orphan)
    os.utime(orphan, (time.time() - 3600, time.time() - 3600))
    before_rows = main_rows(spark, fmt, table)
    assert len(before_rows) == 10 and stale in refs(fmt, spark, table)

    assert cli_main(["maintain", "--config", str(config.source), "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["table"]["would_remove_branches"] == [stale] and dry["table"]["before"]["files"] == 2
    assert stale in refs(fmt, spark, table)  # the dry run changed nothing

    code = cli_main(["maintain", "--config", str(config.source), "--retention-hours", "0"])
    out, err = capsys.readouterr()

    assert code == 0, err
    report = json.loads(out)["table"]
    print(f"iceberg maintain: {report}")
    assert report["before"]["files"] == 2 and report["after"]["files"] == 1
    assert report["rewrite"]["rewritten_files"] == 2 and report["rewrite"]["added_files"] == 1
    assert main_rows(spark, fmt, table) == before_rows  # every row, once
    assert report["branches_removed"] == [stale] and refs(fmt, spark, table) == {"main"}
    assert report["orphan_files"] >= 1 and not orphan.exists()
    # What is left on disk is main's one file: the compacted files and the failed branch's went
    # with their expired snapshots, the orphan with remove_orphan_files.
    assert len(data_files(config)) == 1
    assert json.loads(out)["quarantine"] is None  # never written


def test_a_running_attempt_s_branch_survives_maintain_and_publishes_after_it(spark, tmp_path: Path) -> None:
    config, store, fmt = pipeline(tmp_path, "iceflight", "lake.flight")
    table = config.output_tables[0]
    fmt.replace_ranges(spark, replace_of(spark, config, table, range(5), 1, "old", Txn("first", 1)))
    batch = planned(store, config, 5, 10)
    zombie_fence, fence = store.take_fence(batch.batch_id), store.take_fence(batch.batch_id)
    running = fmt.stage(
        spark, replace_of(spark, config, table, range(5, 10), batch.batch_id, "running", Txn("b", fence))
    )
    # The older attempt, fenced out, staged after the running one was cut (a zombie).
    fmt.stage(
        spark,
        replace_of(spark, config, table, range(5, 10), batch.batch_id, "zombie", Txn("b", zombie_fence)),
    )
    zombie = branch_name(batch.batch_id, Txn("b", zombie_fence))
    assert {running.branch, zombie} <= refs(fmt, spark, table)

    report = maintain(config, store, spark)

    # The retention spares what the planned batch made: 7 days, no VACUUM lock taken.
    assert report["retention_hours"] == 168
    assert report["table"]["branches_removed"] == [zombie]
    assert report["table"]["rewrite"]["rewritten_files"] == 0  # one file: main did not move
    assert running.branch in refs(fmt, spark, table) and zombie not in refs(fmt, spark, table)
    version = running.commit()  # a fast-forward of main: fails if the branch or its history is gone
    assert version == fmt.catalog.java_table(spark, table).currentSnapshot().snapshotId()
    assert main_rows(spark, fmt, table) == [(o, "old") for o in range(5)] + [
        (o, "running") for o in range(5, 10)
    ]
