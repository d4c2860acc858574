"""One rule for where a pipeline's Kafka settings come from, the same in the CLI, the DAGs, the
job and the Ingestion page: the file's ``kafka:`` joined with the connection's extra; a key set
in both to different values is refused; a file without ``kafka:`` takes the connection's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.connections.kafka import (
    config_for_cli,
    connection_settings_from_env,
    resolve_kafka_settings,
    with_kafka_overrides,
)
from eos_ingest.errors import ConfigError


def pipeline(tmp_path: Path, kafka: dict[str, str] | None) -> PipelineConfig:
    doc: dict[str, object] = {"name": "p", "topics": ["t"], "value": {"format": "raw"}}
    if kafka is not None:
        doc["kafka"] = kafka
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    return load_pipeline(tmp_path / "p.yaml")


@pytest.mark.parametrize(
    ("file_kafka", "conn", "expected"),
    [
        ({"bootstrap.servers": "a:1"}, None, {"bootstrap.servers": "a:1"}),
        # The connection adds what the file leaves out (typically the secrets).
        (
            {"bootstrap.servers": "a:1"},
            {"sasl.username": "u", "sasl.password": "p"},
            {"bootstrap.servers": "a:1", "sasl.username": "u", "sasl.password": "p"},
        ),
        # Set in both to the same value: fine.
        ({"bootstrap.servers": "a:1"}, {"bootstrap.servers": "a:1"}, {"bootstrap.servers": "a:1"}),
        # No kafka: section: the built-in default gives way to the connection.
        (None, {"bootstrap.servers": "c:9"}, {"bootstrap.servers": "c:9"}),
    ],
)
def test_the_file_and_the_connection_are_joined(
    tmp_path: Path, file_kafka: dict[str, str] | None, conn: dict[str, str] | None, expected: dict[str, str]
) -> None:
    assert resolve_kafka_settings(pipeline(tmp_path, file_kafka), conn) == expected


def test_a_key_set_in_both_to_different_values_is_refused_without_showing_secrets(tmp_path: Path) -> None:
    config = pipeline(tmp_path, {"bootstrap.servers": "a:1", "sasl.password": "file-secret-1"})
    with pytest.raises(ConfigError) as error:
        resolve_kafka_settings(config, {"bootstrap.servers": "b:2", "sasl.password": "conn-secret-2"}, "prod")
    text = str(error.value)
    assert "kafka.bootstrap.servers is 'a:1' in the file but 'b:2' in Airflow connection 'prod'" in text
    assert "kafka.sasl.password is *** in the file but *** in" in text
    assert "file-secret-1" not in text and "conn-secret-2" not in text
    assert str(config.source) in text and "kafka_conn_id: null" in text


def test_the_job_applies_the_same_rule_to_the_settings_it_is_handed(tmp_path: Path) -> None:
    config = pipeline(tmp_path, {"bootstrap.servers": "a:1"})
    with pytest.raises(ConfigError, match="one cluster"):
        with_kafka_overrides(config, json.dumps({"bootstrap.servers": "b:2"}))
    joined = with_kafka_overrides(config, json.dumps({"sasl.password": "x"}))
    assert joined.kafka == {"bootstrap.servers": "a:1", "sasl.password": "x"}


@pytest.mark.parametrize(
    "value",
    [
        json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "c:9", "enable.idempotence": True}}),
        json.dumps(
            {
                "conn_type": "kafka",
                "extra": json.dumps({"bootstrap.servers": "c:9", "enable.idempotence": True}),
            }
        ),
        "kafka://?bootstrap.servers=c%3A9&enable.idempotence=true",
        "kafka://?__extra__=%7B%22bootstrap.servers%22%3A%20%22c%3A9%22%2C%20%22enable.idempotence%22%3A%20true%7D",
    ],
)
def test_the_cli_reads_the_connection_from_its_airflow_environment_variable(
    tmp_path: Path, value: str
) -> None:
    env = {"AIRFLOW_CONN_KAFKA_DEFAULT": value}
    assert connection_settings_from_env("kafka_default", env) == {
        "bootstrap.servers": "c:9",
        "enable.idempotence": "true",
    }
    config, conn = config_for_cli(pipeline(tmp_path, None), env)
    assert config.kafka["bootstrap.servers"] == "c:9" and conn is not None


def test_the_cli_without_a_connection_uses_the_file(tmp_path: Path) -> None:
    config = pipeline(tmp_path, {"bootstrap.servers": "a:1"})
    assert config_for_cli(config, {}) == (config, None)
    assert connection_settings_from_env(None, {"AIRFLOW_CONN_KAFKA_DEFAULT": "{}"}) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"conn_type": "kafka", "extra": {"sasl.password": "s3cr3t-x"', "not valid JSON"),
        (json.dumps({"conn_type": "spark", "host": "local"}), "conn_type 'spark'"),
        ("no-scheme-s3cr3t-x", "no connection type"),
    ],
)
def test_a_bad_connection_variable_is_refused_without_echoing_it(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        connection_settings_from_env("kafka_default", {"AIRFLOW_CONN_KAFKA_DEFAULT": value})
    assert "s3cr3t-x" not in str(error.value) and "AIRFLOW_CONN_KAFKA_DEFAULT" in str(error.value)
