"""verify can fail (duplicates, missing, unexpected) on a Delta and on an Iceberg table, and
exactly-once holds at 100,000+ records."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from eos_ingest.cli import open_store
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import ControlStoreUnavailableError, KafkaUnavailableError
from eos_ingest.kafka.offsets import fetch_partition_offsets
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.fixtures.pipelines import ingest_once, on_formats, verify_pipeline
from tests.helpers.kafka import TxProducer
from tests.helpers.ports import free_port

pytestmark = pytest.mark.integration
sqlite_only = pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": float(i)} for i in range(start, start + count)]


def sql_table(config) -> str:
    """The output table as Spark SQL names it: Delta's by its path, Iceberg's in its catalog."""
    if config.output.format == "iceberg":
        return IcebergCatalog.of(config).identifier(config.output.table)
    return f"delta.`{config.output_path}`"


@sqlite_only
@on_formats()
def test_verify_reports_duplicates_missing_and_unexpected_rows(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.begin()
    producer.send(topic, rows(0, 20), partition=0)
    producer.send(topic, rows(20, 20), partition=1)
    producer.commit()
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)
    assert verify_pipeline(spark, config).ok

    # Behind the pipeline's back, with Spark SQL on the table in its own format: a copy of 3
    # rows, 2 rows deleted, 1 row from nowhere.
    table = sql_table(config)
    spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE kafka_partition = 0 LIMIT 3")
    spark.sql(f"DELETE FROM {table} WHERE kafka_partition = 1 AND kafka_offset IN (0, 1)")
    columns = [
        "CAST(999999 AS BIGINT) AS kafka_offset" if c == "kafka_offset" else c
        for c in spark.table(table).columns
    ]
    spark.sql(f"INSERT INTO {table} SELECT {', '.join(columns)} FROM {table} LIMIT 1")

    report = verify_pipeline(spark, config)

    assert (report.duplicates, report.missing, report.unexpected) == (3, 2, 1), report.to_dict()
    assert not report.ok
    assert report.examples["unexpected"] == [(topic, report.examples["unexpected"][0][1], 999999)]


@sqlite_only
def test_verify_command_exits_non_zero_when_the_output_is_wrong(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 10), commit=True)
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)

    def run_verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eos_ingest.cli", "verify", "--config", str(config.source)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    # Right: 0, in this process (the CLI's process is the subject below, where the exit code must
    # reach the shell; a whole `eos-ingest verify` process costs ~17 s here).
    from eos_ingest.cli import main

    assert main(["verify", "--config", str(config.source)]) == 0
    assert json.loads(capsys.readouterr().out)["expected"] == 10
    table = str(config.output_path)
    spark.read.format("delta").load(table).limit(2).write.format("delta").mode("append").save(table)
    bad = run_verify()
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["duplicates"] == 2


@sqlite_only
def test_verify_in_a_process_with_a_session_leaves_that_session_running(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    # In-process (a notebook, a test), `verify` used to stop the session it had been handed by
    # getOrCreate, and the owner's next Spark step failed on a stopped SparkContext.
    from eos_ingest.cli import main

    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 5), commit=True)
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)

    assert main(["verify", "--config", str(config.source)]) == 0
    assert json.loads(capsys.readouterr().out)["expected"] == 5
    assert spark.range(3).count() == 3


@sqlite_only
def test_100k_records_over_6_partitions_in_several_batches_end_with_no_duplicates_or_gaps(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=6)
    producer = TxProducer(kafka_bootstrap)
    next_id = 0
    for round_no in range(24):
        producer.transaction(topic, rows(next_id, 5000), commit=True)
        next_id += 5000
        if round_no % 4 == 0:
            producer.transaction(topic, rows(10_000_000, 500), commit=False)
    config = make_pipeline([topic], control_db_url, max_records_per_partition=7000)

    batches = []
    while (result := ingest_once(spark, config)) is not None:
        batches.append(result)

    assert len(batches) >= 3
    assert sum(b.records_read for b in batches) == 120_000
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 120_000, report.to_dict()
    ids = (
        spark.read.format("delta")
        .load(str(config.output_path))
        .selectExpr("count(*)", "count(distinct id)", "max(id)")
        .first()
    )
    assert tuple(ids) == (120_000, 120_000, 119_999)


@sqlite_only
def test_unreachable_broker_gives_a_retriable_error_within_bounded_time(
    make_pipeline, control_db_url
) -> None:
    config = make_pipeline(
        ["nowhere"], control_db_url, kafka={"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    )
    started = time.monotonic()

    with pytest.raises(KafkaUnavailableError) as unavailable:
        # The defaults (retries within 30 s in total) suit production; small bounds keep the test short.
        fetch_partition_offsets(config.kafka_settings, config.topics, timeout_s=2, attempts=2, backoff_s=0.1)

    assert time.monotonic() - started < 30
    assert "127.0.0.1" in str(unavailable.value) and unavailable.value.retriable
    assert open_store(config).list_batches(config.name) == []


def test_unreachable_control_db_gives_a_retriable_error_naming_it(tmp_path) -> None:
    url = f"postgresql+psycopg://eos:s3cret@127.0.0.1:{free_port()}/control"
    started = time.monotonic()

    with pytest.raises(ControlStoreUnavailableError) as unavailable:
        ControlStore(url).ensure_schema()

    assert time.monotonic() - started < 60
    assert "127.0.0.1" in str(unavailable.value) and "s3cret" not in str(unavailable.value)


def test_pipeline_loads_by_path_for_the_cli(make_pipeline, tmp_path) -> None:
    config = make_pipeline(["t"], f"sqlite:///{tmp_path}/c.db")
    assert load_pipeline(config.source).name == config.name
