"""Canary secrets planted in pipeline files (through ${VAR}) never show in what echoes values.

The canary is the password of the control DB URLs and the Kafka `sasl.password` of every file,
expanded from the environment. Each file also has a mistake next to them, so that errors quote the
values around. Then everything that shows a value runs: config errors, the CLI's output, the DAG
import errors, the UI plugin's pages and JSON (its FastAPI app in-process), the control DB's batch
errors (the SQLite file's bytes) and the log records. None may hold the canary.

Task logs, XCom and the Data Docs of a real Airflow run are left to an e2e test.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from eos_ingest import airflow_dags, cli, status
from eos_ingest.config import load_pipeline
from eos_ingest.control_store import ControlStore
from eos_ingest.errors import ConfigError
from eos_ingest.planner import Plan, PlannedRange, TopicPartition
from tests.fixtures import page_users
from tests.fixtures.kafka import free_port

CANARY = "S3CR3T-CANARY-xyz"


def kafka(port: int) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",  # nothing listens there
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "svc",
        "sasl.password": "${EOS_TEST_CANARY}",
    }


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """pipelines/: `leaky` (invalid: the canary beside its mistakes), `demo` (valid, SQLite control
    DB holding a failed batch whose error quotes a URL and a setting with the canary)."""
    folder, state = tmp_path / "pipelines", tmp_path / "state"
    folder.mkdir()
    monkeypatch.setenv("EOS_TEST_CANARY", CANARY)
    monkeypatch.setenv("EOS_STATE_DIR", str(state))
    monkeypatch.setenv("EOS_PIPELINES_DIR", str(folder))
    monkeypatch.setattr(status, "KAFKA_TIMEOUT_S", 0.5)
    port = free_port()
    leaky = {
        "name": "leaky",
        "topics": ["orders"],
        "kafka": {**kafka(port), "isolation.level": "read_uncommitted"},  # refused
        "kafka_conn_id": None,
        "value": {"format": "raw"},
        "control_db_url": "mysql://eos:${EOS_TEST_CANARY}@db:3306/eos",  # unsupported scheme
        "control_db_uri": "postgresql+psycopg://eos:${EOS_TEST_CANARY}@db/eos",  # unknown key
        "sasl.password": "${EOS_TEST_CANARY}",  # a Kafka setting outside `kafka:`
        "max_records_per_partition": -1,
    }
    (folder / "leaky.yaml").write_text(yaml.safe_dump(leaky))
    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    demo = {
        "name": "demo",
        "topics": ["orders"],
        "kafka": kafka(port),
        "kafka_conn_id": None,
        "value": {"format": "raw"},
        "control_db_url": db_url,
    }
    (folder / "demo.yaml").write_text(yaml.safe_dump(demo))

    store = ControlStore(db_url)
    store.ensure_schema()
    plan = Plan(ranges=(PlannedRange("orders", 0, 0, 10),), new_partitions=(TopicPartition("orders", 0),))
    batch, _ = store.plan_scheduled("demo", lambda committed: plan)
    assert batch is not None
    error = (
        f"ReadError: could not reach postgresql+psycopg://eos:{CANARY}@db/eos "
        f"with {{'sasl.password': '{CANARY}', 'sasl.username': 'svc'}}"
    )
    store.fail_batch(batch.batch_id, store.take_fence(batch.batch_id), error)
    store.close()
    yield {"folder": folder, "db": tmp_path / "control.db", "batch": batch.batch_id}


def assert_no_canary(text: str | bytes, where: str) -> None:
    needle = CANARY.encode() if isinstance(text, bytes) else CANARY
    assert needle not in text, f"the canary secret shows in {where}"


def test_config_errors_quote_no_secret(site: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as raised:
        load_pipeline(site["folder"] / "leaky.yaml")
    message = str(raised.value)
    assert "control_db_url = 'mysql://eos:***@db:3306/eos'" in message  # the value, redacted
    assert "isolation.level" in message and "max_records_per_partition" in message
    assert_no_canary(message, "the ConfigError")


def test_dag_import_errors_quote_no_secret(site: dict[str, Any]) -> None:
    (line,) = airflow_dags.broken_pipeline_files(site["folder"])
    assert "leaky.yaml" in line
    assert_no_canary(line, "the DAG import error")
    with pytest.raises(ConfigError) as raised:
        airflow_dags.report_broken_pipeline_files(site["folder"].parent / "dags" / "eos_pipeline_files.py")
    assert_no_canary(str(raised.value), "the import error of the DAG file")


def test_cli_output_quotes_no_secret(site: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["status", "--config", str(site["folder"] / "leaky.yaml")])
    out, err = capsys.readouterr()
    assert code == 2 and "ConfigError" in err
    assert_no_canary(out + err, "the CLI's output")


def test_control_db_stores_no_secret_in_a_batch_error(site: dict[str, Any]) -> None:
    store = ControlStore(f"sqlite:///{site['db']}")
    (batch,) = store.list_batches("demo", limit=1)
    store.close()
    assert batch.error is not None and "postgresql+psycopg://eos:***@db/eos" in batch.error
    assert_no_canary(batch.error, "the batch row")
    assert_no_canary(site["db"].read_bytes(), "the control DB file")


def test_plugin_pages_and_json_show_no_secret(site: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    from eos_ingest import airflow_plugin

    app = airflow_plugin.build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = page_users.viewer
    client = TestClient(app)
    caplog.set_level(logging.DEBUG)
    shown = []
    for path in ["/", "/pipelines/demo", "/api/pipelines/demo", "/pipelines/leaky", "/api/pipelines/leaky"]:
        response = client.get(path)
        assert response.status_code in (200, 422), (path, response.status_code)
        assert_no_canary(response.text, path)
        shown.append(response.text)
    assert any("ConfigError" in page or "not valid" in page for page in shown)  # leaky's error is shown
    assert any("eos:***@db/eos" in page for page in shown)  # demo's batch error is shown
    assert_no_canary("\n".join(r.getMessage() for r in caplog.records), "the log records")
