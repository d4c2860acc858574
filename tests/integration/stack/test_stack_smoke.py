"""Smoke tests of the local stack: the real broker's transactions and Spark's Kafka + Delta jars."""

from __future__ import annotations

import json

import pytest

from tests.helpers.kafka import TxProducer, read_committed, watermarks

pytestmark = pytest.mark.integration


def test_read_committed_consumer_sees_only_committed_transactions(kafka_bootstrap: str, make_topic) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"n": i} for i in range(0, 10)], commit=True)
    producer.transaction(topic, [{"n": i} for i in range(10, 20)], commit=False)
    producer.transaction(topic, [{"n": i} for i in range(20, 30)], commit=True)

    seen = sorted(json.loads(value)["n"] for _, _, value in read_committed(kafka_bootstrap, topic, 2))

    assert seen == list(range(0, 10)) + list(range(20, 30))


def test_open_transaction_holds_the_last_stable_offset_below_the_high_watermark(
    kafka_bootstrap: str, make_topic
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [b"committed"] * 3, commit=True, partition=0)
    producer.begin()
    producer.send(topic, [b"open"] * 4, partition=0)
    producer.producer.flush(30)
    try:
        _, lso = watermarks(kafka_bootstrap, topic, 0, "read_committed")
        _, high = watermarks(kafka_bootstrap, topic, 0, "read_uncommitted")
        # 3 records + 1 commit marker are stable; the 4 open records are above the LSO.
        assert lso == 4
        assert high == 8
    finally:
        producer.abort()


def test_spark_reads_an_explicit_range_read_committed_and_round_trips_delta(
    spark, kafka_bootstrap: str, make_topic, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [b"a"] * 4, commit=True, partition=0)
    producer.transaction(topic, [b"aborted"] * 4, commit=False, partition=0)
    producer.transaction(topic, [b"b"] * 4, commit=True, partition=0)
    producer.transaction(topic, [b"c"] * 2, commit=True, partition=1)
    ends = {
        0: watermarks(kafka_bootstrap, topic, 0, "read_committed")[1],
        1: watermarks(kafka_bootstrap, topic, 1, "read_committed")[1],
    }
    expected = [(p, o) for p, o, _ in read_committed(kafka_bootstrap, topic, 2, ends)]

    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 0, "1": 0}}))
        .option("endingOffsets", json.dumps({topic: {str(p): e for p, e in ends.items()}}))
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .load()
    )
    df.write.format("delta").save(str(tmp_path / "table"))
    back = spark.read.format("delta").load(str(tmp_path / "table"))
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in back.collect())

    assert [(p, o) for p, o, _ in rows] == expected
    assert b"aborted" not in {v for _, _, v in rows}
    assert len(rows) == 10
