"""key.format avro: the key's reader and writer schemas, the value's registry it shares, and every
refusal naming the file, the key and the fix. No Spark (the decoding: integration/formats/test_avro_key.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.formats import avro_key
from eos_ingest.spark import submit

KEY = {"type": "record", "name": "OrderKey", "fields": [{"name": "order_id", "type": "long"}]}
JSON_VALUE = {"format": "json", "schema": "id BIGINT"}
REGISTRY_VALUE = {
    "format": "avro",
    "schema_file": "schemas/key.avsc",  # any record does as the value's reader here
    "schema_registry": {"url": "http://127.0.0.1:8081", "username": "u", "password": "s3cret"},
}


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)


def pipeline(folder: Path, key: dict[str, Any], value: dict[str, Any] = JSON_VALUE) -> Path:
    (folder / "schemas").mkdir(parents=True, exist_ok=True)
    (folder / "schemas" / "key.avsc").write_text(json.dumps(KEY))
    (folder / "schemas" / "not_a_record.avsc").write_text('"string"')
    path = folder / "orders.yaml"
    path.write_text(yaml.safe_dump({"name": "orders", "topics": ["orders"], "key": key, "value": value}))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    return str(raised.value)


def test_an_avro_key_with_writer_files_reads_them_and_ships_them(tmp_path: Path) -> None:
    path = pipeline(
        tmp_path,
        {"format": "avro", "schema_file": "schemas/key.avsc", "writer_schemas": {7: "schemas/key.avsc"}},
    )
    config = load_pipeline(path)
    meta = config.metadata
    assert (meta.key_format, json.loads(meta.key_schema or "")) == ("avro", KEY)
    assert dict(meta.key_writer_schemas) == {7: json.dumps(KEY)}
    registry = avro_key.registry(config)
    assert (registry.url, dict(registry.files)) == (None, {7: json.dumps(KEY)})
    assert submit.avro_schema_files(path) == [(tmp_path / "schemas" / "key.avsc").resolve()]
    assert json.loads(json.dumps(config.to_dict()))["metadata"]["key_writer_schemas"] == [
        "7"
    ]  # the ids (JSON keys); the texts are long


def test_an_avro_key_shares_the_values_registry(tmp_path: Path) -> None:
    config = load_pipeline(
        pipeline(tmp_path, {"format": "avro", "schema_file": "schemas/key.avsc"}, REGISTRY_VALUE)
    )
    registry = avro_key.registry(config)
    assert (registry.url, registry.username, registry.password) == ("http://127.0.0.1:8081", "u", "s3cret")
    assert dict(registry.files) == {}


def test_the_default_key_keeps_todays_columns(tmp_path: Path) -> None:
    meta = load_pipeline(pipeline(tmp_path, {})).metadata
    assert (meta.key_format, meta.key_schema, dict(meta.key_writer_schemas)) == ("raw", None, {})


@pytest.mark.parametrize(
    ("key", "value", "where", "fix"),
    [
        ({"format": "avro"}, JSON_VALUE, "key.schema_file", "give the reader schema of the keys"),
        ({"format": "avro", "schema_file": "schemas/nope.avsc"}, JSON_VALUE, "key.schema_file", "cannot read"),
        ({"format": "avro", "schema_file": "schemas/not_a_record.avsc"}, JSON_VALUE, "key.schema_file", "Avro record"),
        ({"format": "avro", "schema_file": "schemas/key.avsc"}, JSON_VALUE, "key.writer_schemas", "value.schema_registry.url"),
        ({"format": "avro", "schema_file": "schemas/key.avsc", "writer_schemas": {"v1": "schemas/key.avsc"}}, JSON_VALUE, "key.writer_schemas.v1", "whole number"),
        ({"format": "string", "schema_file": "schemas/key.avsc"}, JSON_VALUE, "key.schema_file", "use format avro"),
        ({"format": "raw", "writer_schemas": {1: "schemas/key.avsc"}}, JSON_VALUE, "key.writer_schemas", "use format avro"),
        ({"format": "protobuf"}, JSON_VALUE, "key.format", "'avro'"),
    ],
)  # fmt: skip
def test_bad_avro_key_settings_are_refused_with_the_file_the_key_and_the_fix(
    tmp_path: Path, key: dict[str, Any], value: dict[str, Any], where: str, fix: str
) -> None:
    path = pipeline(tmp_path, key, value)
    message = refusal(path)
    assert f"{path}: " in message and f"{where} = " in message and fix in message, message
