"""The quality gate and audit: every check can fail, and the failure names the expectation.

Real broker, Spark, Delta and control DB. Most tests run on SQLite only (the GX work is the same
on both backends); the ones that store results on the batch row run on both.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future
from pathlib import Path

import pytest

from eos_ingest import cli
from eos_ingest.batch.job import run_job
from eos_ingest.cli import open_store, plan_batch
from eos_ingest.control.store import BatchStatus
from eos_ingest.errors import QualityGateError
from eos_ingest.kafka.committed_counts import read_committed_counts
from eos_ingest.plan.ranges import merge_ranges
from eos_ingest.quality import context as gx_context
from eos_ingest.quality import gate as quality
from eos_ingest.quality.audit import audit_batch
from eos_ingest.service.verify import read_committed_identities
from eos_ingest.spark import submit
from tests.fixtures.pipelines import ingest_once
from tests.fixtures.postgres import on_control_db
from tests.helpers.fresh_python import python_stdout
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration
sqlite_only = pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)

UNIQUE = "expect_compound_columns_to_be_unique(kafka_topic, kafka_partition, kafka_offset)"
IN_RANGES = "expect_column_values_to_be_null(eos_outside_planned_ranges)"
COUNT = "expect_table_row_count_to_equal"


@pytest.fixture(autouse=True)
def gx_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GX results and Data Docs of this test under its tmp_path, not the developer's state folder
    (EOS_STATE_DIR stays as it is: the broker, PostgreSQL and the Spark jars live there)."""
    root = tmp_path / "gx"
    monkeypatch.setattr(gx_context, "gx_root", lambda: root)
    return root


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, **overrides):
    """A pipeline with one committed batch of 2 partitions: 12 good records, 1 that does not parse,
    and an aborted transaction in between (so offsets have gaps)."""
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 6), commit=True, partition=0)
    producer.transaction(topic, rows(100, 4), commit=False, partition=0)
    producer.transaction(topic, [*rows(6, 6), b"not json"], commit=True, partition=1)
    config = make_pipeline([topic], control_db_url, **overrides)
    result = ingest_once(spark, config)
    assert result is not None and (result.records_written, result.records_quarantined) == (12, 1)
    return topic, config, result.batch_id


def table(spark, config):
    return spark.read.format("delta").load(str(config.output_path))


@on_control_db("postgresql")
def test_audit_passes_after_a_normal_batch_and_is_stored_on_the_batch(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    _, config, batch_id = committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)

    report = audit_batch(config, batch_id)

    assert report["success"] is True, report
    assert report["batch_id"] == batch_id and report["failed_expectations"] == []
    stats = report["statistics"]
    assert (stats["rows"], stats["quarantined_rows"], stats["read_committed_records"]) == (12, 1, 13)
    assert stats["evaluated_expectations"] == stats["successful_expectations"] == 6
    page = Path(report["report_path"])
    assert page.is_file() and page.suffix == ".html"
    assert f"{config.name}-batch-{batch_id}-audit" in str(page)  # run name: pipeline and batch id
    assert page.is_relative_to(gx_context.gx_root()) and gx_context.data_docs_index().is_file()
    batch = open_store(config).get_batch(batch_id)
    assert batch.dq_success is True and batch.dq_report_path == report["report_path"]
    assert json.loads(batch.dq_result or "{}")["batch_id"] == batch_id


