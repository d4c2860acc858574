"""Backfill on the real broker, Spark, Delta and both control databases: one copy, offsets untouched,
and every invalid request refused before any work."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eos_ingest.batch.sequence import execute_batch
from eos_ingest.cli import main, open_store
from eos_ingest.errors import BackfillRangeError
from eos_ingest.plan.ranges import PlannedRange, TopicPartition
from eos_ingest.service.backfill import create_backfill, parse_request, plan_backfill
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.fixtures.postgres import on_control_db
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def table_rows(spark, path) -> Counter[tuple[str, int, int, int | None]]:
    """(topic, partition, offset, id) of every row, counted: a second copy shows as a count of 2."""
    frame = spark.read.format("delta").load(str(path))
    id_column = "id" if "id" in frame.columns else "kafka_offset"
    return Counter(
        (r[0], int(r[1]), int(r[2]), r[3])
        for r in frame.select("kafka_topic", "kafka_partition", "kafka_offset", id_column).collect()
    )


def delta_version(spark, path) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, str(path)).history(1).first()["version"])


@on_control_db("sqlite")
def test_backfill_replaces_a_committed_range_with_exactly_one_copy_and_never_moves_offsets(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 20), commit=True, partition=0)  # offsets 0-19, marker 20
    producer.transaction(topic, rows(900, 5), commit=False, partition=0)  # 21-25 aborted, marker 26
    producer.transaction(topic, rows(20, 20), commit=True, partition=1)  # 0-19, marker 20
    producer.transaction(topic, [b"not json"], commit=True, partition=1)  # 21, marker 22
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None
    store = open_store(config)
    committed = store.committed_offsets(config.name)
    assert committed == {TopicPartition(topic, 0): 27, TopicPartition(topic, 1): 23}
    table_before = table_rows(spark, config.output_path)
    quarantine_before = table_rows(spark, config.quarantine_path)
    version_before = delta_version(spark, config.output_path)

    request = parse_request(
        {"topic": topic, "partitions": [0, 1], "start_offset": 5, "end_offset": 23, "reason": "replay"},
        config.topics,
    )
    batch = create_backfill(config, store, request, airflow_run_id="manual__backfill_1")
    assert batch.kind.value == "backfill" and batch.status.value == "planned"
    assert batch.ranges == (PlannedRange(topic, 0, 5, 23), PlannedRange(topic, 1, 5, 23))
    assert "replay" in (batch.override_note or "")
    # A retry of the recording task gets the same batch back, not a second one.
    assert (
        create_backfill(config, store, request, airflow_run_id="manual__backfill_1").batch_id
        == batch.batch_id
    )

    result = execute_batch(spark, config, store, batch, store.take_fence(batch.batch_id))

    # p0 offsets 5-19 and p1 offsets 5-19 plus the bad value at 21; aborted records are gaps.
    assert (result.records_read, result.records_written, result.records_quarantined) == (31, 30, 1)
    assert store.committed_offsets(config.name) == committed
    assert store.get_batch(batch.batch_id).status.value == "committed"
    assert delta_version(spark, config.output_path) > version_before
    table_after = table_rows(spark, config.output_path)
    assert table_after == table_before and set(table_after.values()) == {1}
    assert table_rows(spark, config.quarantine_path) == quarantine_before
    replaced = spark.read.format("delta").load(str(config.output_path)).where(f"batch_id = {batch.batch_id}")
    assert replaced.count() == 30  # the rows were rewritten by the backfill, not left alone
    report = verify_pipeline(spark, config)
    assert report.ok and report.duplicates == 0 and report.missing == 0, report.to_dict()

    # The schedule carries on from the same committed offsets.
    producer.transaction(topic, rows(40, 6), commit=True, partition=0)
    later = ingest_once(spark, config)
    assert later is not None and later.records_read == 6
    assert verify_pipeline(spark, config).ok


def test_a_time_window_becomes_the_offsets_of_its_records(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)  # 0-9, marker 10
    time.sleep(1.5)
    window_start = datetime.now(UTC)
    time.sleep(1.5)
    producer.transaction(topic, rows(10, 10), commit=True, partition=0)  # 11-20, marker 21
    producer.transaction(topic, rows(20, 4), commit=True, partition=1)  # no record of p1 is in... all of it
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None
    store = open_store(config)

    request = parse_request(
        {
            "topic": topic,
            "partitions": [0, 1],
            "start_time": window_start.isoformat(),
            "end_time": datetime.now(UTC).isoformat(),
            "reason": "late data",
        },
        config.topics,
    )
    ranges = plan_backfill(config, store, request)

    assert ranges == [PlannedRange(topic, 0, 11, 22), PlannedRange(topic, 1, 0, 5)]


def test_invalid_backfills_are_refused_before_any_work(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 20), commit=True, partition=0)  # committed offset 21
    producer.transaction(topic, rows(20, 10), commit=True, partition=1)  # committed offset 11
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None
    # Retention deletes from the log start; DeleteRecords moves it the same way.
    for future in kafka_admin.delete_records([KafkaTopicPartition(topic, 0, 5)], request_timeout=30).values():
        future.result()
    store = open_store(config)
    committed = store.committed_offsets(config.name)
    version = delta_version(spark, config.output_path)

    cases = [
        ({"partitions": [1], "start_offset": 0, "end_offset": 50},
         f"topic '{topic}' partition 1 range [0, 50) goes beyond the committed offset 11"),
        ({"partitions": [0], "start_offset": 2, "end_offset": 10},
         f"topic '{topic}' partition 0 range [2, 10) starts below the log start 5"),
        ({"partitions": [0, 7], "start_offset": 5, "end_offset": 10},
         f"topic '{topic}' partition 7 does not exist (partitions: 0, 1)"),
        ({"partitions": [0], "start_offset": 10, "end_offset": 5}, "is reversed"),
        ({"partitions": [0], "start_offset": 8, "end_offset": 8}, "is empty"),
    ]  # fmt: skip
    for overrides, expected in cases:
        with pytest.raises(BackfillRangeError) as refused:
            request = parse_request({"topic": topic, "reason": "try", **overrides}, config.topics)
            create_backfill(config, store, request, airflow_run_id=f"manual__{expected[:20]}")
        assert expected in str(refused.value)

    code = main(
        ["backfill", "--config", str(config.source), "--topic", topic, "--partitions", "0,1",
         "--start-offset", "6", "--end-offset", "30", "--reason", "cli"]
    )  # fmt: skip
    assert code == 2
    assert "goes beyond the committed offset 21" in capsys.readouterr().err

    assert len(store.list_batches(config.name)) == 1  # only the scheduled batch: nothing was recorded
    assert store.committed_offsets(config.name) == committed
    assert delta_version(spark, config.output_path) == version
