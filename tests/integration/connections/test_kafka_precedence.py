"""The CLI reads a pipeline's Kafka connection the way Airflow does, and refuses a second cluster.

The file below has no ``kafka:`` section and its built-in default points where nothing listens,
so a batch that plans, reads and commits proves the connection's settings reached the planner
and the spark-submit job.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eos_ingest.cli import main as cli_main
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.control.store import ControlStore
from tests.helpers.kafka import TxProducer

JSON_SCHEMA = "id BIGINT, name STRING, amount DOUBLE"


def write_pipeline(tmp_path: Path, topic: str, kafka: dict[str, str] | None) -> Path:
    doc: dict[str, object] = {
        "name": "prec",
        "topics": [topic],
        "value": {"format": "json", "schema": JSON_SCHEMA},
        "output": {"path": str(tmp_path / "tables" / "prec")},
        "control_db_url": f"sqlite:///{tmp_path / 'control.db'}",
        "schedule": None,
    }
    if kafka is not None:
        doc["kafka"] = kafka
    path = tmp_path / "prec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def connection(bootstrap: str) -> str:
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})


def test_the_cli_runs_a_batch_on_the_connections_cluster_when_the_file_names_none(
    tmp_path: Path, topic: str, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    producer = TxProducer(kafka_bootstrap)
    for partition in range(3):
        rows = [{"id": i, "name": "n", "amount": 1.0} for i in range(5)]
        producer.transaction(topic, rows, commit=True, partition=partition)
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", "127.0.0.1:9")  # the file's default: nothing listens
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", connection(kafka_bootstrap))
    path = write_pipeline(tmp_path, topic, kafka=None)

    assert cli_main(["run", "--config", str(path)]) == 0

    summary = json.loads(capfd.readouterr().out)
    assert summary["status"] == "committed" and summary["records_read"] == 15
    config = load_pipeline(path)
    assert config.kafka["bootstrap.servers"] == "127.0.0.1:9"  # the file alone would not reach it


def test_the_cli_refuses_a_connection_that_names_another_cluster_than_the_file(
    tmp_path: Path, topic: str, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", connection("127.0.0.1:9"))
    path = write_pipeline(tmp_path, topic, kafka={"bootstrap.servers": kafka_bootstrap})

    assert cli_main(["plan", "--config", str(path)]) == 2

    err = capfd.readouterr().err
    assert f"kafka.bootstrap.servers is '{kafka_bootstrap}' in the file but '127.0.0.1:9'" in err
    assert "Airflow connection 'kafka_default'" in err
    store = ControlStore(f"sqlite:///{tmp_path / 'control.db'}")
    store.ensure_schema()
    assert store.list_batches("prec") == []  # refused before any plan
