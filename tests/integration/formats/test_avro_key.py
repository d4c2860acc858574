"""key.format avro: keys in the Schema Registry wire format decoded into the struct kafka_key.

Real broker, registry (stack/registry.sh), Spark (from_avro) and Delta. confluent-kafka's
AvroSerializer writes the keys and the values; the key's writer schema is resolved from the value's
registry, which the key shares.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eos_ingest.storage.table_names import QUARANTINE
from tests.fixtures.pipelines import ingest_once, on_formats, table_rows, verify_pipeline
from tests.helpers.avro import V1, framed, schema_id

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)]

KEY = {"type": "record", "name": "OrderKey", "namespace": "shop",
       "fields": [{"name": "order_id", "type": "long"}, {"name": "region", "type": "string"}]}  # fmt: skip


# order_id became a string: the long reader cannot read it.
KEY_INCOMPATIBLE = {
    **KEY,
    "fields": [{"name": "order_id", "type": "string"}, {"name": "region", "type": "string"}],
}


@on_formats()
def test_keys_decode_into_a_struct_an_unknown_key_id_is_quarantined_and_no_key_is_null(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, schema_registry_url, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    keys = AvroSerializer(registry, json.dumps(KEY))
    values = AvroSerializer(registry, json.dumps(V1))
    key_context = SerializationContext(topic, MessageField.KEY)
    value_context = SerializationContext(topic, MessageField.VALUE)
    good = [
        (
            keys({"order_id": i, "region": f"r{i}"}, key_context),
            values({"id": i, "name": f"n{i}"}, value_context),
        )
        for i in range(3)
    ]
    key_id = schema_id(good[0][0])
    unknown_id = key_id + 1000
    unknown_key = (
        b"\x00" + struct.pack(">I", unknown_id) + good[0][0][5:]
    )  # a good body behind an id nobody has
    no_key_value = values({"id": 9, "name": "keyless"}, value_context)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for key, value in [*good, (unknown_key, good[1][1]), (b"plain text", good[2][1])]:
        producer.produce(topic, value, key=key, partition=0)
    producer.produce(topic, no_key_value, partition=0)  # no key
    assert producer.flush(30) == 0

    schemas = tmp_path / "pipelines" / "schemas"
    schemas.mkdir(parents=True)
    (schemas / "order.avsc").write_text(json.dumps(V1))
    (schemas / "order_key.avsc").write_text(json.dumps(KEY))
    value = {
        "format": "avro",
        "schema_file": "schemas/order.avsc",
        "schema_registry": {"url": schema_registry_url},
    }
    key = {"format": "avro", "schema_file": "schemas/order_key.avsc"}
    config = make_pipeline([topic], control_db_url, value=value, key=key)

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (4, 2)
    table = table_rows(spark, config)
    assert dict(table.dtypes)["kafka_key"] == "struct<order_id:bigint,region:string>"
    rows = table.orderBy("kafka_offset").collect()
    assert [(r["id"], r["kafka_key"] and r["kafka_key"].asDict()) for r in rows] == [
        (0, {"order_id": 0, "region": "r0"}), (1, {"order_id": 1, "region": "r1"}),
        (2, {"order_id": 2, "region": "r2"}), (9, None),  # no key: a null kafka_key, not quarantine
    ]  # fmt: skip
    quarantine = table_rows(spark, config, QUARANTINE).orderBy("kafka_offset")
    assert [(r["kafka_offset"], r["kafka_key"], bytes(r["raw_key"]), r["error"]) for r in quarantine.collect()] == [
        (3, None, unknown_key, f"key: unknown schema id {unknown_id}: no writer schema for it"),
        (4, None, b"plain text", "key: not in the Schema Registry wire format "
                                 "(magic byte 0, a 4-byte schema id, then the Avro body)"),
    ]  # fmt: skip
    report = verify_pipeline(spark, config)
    assert report.ok and (report.expected, report.found) == (6, 6), report


def test_avro_keys_beside_json_values_from_writer_files_an_incompatible_key_is_quarantined(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    key = framed(1, KEY, {"order_id": 7, "region": "eu"})
    incompatible = framed(2, KEY_INCOMPATIBLE, {"order_id": "seven", "region": "eu"})
    good = b'{"id": 1, "name": "a", "amount": 1.5}'
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for k, v in [(key, good), (key, b"not json"), (incompatible, good), (None, good)]:
        producer.produce(topic, v, key=k, partition=0)
    assert producer.flush(30) == 0
    schemas = tmp_path / "pipelines" / "schemas"
    schemas.mkdir(parents=True)
    (schemas / "key.avsc").write_text(json.dumps(KEY))
    (schemas / "key_incompatible.avsc").write_text(json.dumps(KEY_INCOMPATIBLE))
    writers = {1: "schemas/key.avsc", 2: "schemas/key_incompatible.avsc"}
    config = make_pipeline(
        [topic],
        control_db_url,
        key={"format": "avro", "schema_file": "schemas/key.avsc", "writer_schemas": writers},
    )

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (2, 2)
    table = spark.read.format("delta").load(str(config.output_path)).orderBy("kafka_offset")
    assert [(r["kafka_offset"], r["kafka_key"] and r["kafka_key"].asDict(), r["id"]) for r in table.collect()] == [
        (0, {"order_id": 7, "region": "eu"}, 1), (3, None, 1),
    ]  # fmt: skip
    quarantine = spark.read.format("delta").load(str(config.quarantine_path)).orderBy("kafka_offset")
    rows = [
        (r["kafka_offset"], r["kafka_key"] and r["kafka_key"].asDict(), r["raw_key"], r["error"])
        for r in quarantine.collect()
    ]
    # a value that does not parse keeps its decoded key; a key that does not decode keeps its bytes
    assert rows[0] == (1, {"order_id": 7, "region": "eu"}, None, "value is not valid JSON")
    offset, kafka_key, raw_key, error = rows[1]
    assert (offset, kafka_key, bytes(raw_key)) == (2, None, incompatible)
    assert (
        error.startswith("key: writer schema id 2 is incompatible with the reader schema: ")
        and "order_id" in error
    ), error
    report = verify_pipeline(spark, config)
    assert report.ok and (report.expected, report.found) == (4, 4), report
