"""key.format and metadata: the key as text, headers as a map or an array, the timestamp type.

Real broker, Spark and Delta. The defaults keep today's columns (the key as bytes, no headers, no
timestamp type); each option adds or changes only its own column, in the table and the quarantine.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from eos_ingest.storage.table_names import QUARANTINE
from tests.fixtures.pipelines import ingest_once, on_formats, table_rows, verify_pipeline

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)]

TODAY = ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key", "batch_id",
         "id", "name", "amount", "event_date"]  # fmt: skip


def produce(bootstrap: str, topic: str) -> None:
    """Two JSON records with a key and headers (one key repeated), and one that does not parse."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    headers = [("source", b"web"), ("trace", b"t1"), ("source", b"app")]
    producer.produce(topic, b'{"id": 1, "name": "a", "amount": 1.5}', key=b"k1", headers=headers, partition=0)
    producer.produce(topic, b'{"id": 2, "name": "b", "amount": 2.5}', key="ключ".encode(), partition=0)
    producer.produce(topic, b"not json", key=b"k3", headers=[("trace", b"t3")], partition=0)
    assert producer.flush(30) == 0


def tables(spark, config):
    return table_rows(spark, config).orderBy("kafka_offset"), table_rows(spark, config, QUARANTINE)


def test_the_defaults_keep_todays_columns(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap, topic)
    config = make_pipeline([topic], control_db_url)

    assert ingest_once(spark, config) is not None

    table, quarantine = tables(spark, config)
    assert table.columns == TODAY
    assert dict(table.dtypes)["kafka_key"] == "binary"
    assert "kafka_headers" not in quarantine.columns and "kafka_timestamp_type" not in quarantine.columns


@on_formats()
def test_key_as_text_headers_as_a_map_and_the_timestamp_type(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap, topic)
    config = make_pipeline(
        [topic], control_db_url, key={"format": "string"}, metadata={"headers": "map", "timestamp_type": True}
    )

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (2, 1)
    table, quarantine = tables(spark, config)
    assert table.columns == [*TODAY[:6], "kafka_headers", "kafka_timestamp_type", *TODAY[6:]]
    rows = table.collect()
    assert [r["kafka_key"] for r in rows] == ["k1", "ключ"]
    # The last value of a repeated header wins; a record without headers has none.
    assert {k: bytes(v) for k, v in rows[0]["kafka_headers"].items()} == {"source": b"app", "trace": b"t1"}
    assert not rows[1]["kafka_headers"]
    assert {r["kafka_timestamp_type"] for r in rows} == {0}  # CreateTime: the producer's clock
    bad = quarantine.collect()
    assert bad[0]["kafka_key"] == "k3" and {k: bytes(v) for k, v in bad[0]["kafka_headers"].items()} == {
        "trace": b"t3"
    }
    assert verify_pipeline(spark, config).ok


@on_formats()
def test_headers_as_an_array_keep_every_header_in_order(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap, topic)
    config = make_pipeline([topic], control_db_url, metadata={"headers": "array"})

    assert ingest_once(spark, config) is not None

    table, _ = tables(spark, config)
    first = table.collect()[0]
    assert [(h["key"], bytes(h["value"])) for h in first["kafka_headers"]] == [
        ("source", b"web"), ("trace", b"t1"), ("source", b"app")
    ]  # fmt: skip
    assert "kafka_timestamp_type" not in table.columns and dict(table.dtypes)["kafka_key"] == "binary"
