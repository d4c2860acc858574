"""Canary secrets planted in pipeline files (through ${VAR}) never show in what echoes values.

The canary is the password of the control DB URLs and the Kafka `sasl.password` of every file,
expanded from the environment. Each file also has a mistake next to them, so that errors quote the
values around. Then everything that shows a value runs: config errors, the CLI's output, the DAG
import errors, the UI plugin's pages and JSON (its FastAPI app in-process), the control DB's batch
errors (the SQLite file's bytes) and the log records. None may hold the canary.

Each test runs with a plain canary and with one holding every character that ended a match before
(issue 31 item 4): `/`, `+`, `=`, `%2F`, a space, both quotes and a backslash. `typo.yaml` holds
that canary in a `postgres://` control_db_url (the common typo, which SQLAlchemy refuses).

What a task's log shows of an error (its traceback) and of librdkafka runs here too; the task logs,
XCom and the Data Docs of a real Airflow run are left to an e2e test.
"""

from __future__ import annotations

import html
import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml
from fastapi.testclient import TestClient
from markupsafe import escape

from eos_ingest import cli
from eos_ingest.airflow import dags as airflow_dags
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import ConfigError, KafkaUnavailableError
from eos_ingest.kafka.admin import QuietLibrdkafkaLog
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from eos_ingest.service import operations, status
from tests.helpers import page_users
from tests.helpers.ports import free_port

CANARIES = {"plain": "S3CR3T-CANARY-xyz", "special": "S3CR3T/CAN+ARY=%2Fx y'z\"q\\w"}


def kafka(port: int) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",  # nothing listens there
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "svc",
        "sasl.password": "${EOS_TEST_CANARY}",
    }


@pytest.fixture(params=list(CANARIES.values()), ids=list(CANARIES))
def canary(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, canary: str) -> Iterator[dict[str, Any]]:
    """pipelines/: `leaky` (invalid: the canary beside its mistakes), `typo` (invalid: the canary,
    written in the file, in a postgres:// URL), `demo` (valid, SQLite control DB holding a failed
    batch whose error quotes a URL and settings with the canary)."""
    folder, state = tmp_path / "pipelines", tmp_path / "state"
    folder.mkdir()
    monkeypatch.setenv("EOS_TEST_CANARY", canary)
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
    # The case: the URL is the one place of the file that holds the secret.
    typo = {**leaky, "name": "typo", "kafka": {"bootstrap.servers": f"127.0.0.1:{port}"}}
    typo["control_db_url"] = f"postgres://eos:{canary}@db/eos"
    del typo["control_db_uri"], typo["sasl.password"], typo["max_records_per_partition"]
    (folder / "typo.yaml").write_text(yaml.safe_dump(typo))
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
    settings = {"sasl.password": canary, "sasl.username": "svc"}
    error = (
        f"ReadError: could not reach postgresql+psycopg://eos:{canary}@db/eos with {settings!r}\n"
        f"librdkafka: refused sasl.password={canary}\nas JSON: {json.dumps(settings)}"
    )
    store.fail_batch(batch.batch_id, store.take_fence(batch.batch_id), error)
    store.close()
    yield {"folder": folder, "db": tmp_path / "control.db", "batch": batch.batch_id}


def shown_forms(canary: str) -> set[str]:
    """The canary and each of its words, as text, a repr, JSON, HTML and percent-decoded show them."""
    pieces = {canary, *canary.split()}
    return {
        form
        for piece in pieces
        for form in (
            piece,
            repr(piece)[1:-1],
            json.dumps(piece)[1:-1],
            html.escape(piece),
            str(escape(piece)),
            unquote(piece),
        )
    }


def assert_no_canary(text: str | bytes, where: str, canary: str) -> None:
    shown = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    leaked = sorted(form for form in shown_forms(canary) if form in shown)
    assert not leaked, f"the canary secret shows in {where}: {leaked}"