@sqlite_only
def test_audit_fails_on_rows_duplicated_behind_the_pipelines_back(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    _, config, batch_id = committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    table(spark, config).limit(3).write.format("delta").mode("append").save(str(config.output_path))

    report = audit_batch(config, batch_id)

    assert report["success"] is False
    assert UNIQUE in report["failed_expectations"], report
    assert any(f.startswith(f"{UNIQUE}: 6 of 15 rows unexpected") for f in report["critical_failures"])
    batch = open_store(config).get_batch(batch_id)
    assert batch.dq_success is False and UNIQUE in (batch.dq_result or "")


@sqlite_only
def test_audit_fails_when_a_committed_row_is_missing(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    from delta.tables import DeltaTable

    _, config, batch_id = committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    DeltaTable.forPath(spark, str(config.output_path)).delete("kafka_partition = 1 AND kafka_offset = 2")

    report = audit_batch(config, batch_id)

    assert report["success"] is False and report["failed_expectations"] == [COUNT], report
    assert report["critical_failures"] == [f"{COUNT}: observed 11, expected 12"]


@sqlite_only
def test_audit_reports_a_row_of_the_batch_outside_its_ranges(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    from pyspark.sql import functions as F

    topic, config, batch_id = committed_batch(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    stray = table(spark, config).where("kafka_partition = 0 AND kafka_offset = 0")
    stray = stray.withColumn("kafka_offset", F.lit(500).cast("bigint"))
    stray.write.format("delta").mode("append").save(str(config.output_path))

    report = audit_batch(config, batch_id)

    assert report["success"] is False
    assert set(report["failed_expectations"]) == {IN_RANGES, COUNT}, report
    planned = open_store(config).get_batch(batch_id).ranges[0]
    detail = f"{topic}[0] offset 500 outside planned [{planned.start}, {planned.end})"
    assert any(detail in f for f in report["critical_failures"]), report["critical_failures"]


def planned_batch_and_frame(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url):
    """A planned (not executed) batch, and its true output identities as a frame built from a plain
    read_committed consumer: what a correct Spark job would hand to the gate."""
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 5), commit=True, partition=0)
    producer.transaction(topic, rows(5, 5), commit=True, partition=1)
    config = make_pipeline([topic], control_db_url)
    batch, _ = plan_batch(config, open_store(config))
    assert batch is not None
    identities = sorted(read_committed_identities(config.kafka_settings, merge_ranges(batch.ranges)))
    schema = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT"
    return topic, config, batch, identities, schema


@sqlite_only
def test_gate_passes_the_true_rows_and_rejects_a_row_outside_the_planned_ranges(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic, config, batch, identities, schema = planned_batch_and_frame(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    passed = quality.gate(spark, config, batch, spark.createDataFrame(identities, schema), 0)
    assert passed["success"] is True and passed["statistics"]["read_committed_records"] == 10

    moved = [*identities[:-1], (topic, 1, 9_999)]  # same count, one offset beyond the plan
    with pytest.raises(QualityGateError) as failed:
        quality.gate(spark, config, batch, spark.createDataFrame(moved, schema), 0)

    message = str(failed.value)
    assert IN_RANGES in message and UNIQUE not in message and COUNT not in message, message
    end = next(r.end for r in batch.ranges if r.partition == 1)
    assert f"{topic}[1] offset 9999 outside planned [0, {end})" in message


@sqlite_only
def test_the_recount_counts_committed_records_per_partition_skipping_aborted_ones_and_markers(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 6), commit=True, partition=0)
    producer.transaction(topic, rows(100, 4), commit=False, partition=0)
    producer.transaction(topic, rows(6, 3), commit=True, partition=0)
    producer.transaction(topic, rows(9, 7), commit=True, partition=1)
    config = make_pipeline([topic], control_db_url)
    batch, _ = plan_batch(config, open_store(config))
    assert batch is not None
    spans = merge_ranges(batch.ranges)

    counts = read_committed_counts(config.kafka_settings, spans)

    assert counts == {(topic, 0): 9, (topic, 1): 7}
    identities = read_committed_identities(config.kafka_settings, spans)
    assert sum(counts.values()) == len(identities) == 16
    # A range ending inside the log (not at its end) stops there: only the offsets below `end`.
    first_four = {(topic, 0): [(0, 4)]}
    assert read_committed_counts(config.kafka_settings, first_four) == {(topic, 0): 4}
    # Several intervals of one partition, read in turn while the other partition is read too,
    # and an empty one: the same as counting the identities inside them.
    pieces = {(topic, 0): [(0, 3), (5, 5), (7, 13)], (topic, 1): [(2, 6)]}
    inside = [i for i in identities if any(s <= i[2] < e for s, e in pieces[(i[0], i[1])])]
    expected = {tp: sum(1 for i in inside if (i[0], i[1]) == tp) for tp in pieces}
    assert read_committed_counts(config.kafka_settings, pieces) == expected
    assert sum(expected.values()) == len(inside) > 0
    assert quality.start_recount(config, batch).result(timeout=60) == 16


@sqlite_only
def test_gate_takes_the_recount_started_before_the_read_and_checks_against_it(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    _, config, batch, identities, schema = planned_batch_and_frame(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    frame = spark.createDataFrame(identities, schema)
    # The warm-up validates a one-row frame of the batch's first range; it stores nothing.
    assert quality.warm_up(config, batch) is True
    passed = quality.gate(spark, config, batch, frame, 0, recount=quality.start_recount(config, batch))
    assert passed["success"] is True and passed["statistics"]["read_committed_records"] == 10

    one_more: Future[int] = Future()
    one_more.set_result(11)  # the recount is what the row count is checked against
    with pytest.raises(QualityGateError, match=f"{COUNT}: observed 10, expected 11"):
        quality.gate(spark, config, batch, frame, 0, recount=one_more)


@sqlite_only
def test_gate_rejects_a_null_identity(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic, config, batch, identities, schema = planned_batch_and_frame(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    nulled = [(topic, None, identities[0][2]), *identities[1:]]

    with pytest.raises(QualityGateError) as failed:
        quality.gate(spark, config, batch, spark.createDataFrame(nulled, schema), 0)

    message = str(failed.value)
    assert "expect_column_values_to_not_be_null(kafka_partition): 1 of 10 rows unexpected" in message
    assert IN_RANGES not in message and COUNT not in message, message


@sqlite_only
def test_gate_counts_quarantined_rows_against_the_read_committed_count(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    _, config, batch, identities, schema = planned_batch_and_frame(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    frame = spark.createDataFrame(identities, schema)

    # 10 rows claimed good plus 2 claimed quarantined: 2 more than Kafka holds.
    with pytest.raises(QualityGateError, match=f"{COUNT}: observed 10, expected 8"):
        quality.gate(spark, config, batch, frame, 2)


def test_a_failed_gate_fails_the_batch_and_writes_and_commits_nothing(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, monkeypatch
) -> None:
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(1, 6), commit=True, partition=0)
    must_be_free = {"type": "expect_column_values_to_be_between", "column": "amount", "max_value": 0}
    config = make_pipeline([topic], control_db_url, expectations=[must_be_free])
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    committed_before = store.committed_offsets(config.name)
    monkeypatch.setattr(spark, "stop", lambda: None)  # run_job stops "its" session: it is ours

    with pytest.raises(QualityGateError):
        run_job(config.source, batch.batch_id)

    failed = store.get_batch(batch.batch_id)
    assert failed.status is BatchStatus.FAILED
    assert failed.error and failed.error.startswith("QualityGateError")
    assert "expect_column_values_to_be_between(amount): 6 of 6 rows unexpected" in failed.error
    assert store.committed_offsets(config.name) == committed_before
    assert not config.output_path.exists() and not config.quarantine_path.exists()
    assert failed.dq_success is False and Path(failed.dq_report_path or "").is_file()


@sqlite_only
def test_the_gate_checks_the_suite_file_a_pipeline_names_and_fails_the_batch_on_it(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, monkeypatch, tmp_path
) -> None:
    """expectations_suite: a GX suite file of the expectations folder beside pipelines/, shipped to
    the job beside the pipeline file: its critical expectation fails the batch as an inline one does."""
    monkeypatch.delenv("EOS_EXPECTATIONS_DIR", raising=False)
    suites = tmp_path / "expectations" / "suites"
    suites.mkdir(parents=True)
    must_be_free = {
        "type": "expect_column_values_to_be_between",
        "kwargs": {"column": "amount", "max_value": 0},
    }
    (suites / "free.json").write_text(json.dumps({"name": "free", "expectations": [must_be_free]}))
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(1, 6), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, expectations_suite="free")
    assert config.expectations_suite == (suites / "free.json").resolve()
    assert submit.shipped(config.source)["files"].split(",")[-1] == str(suites / "free.json")
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    monkeypatch.setattr(spark, "stop", lambda: None)  # run_job stops "its" session: it is ours

    with pytest.raises(QualityGateError):
        run_job(config.source, batch.batch_id)

    failed = store.get_batch(batch.batch_id)
    assert failed.status is BatchStatus.FAILED
    assert "expect_column_values_to_be_between(amount): 6 of 6 rows unexpected" in (failed.error or "")
    assert not config.output_path.exists()


@sqlite_only
def test_a_warning_expectation_reports_but_does_not_stop_the_batch(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    warn = {"type": "expect_column_values_to_be_between", "column": "amount", "max_value": 0,
            "severity": "warning"}  # fmt: skip
    _, config, batch_id = committed_batch(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, expectations=[warn]
    )

    report = audit_batch(config, batch_id)

    assert report["success"] is True
    assert report["failed_expectations"] == ["expect_column_values_to_be_between(amount)"]
    assert report["warnings"] and not report["critical_failures"]


@sqlite_only
def test_audit_command_audits_a_batch_and_exits_1_on_failure(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    _, config, batch_id = committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    args = ["audit", "--config", str(config.source), "--batch-id", str(batch_id)]

    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["success"] is True

    table(spark, config).limit(1).write.format("delta").mode("append").save(str(config.output_path))
    assert cli.main(args) == 1
    assert UNIQUE in json.loads(capsys.readouterr().out)["failed_expectations"]


@sqlite_only
def test_audit_checks_against_the_gates_count_and_recount_asks_kafka_again(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    import sqlalchemy as sa

    _, config, batch_id = committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    # A recorded count that disagrees with the table: the audit must use it, and fail on it.
    engine = sa.create_engine(config.control_db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE eos_batches SET records_read = 14 WHERE batch_id = :b"), {"b": batch_id})
    engine.dispose()

    recorded = audit_batch(config, batch_id)
    recounted = audit_batch(config, batch_id, recount=True)

    assert recorded["success"] is False and recorded["critical_failures"] == [
        f"{COUNT}: observed 12, expected 13"
    ]
    assert recorded["read_committed_records_source"].startswith("counted by the gate's consumer")
    assert recounted["success"] is True, recounted  # Kafka holds 13: 12 rows + 1 quarantined
    assert recounted["statistics"]["read_committed_records"] == 13
    assert recounted["read_committed_records_source"] == "recounted from Kafka"


@sqlite_only
def test_audit_command_needs_no_java(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path
) -> None:
    """The audit reads the table with delta-rs: it starts no JVM, so it runs where Java is absent."""
    _, config, batch_id = committed_batch(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    no_java = tmp_path / "empty-bin"
    no_java.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    env.update(PATH=str(no_java), JAVA_HOME=str(tmp_path / "no-jdk"), EOS_STATE_DIR=str(tmp_path / "state"))
    argv = ["-m", "eos_ingest.cli", "audit", "--config", str(config.source), "--batch-id", str(batch_id)]
    report = json.loads(python_stdout(argv, env=env, timeout=300))
    assert report["success"] is True and report["statistics"]["rows"] == 12
    assert Path(report["report_path"]).is_relative_to(tmp_path / "state" / "gx")


@sqlite_only
def test_a_suite_that_reads_every_column_is_validated_on_spark_and_still_fails_the_batch(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    """A table expectation may read any column: the gate keeps the rows in Spark (not collected)."""
    from eos_ingest.quality.suite import named_columns

    at_most_5 = {"type": "expect_table_row_count_to_be_between", "max_value": 5}
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 8), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, expectations=[at_most_5])
    assert named_columns(config, ["kafka_topic", "kafka_partition", "kafka_offset", "id"]) is None

    with pytest.raises(QualityGateError, match="expect_table_row_count_to_be_between: observed 8"):
        ingest_once(spark, config)

    assert not config.output_path.exists()
