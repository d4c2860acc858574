"""An ingest and an overlapping backfill at the same time on one table, each an `eos-ingest`
process with its own Spark application, on both table formats: Delta's commits meet in its log,
Iceberg's publishes in the catalog (the JDBC catalog on the SQLite control DB, what a pipeline gets
by default). Each must exit 0 (a lost race costs a retry), and every committed record must be in
the table exactly once, as verify's read_committed rescan of the topic finds it.

On an s3a table the same race goes through the control DB as Delta's commit coordinator:
tests/integration/storage/test_s3a_operations.py (its second batch)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from tests.fixtures.pipelines import ingest_once, on_cases, table_rows, verify_pipeline
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": 1.0} for i in range(start, start + count)]


@on_cases(("sqlite", "delta"), ("sqlite", "iceberg"))
def test_an_ingest_and_an_overlapping_backfill_at_once_both_commit_and_leave_one_copy(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    for partition in (0, 1):
        producer.transaction(topic, rows(1000 * partition, 150), commit=True, partition=partition)
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None  # offsets 0-150 (the marker) committed
    for partition in (0, 1):  # new records for the ingest; the backfill replaces committed ones
        producer.transaction(topic, rows(1000 * partition + 150, 100), commit=True, partition=partition)

    cli = [sys.executable, "-m", "eos_ingest.cli"]
    commands = {
        "ingest": ["run", "--config", str(config.source), "--master", "local[1]"],
        "backfill": ["backfill", "--config", str(config.source), "--master", "local[1]", "--topic", topic,
                     "--partitions", "0,1", "--start-offset", "20", "--end-offset", "140",
                     "--reason", "overlap"],
    }  # fmt: skip
    procs = {}
    for name, args in commands.items():  # both at once
        log = (tmp_path / f"{name}.log").open("w")
        procs[name] = subprocess.Popen([*cli, *args], stdout=log, stderr=subprocess.STDOUT, text=True)
    for name, proc in procs.items():
        proc.wait(timeout=600)
        output = (tmp_path / f"{name}.log").read_text()
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output[-5000:]}"

    found = Counter(
        (r.kafka_partition, r.kafka_offset)
        for r in table_rows(spark, config).select("kafka_partition", "kafka_offset").collect()
    )
    assert len(found) == 500 and set(found.values()) == {1}  # 2 x (150 + 100), no copy twice
    report = verify_pipeline(spark, config)  # an independent read_committed rescan of the topic
    assert report.ok and report.expected == 500, report.to_dict()
