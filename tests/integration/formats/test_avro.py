"""Avro values in the Schema Registry wire format: decoded into the reader schema, the rest quarantined.

Real broker, Spark (from_avro of the spark-avro jar) and Delta. The writer schemas are given as
files by id (value.writer_schemas); the values are framed exactly as confluent-kafka's
AvroSerializer frames them (magic 0, the 4-byte id, fastavro's schemaless body).
test_avro_registry.py does the same through a real registry, with AvroSerializer itself.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from eos_ingest.cli import main as cli_main
from eos_ingest.control.store import BatchStatus, ControlStore
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.avro import V1, V2, framed
from tests.helpers.kafka import TxProducer

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)]

# id became a string: a long reader cannot read it (Avro promotes long to float/double, never string).
INCOMPATIBLE = {**V1, "fields": [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}]}
IDS = {"v1": 1, "v2": 2, "incompatible": 3}
UNKNOWN_ID = 99


@pytest.fixture
def schemas(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "pipelines" / "schemas"
    folder.mkdir(parents=True)
    files = {}
    for name, schema in (("v1", V1), ("v2", V2), ("incompatible", INCOMPATIBLE)):
        files[name] = folder / f"{name}.avsc"
        files[name].write_text(json.dumps(schema))
    return files


def avro_value(schemas: dict[str, Path], reader: str) -> dict:
    """value: avro with `reader` as the reader schema; writer schemas by id, paths beside the pipeline."""
    return {
        "format": "avro",
        "schema_file": f"schemas/{reader}.avsc",
        "writer_schemas": {IDS[n]: f"schemas/{n}.avsc" for n in IDS},
    }


def produce_mixed(kafka_bootstrap: str, topic: str) -> None:
    """3 v1 and 2 v2 records (good); then an unknown id, a corrupt body, an incompatible writer and
    a value without the wire format (4 for quarantine); an aborted v1 transaction in between."""
    producer = TxProducer(kafka_bootstrap)
    v1 = [framed(1, V1, {"id": i, "name": f"n{i}"}) for i in range(3)]
    v2 = [framed(2, V2, {"id": 10 + i, "name": f"m{i}", "amount": 2.5 * i}) for i in range(2)]
    producer.transaction(topic, v1, commit=True, partition=0)
    producer.transaction(topic, [framed(1, V1, {"id": 500, "name": "aborted"})], commit=False, partition=0)
    bad = [
        framed(UNKNOWN_ID, V1, {"id": 7, "name": "who"}),
        # id 1, then a string of length -1 (zigzag 0x01): Avro refuses it. (A body cut short does not
        # fail: Avro's decoder reads zeros past the end, so a truncated string reads as "".)
        b"\x00" + struct.pack(">I", 1) + b"\x02\x01",
        framed(3, INCOMPATIBLE, {"id": "x", "name": "y"}),
        b'{"id": 1}',  # JSON, not the wire format
    ]
    producer.transaction(topic, [*v2, *bad], commit=True, partition=1)


@pytest.fixture
def mixed_pipeline(kafka_bootstrap, make_topic, make_pipeline, control_db_url, schemas):
    """A topic of produce_mixed's 9 records and an avro pipeline on it with the given reader schema."""

    def make(reader: str):
        topic = make_topic(partitions=2)
        produce_mixed(kafka_bootstrap, topic)
        return make_pipeline([topic], control_db_url, value=avro_value(schemas, reader))

    return make


def test_two_writer_versions_read_into_the_v2_reader_and_the_rest_is_quarantined_with_reasons(
    spark, mixed_pipeline
) -> None:
    config = mixed_pipeline("v2")
    assert [n for n, _ in config.payload_columns] == ["id", "name", "amount"]

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (5, 4)
    rows = spark.read.format("delta").load(str(config.output_path)).orderBy("id").collect()
    assert [(r["id"], r["name"], r["amount"]) for r in rows] == [
        (0, "n0", -1.0), (1, "n1", -1.0), (2, "n2", -1.0),  # v1: the reader's default
        (10, "m0", 0.0), (11, "m1", 2.5),
    ]  # fmt: skip
    errors = {
        r["kafka_offset"]: r["error"]
        for r in spark.read.format("delta").load(str(config.quarantine_path)).collect()
    }
    assert len(errors) == 4
    reasons = sorted(errors.values())
    assert reasons[0].startswith("Avro body does not decode with writer schema id 1"), reasons
    assert reasons[1] == f"unknown schema id {UNKNOWN_ID}: no writer schema for it", reasons
    assert reasons[2].startswith("value is not in the Schema Registry wire format"), reasons
    assert reasons[3].startswith("writer schema id 3 is incompatible with the reader schema"), reasons
    assert "/fields/0/type" in reasons[3] or "id" in reasons[3], reasons
    quarantined = spark.read.format("delta").load(str(config.quarantine_path))
    assert quarantined.where("raw_value IS NULL").count() == 0  # the raw bytes are kept

    report = verify_pipeline(spark, config)
    assert report.ok and (report.expected, report.found) == (9, 9), report


def test_a_v2_writer_read_into_the_v1_reader_drops_the_new_field(spark, mixed_pipeline) -> None:
    config = mixed_pipeline("v1")

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (5, 4)
    table = spark.read.format("delta").load(str(config.output_path))
    assert table.columns[-3:] == ["id", "name", "event_date"]
    assert sorted((r["id"], r["name"]) for r in table.collect()) == [
        (0, "n0"), (1, "n1"), (2, "n2"), (10, "m0"), (11, "m1")
    ]  # fmt: skip
    assert verify_pipeline(spark, config).ok


def test_the_spark_submit_job_gets_the_schema_files_shipped_with_the_pipeline(spark, mixed_pipeline) -> None:
    """`eos-ingest run` submits the job with --files: the .avsc files (in schemas/ beside the YAML)
    reach the driver flat, beside the pipeline file, and the job finds them there."""
    config = mixed_pipeline("v2")

    assert cli_main(["run", "--config", str(config.source), "--master", "local[1]"]) == 0

    batch = ControlStore(config.control_db_url).list_batches(config.name, limit=10)[0]
    assert (batch.status, batch.records_written, batch.records_quarantined) == (BatchStatus.COMMITTED, 5, 4)
    assert spark.read.format("delta").load(str(config.output_path)).count() == 5
