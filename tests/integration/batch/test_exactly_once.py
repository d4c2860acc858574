"""The exactly-once claims, each by a test that would break it, asserted with verify.

Each test runs on one control DB backend, the two spread over the file (on_control_db): their
subject is Kafka's offsets, Spark and the table; what the control DB does for them (plan, the
override note, reset-offsets) is proven on both backends in tests/integration/control/test_store.py.
(Four tests ran on both until 2026-12-06, about 27 s of repeats in `make test`.)"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewPartitions

from eos_ingest.cli import main as cli_main
from eos_ingest.cli import open_store, plan_batch
from eos_ingest.errors import OffsetsLostError, TopicRecreatedError
from eos_ingest.formats import parser
from eos_ingest.plan.ranges import PlannedRange, TopicPartition
from eos_ingest.spark.kafka_source import read_ranges
from eos_ingest.storage.table_names import QUARANTINE
from tests.fixtures.pipelines import ingest_once, on_cases, on_formats, table_rows, verify_pipeline
from tests.fixtures.postgres import on_control_db
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def output_ids(spark, config) -> list[int]:
    return sorted(r.id for r in table_rows(spark, config).select("id").collect())


@on_control_db("sqlite")
@on_formats()
def test_aborted_transactions_never_appear(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=3)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 30), commit=True)
    producer.transaction(topic, rows(1000, 30), commit=False)
    producer.transaction(topic, rows(30, 30), commit=True)
    config = make_pipeline([topic], control_db_url)

    result = ingest_once(spark, config)

    assert result is not None and result.records_read == 60
    assert output_ids(spark, config) == list(range(60))
    report = verify_pipeline(spark, config)
    assert report.ok, report.to_dict()
    assert report.expected == 60


@on_control_db("postgresql")
@on_formats()
def test_transaction_open_at_plan_time_is_not_read_and_the_next_batch_reads_it_whole(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)
    open_tx = TxProducer(kafka_bootstrap)
    open_tx.begin()
    open_tx.send(topic, rows(100, 10), partition=0)
    open_tx.producer.flush(30)
    # Committed records after the open transaction's first record are above the LSO too.
    producer.transaction(topic, rows(10, 5), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)

    first = ingest_once(spark, config)
    assert first is not None and first.records_read == 10
    assert output_ids(spark, config) == list(range(10))

    open_tx.send(topic, rows(110, 10), partition=0)
    open_tx.commit()
    second = ingest_once(spark, config)

    assert second is not None and second.records_read == 25
    assert output_ids(spark, config) == list(range(15)) + list(range(100, 120))
    report = verify_pipeline(spark, config)
    assert report.ok, report.to_dict()


@on_control_db("sqlite")
def test_empty_plan_creates_no_batch(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 8), commit=True)
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None

    store = open_store(config)
    batch, _ = plan_batch(config, store)

    assert batch is None
    assert len(store.list_batches(config.name)) == 1


@on_control_db("sqlite")
@on_formats()
def test_partition_added_to_the_topic_is_ingested_from_its_start(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)

    kafka_admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    producer = TxProducer(kafka_bootstrap)  # fresh metadata that knows the new partitions
    producer.transaction(topic, rows(10, 10), commit=True, partition=1)
    producer.transaction(topic, rows(20, 10), commit=True, partition=2)
    result = ingest_once(spark, config)

    assert result is not None and result.records_read == 20
    assert output_ids(spark, config) == list(range(30))
    committed = open_store(config).committed_offsets(config.name)
    assert {tp.partition: offset for tp, offset in committed.items()} == {0: 11, 1: 11, 2: 11}
    assert verify_pipeline(spark, config).ok


@on_control_db("postgresql")
def test_offsets_lost_to_retention_fail_the_plan_until_explicitly_overridden(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)
    producer.transaction(topic, rows(10, 10), commit=True, partition=0)
    producer.transaction(topic, rows(20, 10), commit=True, partition=0)
    # Retention deletes whole segments from the log start; DeleteRecords moves the log start the same way.
    futures = kafka_admin.delete_records([KafkaTopicPartition(topic, 0, 15)], request_timeout=30)
    for future in futures.values():
        future.result()

    with pytest.raises(OffsetsLostError) as lost:
        ingest_once(spark, config)
    message = str(lost.value)
    assert topic in message and "11" in message and "15" in message
    assert (
        open_store(config).committed_offsets(config.name)
        and len(open_store(config).list_batches(config.name)) == 1
    )

    result = ingest_once(spark, config, allow_data_loss=True)
    assert result is not None
    batch = open_store(config).get_batch(result.batch_id)
    assert batch.override_note and "15" in batch.override_note
    # Offsets 11-14 (ids 10-13) are gone; offsets 15-32 hold ids 14-19 and 20-29 between markers.
    assert output_ids(spark, config) == list(range(10)) + list(range(14, 30))
    report = verify_pipeline(spark, config)
    assert report.ok and report.unverifiable == 10, report.to_dict()


@on_control_db("sqlite")
def test_topic_deleted_and_recreated_fails_the_plan(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url
) -> None:
    import time

    from confluent_kafka.admin import NewTopic

    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 20), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)
    ingest_once(spark, config)
    kafka_admin.delete_topics([topic], operation_timeout=30)[topic].result()
    deadline = time.monotonic() + 60
    while True:
        try:
            kafka_admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 3), commit=True, partition=0)

    with pytest.raises(TopicRecreatedError) as recreated:
        ingest_once(spark, config)
    # Refused by the topic id (recorded at the first plan) before the LSO check (3 < 21) is reached.
    assert topic in str(recreated.value) and "Kafka now reports topic id" in str(recreated.value)

    # The operator's fix: restart the topic's offsets at its log start, then ingest goes on.
    code = cli_main(
        [
            "reset-offsets",
            "--config",
            str(config.source),
            "--topic",
            topic,
            "--to",
            "earliest",
            "--reason",
            "recreated",
        ]
    )
    assert code == 0
    result = ingest_once(spark, config)
    assert result is not None and result.records_read == 3
    assert open_store(config).committed_offsets(config.name) == {TopicPartition(topic, 0): 4}


@on_control_db("postgresql")
def test_a_pipeline_of_two_topics(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url) -> None:
    first, second = make_topic(partitions=2), make_topic(partitions=3)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(first, rows(0, 20), commit=True)
    producer.transaction(second, rows(100, 30), commit=True)
    producer.transaction(second, rows(500, 30), commit=False)
    config = make_pipeline([first, second], control_db_url)

    result = ingest_once(spark, config)

    assert result is not None and result.records_read == 50
    table = spark.read.format("delta").load(str(config.output_path))
    assert {r.kafka_topic: r["count"] for r in table.groupBy("kafka_topic").count().collect()} == {
        first: 20,
        second: 30,
    }
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 50, report.to_dict()


@on_cases(("postgresql", "delta"), ("sqlite", "iceberg"))
def test_malformed_values_go_to_quarantine_with_their_identity(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    bad = [b"not json", b'{"id": "abc"}', b"[1, 2]", b'{"id": 1.5}']
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 5), commit=True, partition=0)
    producer.transaction(topic, bad, commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)

    result = ingest_once(spark, config)

    assert result is not None
    assert (result.records_read, result.records_written, result.records_quarantined) == (9, 5, 4)
    quarantine = table_rows(spark, config, QUARANTINE).orderBy("kafka_offset").collect()
    assert [bytes(r.raw_value) for r in quarantine] == bad
    assert [r.kafka_offset for r in quarantine] == [6, 7, 8, 9]
    assert "not valid JSON" in quarantine[0].error and "schema" in quarantine[1].error
    assert verify_pipeline(spark, config).ok


@on_control_db("postgresql")
def test_a_batch_with_nothing_to_quarantine_clears_its_ranges_in_the_quarantine_table(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    """An earlier attempt (under a schema that refused these values) left quarantine rows in the
    batch's ranges: the batch, whose values all parse now, replaces them with nothing (an empty
    replace that reads nothing from Kafka again), and a row outside its ranges (another topic's)
    stays; verify's read_committed rescan then finds each record exactly once."""
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 5), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)
    stale = spark.createDataFrame(
        [
            (name, 0, offset, None, None, 1, b"{}", "value does not match the declared schema")
            for name, offset in ((topic, 0), (topic, 4), (f"{topic}-other", 0))
        ],
        "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, "
        "kafka_key BINARY, batch_id BIGINT, raw_value BINARY, error STRING",
    )
    stale.write.format("delta").save(str(config.quarantine_path))

    result = ingest_once(spark, config)

    assert result is not None
    assert (result.records_written, result.records_quarantined) == (5, 0)
    left = spark.read.format("delta").load(str(config.quarantine_path)).collect()
    assert [(r.kafka_topic, r.kafka_offset) for r in left] == [(f"{topic}-other", 0)]
    assert output_ids(spark, config) == [0, 1, 2, 3, 4]
    assert verify_pipeline(spark, config).ok
    # The empty replace's frame: Spark plans limit(0) as an empty relation, Kafka is not read.
    kafka_rows = read_ranges(spark, config.kafka_settings, [PlannedRange(topic, 0, 0, 6)])
    empty = parser.quarantine_rows(parser.parse(kafka_rows, config, 1), config).limit(0)
    plan = empty._jdf.queryExecution().optimizedPlan().toString()
    assert "LocalRelation" in plan and "Kafka" not in plan
