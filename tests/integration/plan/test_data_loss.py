"""Records deleted by Kafka after a batch was planned, on the real broker and Spark.

Before: Spark's failOnDataLoss error was not ours, so the batch stayed planned, every run resumed
it and failed the same way, and --allow-data-loss was ignored while it was pending.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eos_ingest.cli import main as cli_main
from eos_ingest.cli import open_store, plan_batch
from eos_ingest.errors import OffsetsLostError
from eos_ingest.service.operations import job_argv
from eos_ingest.spark.session import spark_submit_env
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.fixtures.postgres import on_control_db
from tests.helpers.kafka import TxProducer, watermarks

pytestmark = pytest.mark.integration


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": 1.0} for i in range(start, start + count)]


def delete_records(kafka_admin, topic: str, before: int) -> None:
    """DeleteRecords moves the log start exactly as retention does when it drops a segment."""
    for future in kafka_admin.delete_records(
        [KafkaTopicPartition(topic, 0, before)], request_timeout=30
    ).values():
        future.result()


def planned_then_deleted(kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url):
    """30 committed records at offsets 0-29 (marker at 30), a batch [0, 31) planned, then 0-14 deleted."""
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 30), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)
    store = open_store(config)
    batch, created = plan_batch(config, store)
    assert batch is not None and created and [(r.start, r.end) for r in batch.ranges] == [(0, 31)]
    delete_records(kafka_admin, topic, 15)
    return topic, config, store, batch


@on_control_db("sqlite")
def test_records_deleted_between_plan_and_read_fail_the_batch_with_the_way_out(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url, tmp_path: Path
) -> None:
    topic, config, store, batch = planned_then_deleted(
        kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url
    )

    # The Spark job itself (spark-submit), as a resumed run or an Airflow retry would start it.
    argv = job_argv(config, batch, "local[1]", driver_memory="1g")
    log = tmp_path / "job.log"
    with log.open("w") as out:
        code = subprocess.run(
            argv, env=spark_submit_env(), stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False
        ).returncode
    output = log.read_text()

    assert code == 2, output[-5000:]  # needs a person: --allow-data-loss, or a backfill
    failed = store.get_batch(batch.batch_id)
    assert failed.status.value == "failed", (failed, output[-5000:])
    assert failed.error is not None and failed.error.startswith("OffsetsLostError: ")
    for part in (f"topic {topic!r} partition 0", "[0, 31)", "--allow-data-loss"):
        assert part in failed.error, failed.error
    assert "eos-ingest: OffsetsLostError:" in output
    assert all(o == 0 for o in store.committed_offsets(config.name).values())

    # The batch no longer blocks the pipeline: the next plan names the loss, the override skips it.
    with pytest.raises(OffsetsLostError):
        plan_batch(config, store)
    result = ingest_once(spark, config, allow_data_loss=True)
    assert result is not None and result.records_read == 15
    assert "[0, 15)" in (store.get_batch(result.batch_id).override_note or "")
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 15, report.to_dict()  # the failed batch committed nothing


def test_pending_batch_whose_records_were_deleted_fails_at_plan_time_without_spark(
    kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    topic, config, store, batch = planned_then_deleted(
        kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url
    )

    with pytest.raises(OffsetsLostError) as lost:
        plan_batch(config, store)
    message = str(lost.value)
    for part in (f"batch {batch.batch_id}", f"topic {topic!r} partition 0", "offset 0", "starts at 15"):
        assert part in message, message
    assert f"eos-ingest run --pipeline {config.name} --allow-data-loss" in message
    # `run` refuses before spark-submit, exit 2 (needs a person); the batch is left as it was.
    assert cli_main(["run", "--config", str(config.source)]) == 2
    assert "OffsetsLostError" in capsys.readouterr().err
    assert store.get_batch(batch.batch_id).status.value == "planned"
    assert [b.batch_id for b in store.list_batches(config.name)] == [batch.batch_id]


@on_control_db("postgresql")
def test_allow_data_loss_abandons_the_lost_pending_batch_and_runs_a_new_one(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url, capfd
) -> None:
    topic, config, store, batch = planned_then_deleted(
        kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url
    )

    code = cli_main(["run", "--config", str(config.source), "--allow-data-loss", "--master", "local[1]"])

    out = capfd.readouterr()
    assert code == 0, out.err[-5000:]
    summary = json.loads(out.out)
    assert summary["status"] == "committed" and summary["batch_id"] != batch.batch_id
    assert summary["ranges"] == [{"topic": topic, "partition": 0, "start": 15, "end": 31}]
    assert f"{topic}[0] [0, 15)" in summary["note"]
    old = store.get_batch(batch.batch_id)
    assert old.status.value == "abandoned" and f"{topic}[0] [0, 15)" in (old.error or "")
    assert {tp.partition: o for tp, o in store.committed_offsets(config.name).items()} == {0: 31}
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 15, report.to_dict()


def test_data_loss_override_on_a_plan_without_records_is_recorded_on_a_committed_empty_batch(
    kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url, spark, capsys
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)  # offsets 0-9, marker 10
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)
    producer.transaction(topic, rows(10, 10), commit=True, partition=0)  # offsets 11-20, marker 21
    deadline = time.monotonic() + 30  # the commit marker lands after commit_transaction returns
    while watermarks(kafka_bootstrap, topic, 0, "read_committed")[1] < 22:
        assert time.monotonic() < deadline, "the commit marker did not land within 30 s"
        time.sleep(0.2)
    delete_records(kafka_admin, topic, 22)  # everything not yet ingested is gone
    store = open_store(config)

    batch, created = plan_batch(config, store, allow_data_loss=True)

    assert batch is None and created  # nothing to run
    newest = store.list_batches(config.name)[0]
    assert newest.status.value == "committed" and newest.kind.value == "scheduled"
    assert newest.records_read == 0 and newest.committed_at is not None
    assert [(r.start, r.end) for r in newest.ranges] == [(22, 22)]
    assert f"{topic}[0] [11, 22)" in (newest.override_note or "")
    assert {tp.partition: o for tp, o in store.committed_offsets(config.name).items()} == {0: 22}
    assert cli_main(["status", "--config", str(config.source)]) == 0
    shown = json.loads(capsys.readouterr().out)["batches"][0]
    assert shown["status"] == "committed" and f"{topic}[0] [11, 22)" in shown["note"]
    assert verify_pipeline(spark, config).ok
