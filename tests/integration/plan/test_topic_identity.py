"""Topic incarnations and `start_from: latest` on the real broker, Spark, Delta and SQLite."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from eos_ingest.batch.sequence import execute_batch
from eos_ingest.cli import main as cli_main
from eos_ingest.cli import open_store, plan_batch
from eos_ingest.errors import TopicRecreatedError
from eos_ingest.kafka.offsets import fetch_identity
from eos_ingest.plan.ranges import TopicPartition
from eos_ingest.service.backfill import create_backfill, parse_request
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

OLD, NEW = 0, 100_000  # ids of the old topic's records, and of the recreated topic's


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def fill(bootstrap: str, topic: str, first_id: int, per_partition: int, partitions: int = 2) -> None:
    """`per_partition` committed records in each partition, in transactions of 250 (one marker each)."""
    producer = TxProducer(bootstrap)
    for p in range(partitions):
        for k in range(0, per_partition, 250):
            start = first_id + p * per_partition + k
            producer.transaction(topic, rows(start, 250), commit=True, partition=p)


def recreate(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.delete_topics([topic], operation_timeout=30)[topic].result()
    deadline = time.monotonic() + 60
    while True:  # the broker refuses the name until the deletion is done
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'control.db'}"


def test_a_recreated_topic_refilled_past_the_committed_offset_is_refused_until_reset(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    fill(kafka_bootstrap, topic, OLD, 1500)  # 6 transactions: offsets [0, 1506) per partition
    config = make_pipeline([topic], sqlite_url(tmp_path), max_records_per_partition=1500)
    store = open_store(config)
    assert ingest_once(spark, config) is not None and ingest_once(spark, config) is not None
    assert store.committed_offsets(config.name) == {
        TopicPartition(topic, 0): 1506,
        TopicPartition(topic, 1): 1506,
    }
    old_id = fetch_identity(config.kafka_settings, [topic]).topic_ids[topic]
    assert old_id is not None
    assert verify_pipeline(spark, config).ok

    recreate(kafka_admin, topic, partitions=2)
    fill(kafka_bootstrap, topic, NEW, 4000)  # 16 transactions: [0, 4016), past the committed 1506
    new_id = fetch_identity(config.kafka_settings, [topic]).topic_ids[topic]
    assert new_id is not None and new_id != old_id
    batches_before = store.list_batches(config.name)

    with pytest.raises(TopicRecreatedError) as recreated:
        plan_batch(config, store)
    message = str(recreated.value)
    assert topic in message and old_id in message and new_id in message
    assert f"eos-ingest reset-offsets --pipeline {config.name} --topic {topic} --to earliest" in message
    assert store.list_batches(config.name) == batches_before  # nothing planned
    assert store.committed_offsets(config.name)[TopicPartition(topic, 0)] == 1506
    assert store.recorded_identities(config.name)[topic].topic_id == old_id
    assert cli_main(["plan", "--config", str(config.source)]) == 2  # needs a person
    request = parse_request(
        {"topic": topic, "partitions": [0], "start_offset": 0, "end_offset": 100, "reason": "re-read"},
        config.topics,
    )
    with pytest.raises(TopicRecreatedError, match=new_id):
        create_backfill(config, store, request)
    assert store.list_batches(config.name) == batches_before

    # The table still holds the old topic's rows at the new topic's identities: not exactly once.
    report = verify_pipeline(spark, config)
    assert not report.ok and report.older_topic == 3000, report.to_dict()
    assert report.examples["older_topic"][0] == (topic, 0, 0)

    reset = ["reset-offsets", "--config", str(config.source), "--topic", topic, "--to", "earliest"]
    assert cli_main([*reset, "--reason", "topic recreated"]) == 0
    assert store.recorded_identities(config.name)[topic].topic_id == new_id
    first = ingest_once(spark, config)  # [0, 1500): 1495 records and 5 markers per partition
    assert first is not None and first.records_read == 2990
    partial = verify_pipeline(spark, config)  # old rows at offsets 1500-1504 of each partition remain
    assert not partial.ok and partial.older_topic == 10, partial.to_dict()
    assert partial.examples["older_topic"][0] == (topic, 0, 1500)
    runs = 1
    while ingest_once(spark, config) is not None:
        runs += 1
    assert runs == 3  # [0, 1500), [1500, 3000), [3000, 4016) of both partitions

    final = verify_pipeline(spark, config)
    assert final.ok and final.expected == 8000 and final.older_topic == 0, final.to_dict()
    table = spark.read.format("delta").load(str(config.output_path))
    ids = sorted(r.id for r in table.select("id").collect())
    assert ids == list(range(NEW, NEW + 8000))  # only the new topic's rows


def test_a_pending_batch_of_the_old_topic_is_refused_before_reading(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, tmp_path
) -> None:
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(OLD, 20), commit=True, partition=0)
    config = make_pipeline([topic], sqlite_url(tmp_path))
    store = open_store(config)
    batch, _ = plan_batch(config, store)  # planned, not yet run
    assert batch is not None and batch.ranges[0].end == 21
    recreate(kafka_admin, topic, partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(NEW, 30), commit=True, partition=0)

    with pytest.raises(TopicRecreatedError, match=f"batch {batch.batch_id}"):
        execute_batch(spark, config, store, batch, store.take_fence(batch.batch_id))
    assert not config.output_path.exists()  # nothing was read or written
    with pytest.raises(
        TopicRecreatedError, match=f"abandon --pipeline {config.name} --batch-id {batch.batch_id}"
    ):
        plan_batch(config, store)


def test_start_from_latest_reads_partitions_added_later_from_their_start(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, tmp_path
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)  # before the pipeline: skipped
    config = make_pipeline([topic], sqlite_url(tmp_path), start_from="latest")
    assert ingest_once(spark, config) is None  # first plan: starts at the LSO, nothing to read
    assert open_store(config).committed_offsets(config.name) == {TopicPartition(topic, 0): 11}

    producer.transaction(topic, rows(10, 5), commit=True, partition=0)
    kafka_admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    producer = TxProducer(kafka_bootstrap)  # fresh metadata that knows the new partitions
    producer.transaction(topic, rows(15, 7), commit=True, partition=1)
    producer.transaction(topic, rows(22, 8), commit=True, partition=2)
    result = ingest_once(spark, config)

    assert result is not None and result.records_read == 20
    batch = open_store(config).get_batch(result.batch_id)
    assert [(r.partition, r.start, r.end) for r in batch.ranges] == [(0, 11, 17), (1, 0, 8), (2, 0, 9)]
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 20, report.to_dict()