def test_config_errors_quote_no_secret(site: dict[str, Any], canary: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_pipeline(site["folder"] / "leaky.yaml")
    message = str(raised.value)
    assert "control_db_url = 'mysql://eos:***@db:3306/eos'" in message  # the value, redacted
    assert "isolation.level" in message and "max_records_per_partition" in message
    assert_no_canary(message, "the ConfigError", canary)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(site["folder"] / "typo.yaml")
    assert "control_db_url = 'postgres://eos:***@db/eos' is not valid" in str(raised.value)
    assert_no_canary(str(raised.value), "the ConfigError of the postgres:// typo", canary)


def test_dag_import_errors_quote_no_secret(site: dict[str, Any], canary: str) -> None:
    leaky, typo = airflow_dags.broken_pipeline_files(site["folder"])
    assert "leaky.yaml" in leaky and "typo.yaml" in typo and "postgres://eos:***@db/eos" in typo
    assert_no_canary(leaky + typo, "the DAG import error", canary)
    with pytest.raises(ConfigError) as raised:
        airflow_dags.report_broken_pipeline_files(site["folder"].parent / "dags" / "eos_pipeline_files.py")
    assert_no_canary(str(raised.value), "the import error of the DAG file", canary)


def test_cli_output_quotes_no_secret(
    site: dict[str, Any], canary: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("leaky", "typo"):
        code = cli.main(["status", "--config", str(site["folder"] / f"{name}.yaml")])
        out, err = capsys.readouterr()
        assert code == 2 and "ConfigError" in err, name
        assert_no_canary(out + err, f"the CLI's output for {name}.yaml", canary)
    # `status` of the valid file: its batch error, read from the control DB. No broker listens (the
    # CLI retries for half a minute): the read gives no partitions, and then the broker's refusal.
    monkeypatch.setattr(operations, "fetch_partition_offsets", lambda settings, topics: [])
    assert cli.main(["status", "--config", str(site["folder"] / "demo.yaml")]) == 0
    out, err = capsys.readouterr()
    assert "eos:***@db/eos" in json.loads(out)["batches"][0]["error"]
    assert_no_canary(out + err, "`eos-ingest status`", canary)

    def refused(settings: dict[str, str], topics: list[str]) -> list[Any]:
        raise KafkaUnavailableError(f"broker refused sasl.password={canary} of {settings!r}")

    monkeypatch.setattr(operations, "fetch_partition_offsets", refused)
    assert cli.main(["status", "--config", str(site["folder"] / "demo.yaml")]) == 75
    out, err = capsys.readouterr()
    assert "KafkaUnavailableError" in err and "sasl.password=***" in err
    assert_no_canary(out + err, "`eos-ingest status` without a broker", canary)


def test_control_db_stores_no_secret_in_a_batch_error(site: dict[str, Any], canary: str) -> None:
    store = ControlStore(f"sqlite:///{site['db']}")
    (batch,) = store.list_batches("demo", limit=1)
    store.close()
    assert batch.error is not None and "postgresql+psycopg://eos:***@db/eos" in batch.error
    assert_no_canary(batch.error, "the batch row", canary)
    assert_no_canary(site["db"].read_bytes(), "the control DB file", canary)


def test_plugin_pages_and_json_show_no_secret(
    site: dict[str, Any], canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    from eos_ingest.airflow import ingestion_page as airflow_plugin

    app = airflow_plugin.build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = page_users.viewer
    client = TestClient(app)
    caplog.set_level(logging.DEBUG)
    shown = []
    for name in ("demo", "leaky", "typo"):
        for path in ["/", f"/pipelines/{name}", f"/api/pipelines/{name}"]:
            response = client.get(path)
            assert response.status_code in (200, 422), (path, response.status_code)
            assert_no_canary(response.text, path, canary)
        shown.append(response.text)
    assert any("ConfigError" in page or "not valid" in page for page in shown)  # leaky's error is shown
    assert any("eos:***@db/eos" in page for page in shown)  # demo's batch error is shown
    assert_no_canary("\n".join(r.getMessage() for r in caplog.records), "the log records", canary)


def test_task_errors_and_logs_show_no_secret(canary: str, caplog: pytest.LogCaptureFixture) -> None:
    """What a task's log shows of an error (its traceback: str() of our errors, which redact by
    pattern alone) and librdkafka's log lines (a `debug: conf` dump, a SASL error)."""
    settings = {"sasl.password": canary, "sasl.username": "svc"}
    message = (
        f"broker at kafka://svc:{canary}@b:9092 refused {settings!r}; "
        f"sasl.jaas.config=x.PlainLoginModule required username='svc' password={canary!r};\n"
        f"sasl.password={canary}\n  ssl.key.password: {canary}\nas JSON: {json.dumps(settings)}"
    )
    try:
        raise KafkaUnavailableError(message)
    except KafkaUnavailableError:
        log = traceback.format_exc()
    assert "sasl.username': 'svc'" in log and "kafka://svc:***@b:9092" in log
    assert_no_canary(log, "a task's traceback", canary)
    caplog.set_level(logging.DEBUG)
    QuietLibrdkafkaLog().log(7, "CONF|rdkafka#consumer-1| %s", message)
    (record,) = caplog.records
    assert "sasl.username" in record.getMessage()
    assert_no_canary(record.getMessage(), "librdkafka's log line", canary)
