"""Avro through a real Schema Registry: confluent-kafka's AvroSerializer registers the writer
schemas, the job resolves them from the registry by id and decodes into the reader schema.

Real broker, registry (stack/registry.sh), Spark (from_avro) and Delta; no writer schema files.
"""

from __future__ import annotations

import json
import struct
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.avro import V1, V2, schema_id
from tests.helpers.kafka import TxProducer

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)]


def test_serializer_registered_writers_are_resolved_from_the_registry_and_an_unknown_id_is_quarantined(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, schema_registry_url, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    context = SerializationContext(topic, MessageField.VALUE)
    # The serializers register V1 then V2 under <topic>-value (auto.register.schemas, the default).
    v1 = AvroSerializer(registry, json.dumps(V1))
    v2 = AvroSerializer(registry, json.dumps(V2))
    v1_values = [v1({"id": i, "name": f"n{i}"}, context) for i in range(3)]
    v2_values = [v2({"id": 10 + i, "name": f"m{i}", "amount": 2.5 * i}, context) for i in range(2)]
    v1_id, v2_id = schema_id(v1_values[0]), schema_id(v2_values[0])
    with urllib.request.urlopen(f"{schema_registry_url}/subjects/{topic}-value/versions", timeout=10) as r:
        assert json.loads(r.read()) == [1, 2]  # two versions of the subject, registered by the serializers
    assert v1_id != v2_id
    unknown_id = max(v1_id, v2_id) + 1000
    unknown = b"\x00" + struct.pack(">I", unknown_id) + v1_values[0][5:]  # a V1 body behind an id nobody has
    TxProducer(kafka_bootstrap).transaction(topic, [*v1_values, *v2_values, unknown], commit=True)

    reader = tmp_path / "pipelines" / "schemas" / "v2.avsc"
    reader.parent.mkdir(parents=True)
    reader.write_text(json.dumps(V2))
    value = {
        "format": "avro",
        "schema_file": "schemas/v2.avsc",
        "schema_registry": {"url": schema_registry_url},
    }
    config = make_pipeline([topic], control_db_url, value=value)

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (5, 1)
    rows = spark.read.format("delta").load(str(config.output_path)).orderBy("id").collect()
    assert [(r["id"], r["name"], r["amount"]) for r in rows] == [
        (0, "n0", -1.0), (1, "n1", -1.0), (2, "n2", -1.0),  # written with V1: the reader's default
        (10, "m0", 0.0), (11, "m1", 2.5),
    ]  # fmt: skip
    quarantined = spark.read.format("delta").load(str(config.quarantine_path)).collect()
    assert [(r["error"], bytes(r["raw_value"])) for r in quarantined] == [
        (f"unknown schema id {unknown_id}: no writer schema for it", unknown)
    ]
    report = verify_pipeline(spark, config)
    assert report.ok and (report.expected, report.found) == (6, 6), report
