"""value.format avro: the reader schema's columns, the writer schemas' sources, and every refusal
naming the file, the key and the fix. No Spark, no broker (the decoding: integration/formats/test_avro.py)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.connections import registry as registry_conn
from eos_ingest.errors import ConfigError, SchemaRegistryUnavailableError, exit_code
from eos_ingest.schema import registry as schema_registry
from eos_ingest.schema.avro import AvroSchemaError, required_fields, spark_ddl
from eos_ingest.spark import submit

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)


def pipeline(folder: Path, value: dict[str, Any], schema: Any = ORDER) -> Path:
    (folder / "schemas").mkdir(parents=True, exist_ok=True)
    (folder / "schemas" / "order.avsc").write_text(schema if isinstance(schema, str) else json.dumps(schema))
    path = folder / "orders.yaml"
    path.write_text(yaml.safe_dump({"name": "orders", "topics": ["orders"], "value": value}))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    return str(raised.value)


AVRO = {"format": "avro", "schema_file": "schemas/order.avsc", "writer_schemas": {1: "schemas/order.avsc"}}


def test_every_avro_type_maps_to_the_spark_type_from_avro_gives() -> None:
    schema = {
        "type": "record",
        "name": "All",
        "namespace": "t",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"},
            {"name": "f", "type": "float"},
            {"name": "raw", "type": "bytes"},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}},
            {"name": "home", "type": ["null", "Addr"]},
            {"name": "num", "type": ["int", "long"]},
            {"name": "either", "type": ["null", "string", "long"]},
        ],
    }  # fmt: skip
    assert spark_ddl(json.dumps(schema)) == (
        "`b` BOOLEAN, `i` INT, `f` FLOAT, `raw` BINARY, `day` DATE, `at` TIMESTAMP, `local` TIMESTAMP_NTZ, "
        "`price` DECIMAL(10,2), `kind` STRING, `tags` ARRAY<STRING>, `attrs` MAP<STRING, BIGINT>, "
        "`addr` STRUCT<`city`: STRING>, `home` STRUCT<`city`: STRING>, `num` BIGINT, "
        "`either` STRUCT<`member0`: STRING, `member1`: BIGINT>"
    )
    assert required_fields(json.dumps(ORDER)) == ["id"]


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ('"string"', "must be an Avro record"),
        ("{not json", "not JSON"),
        ({"type": "record", "name": "R", "fields": [{"name": "x", "type": "strin"}]}, "unknown type 'strin'"),
        ({"type": "record", "name": "R", "fields": [{"name": "x"}]}, "needs a name and a type"),
    ],
)
def test_a_schema_file_that_is_no_record_schema_is_refused(schema: Any, words: str) -> None:
    with pytest.raises(AvroSchemaError, match=words):
        spark_ddl(schema if isinstance(schema, str) else json.dumps(schema))


def test_an_avro_pipeline_takes_its_columns_from_the_reader_schema(tmp_path: Path) -> None:
    path = pipeline(
        tmp_path,
        {**AVRO, "schema_registry": {"url": "http://127.0.0.1:8081/", "username": "u", "password": "s3cret"}},
    )
    config = load_pipeline(path)
    assert config.payload_columns == [("id", "BIGINT"), ("note", "STRING")]
    assert config.value.avro_schema == json.dumps(ORDER)
    registry = config.value.registry
    assert (
        registry is not None
        and registry.url == "http://127.0.0.1:8081"
        and registry.files == {1: json.dumps(ORDER)}
    )
    shown = json.dumps(config.to_dict())
    assert "s3cret" not in shown and '"password": "***"' in shown


@pytest.mark.parametrize(
    ("value", "key", "fix"),
    [
        ({"format": "avro", "writer_schemas": {1: "schemas/order.avsc"}}, "value.schema_file", "give the reader schema"),
        ({**AVRO, "schema_file": "schemas/nope.avsc"}, "value.schema_file", "cannot read"),
        ({**AVRO, "schema": "id BIGINT"}, "value.schema", "Avro columns come from value.schema_file"),
        ({"format": "avro", "schema_file": "schemas/order.avsc"}, "value.writer_schemas", "value.schema_registry.url"),
        ({**AVRO, "schema_registry": {"url": "localhost:8081"}}, "value.schema_registry.url", "http(s)://host:port"),
        ({**AVRO, "schema_registry": {"url": "http://u:p@h:1"}}, "value.schema_registry.url", "no credentials in the url"),
        ({**AVRO, "schema_registry": {"url": "http://h:1", "timeout_seconds": 0}}, "value.schema_registry.timeout_seconds", "more than 0"),
        ({**AVRO, "schema_registry": {"uri": "http://h:1"}}, "value.schema_registry.uri", "did you mean 'url'"),
        ({**AVRO, "writer_schemas": {"v1": "schemas/order.avsc"}}, "value.writer_schemas.v1", "whole number"),
        ({"format": "json", "schema": "id BIGINT", "schema_file": "schemas/order.avsc"}, "value.schema_file", "use format avro"),
        ({"format": "json", "schema": "id BIGINT", "schema_registry": {"url": "http://h:1"}}, "value.schema_registry", "use format avro"),
    ],
)  # fmt: skip
def test_bad_avro_settings_are_refused_with_the_file_the_key_and_the_fix(
    tmp_path: Path, value: dict[str, Any], key: str, fix: str
) -> None:
    path = pipeline(tmp_path, value)
    message = refusal(path)
    assert f"{path}: " in message and f"{key} = " in message and fix in message, message
    assert "u:p@" not in message


def test_a_reader_schema_with_a_reserved_column_is_refused(tmp_path: Path) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "kafka_offset", "type": "long"}]}
    message = refusal(pipeline(tmp_path, AVRO, schema))
    assert "value.schema_file = " in message and "rename it" in message


def test_spark_submit_ships_the_schema_files_and_the_job_finds_them_beside_the_pipeline(
    tmp_path: Path,
) -> None:
    path = pipeline(tmp_path / "src", AVRO)
    assert submit.avro_schema_files(path) == [tmp_path / "src" / "schemas" / "order.avsc"]
    # What a job's SparkFiles folder holds: the YAML and the .avsc side by side, no schemas/ folder.
    shipped = tmp_path / "spark-files"
    shipped.mkdir()
    (shipped / "orders.yaml").write_text(path.read_text())
    (shipped / "order.avsc").write_text(json.dumps(ORDER))
    assert load_pipeline(shipped / "orders.yaml").payload_columns == [("id", "BIGINT"), ("note", "STRING")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_registry_is_retriable_and_bounded_and_files_are_asked_first() -> None:
    settings = schema_registry.RegistrySettings(
        url=f"http://127.0.0.1:{free_port()}", timeout_seconds=1, files={1: "{}"}
    )
    assert schema_registry.resolve(settings, [1, 1]) == {1: "{}"}  # no request for a file's id
    started = time.monotonic()
    with pytest.raises(SchemaRegistryUnavailableError, match="schema id 2") as raised:
        schema_registry.resolve(settings, [2])
    assert time.monotonic() - started < 15 and exit_code(raised.value) == 75
    assert schema_registry.resolve(schema_registry.RegistrySettings(), [5]) == {5: None}


REGISTRY_CONN = {**AVRO, "schema_registry": {"conn_id": "registry"}}


@pytest.mark.parametrize(
    "conn",
    [
        "http://reader:p%40ss@registry.local:8081",
        json.dumps(
            {
                "conn_type": "http",
                "host": "registry.local",
                "port": 8081,
                "login": "reader",
                "password": "p@ss",
            }
        ),
    ],
    ids=["uri", "json"],
)
def test_the_registry_url_and_credentials_come_from_an_airflow_connection(tmp_path: Path, conn: str) -> None:
    config = load_pipeline(pipeline(tmp_path, REGISTRY_CONN))
    resolved = registry_conn.with_connection(config, {"AIRFLOW_CONN_REGISTRY": conn})
    registry = resolved.value.registry
    assert registry is not None
    assert (registry.url, registry.username, registry.password) == (
        "http://registry.local:8081",
        "reader",
        "p@ss",
    )
    assert "p@ss" not in repr(registry)


def test_a_registry_set_in_the_file_and_the_connection_must_agree(tmp_path: Path) -> None:
    path = pipeline(
        tmp_path, {**AVRO, "schema_registry": {"conn_id": "registry", "url": "http://a:1", "password": "x"}}
    )
    config = load_pipeline(path)
    with pytest.raises(
        ConfigError, match=r"value.schema_registry.url and connection 'registry'.*keep it in one place"
    ):
        registry_conn.with_connection(config, {"AIRFLOW_CONN_REGISTRY": "http://b:1"})
    with pytest.raises(ConfigError, match=r"value.schema_registry.password .*\(\*\*\*\)") as raised:
        registry_conn.with_connection(config, {"AIRFLOW_CONN_REGISTRY": "http://u:other@a:1"})
    assert "other" not in str(raised.value)
    assert registry_conn.with_connection(config, {}) is config  # no connection: the file's url


def test_a_registry_connection_that_is_not_defined_is_named(tmp_path: Path) -> None:
    config = load_pipeline(pipeline(tmp_path, REGISTRY_CONN))
    with pytest.raises(ConfigError, match="AIRFLOW_CONN_REGISTRY"):
        registry_conn.with_connection(config, {})
