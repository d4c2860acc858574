"""Lag alerts without a broker: the `alerts:` block's rules, and which limits figures pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.cli import main as cli_main
from eos_ingest.config.pipeline import AlertsConfig, load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.service.lag_alerts import RECORDS, SECONDS, evaluate


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)
    return tmp_path / "state"


def orders(tmp_path: Path, alerts: Any) -> Path:
    path = tmp_path / "orders.yaml"
    doc = {"name": "orders", "topics": ["orders"], "value": {"format": "raw"}, "alerts": alerts}
    path.write_text(yaml.safe_dump(doc))
    return path


def test_an_alerts_block_loads_with_its_defaults(tmp_path: Path) -> None:
    config = load_pipeline(orders(tmp_path, {"max_lag_seconds": "3600"}))  # a ${VAR} is a string

    assert config.alerts == AlertsConfig(max_lag_seconds=3600, schedule="*/15 * * * *")
    assert load_pipeline(orders(tmp_path, None)).alerts is None
    full = {"max_lag_records": 5, "max_lag_seconds": 60, "schedule": "@hourly", "on_failure_callback": "a.b"}
    assert load_pipeline(orders(tmp_path, full)).alerts == AlertsConfig(
        max_lag_records=5, max_lag_seconds=60, schedule="@hourly", on_failure_callback="a.b"
    )


@pytest.mark.parametrize(
    ("alerts", "expected"),
    [
        ({}, "alerts.max_lag_seconds = None is not valid; give max_lag_records, max_lag_seconds or both"),
        ({"max_lag_records": 0}, "alerts.max_lag_records = 0 is not valid; use a whole number >= 1"),
        ({"max_lag_seconds": -5}, "alerts.max_lag_seconds = -5 is not valid; use a whole number >= 1"),
        ({"max_lag_records": True}, "alerts.max_lag_records = True is not valid; use a whole number >= 1"),
        ({"max_lag_records": 1, "schedule": "every 5"}, "alerts.schedule = 'every 5' is not valid; use a 5-field cron"),
        ({"max_lag_records": 1, "schedule": "61 * * * *"}, "alerts.schedule = '61 * * * *' is not valid;"),
        ({"max_lag_records": 1, "on_failure_callback": "notify"}, "alerts.on_failure_callback = 'notify' is not valid; give the dotted path"),
        ({"max_lag_records": 1, "limit": 3}, "alerts.limit = 3 is not valid; unknown key"),
        ([1], "alerts = [1] is not valid; it must be a mapping"),
    ],
)  # fmt: skip
def test_a_bad_alerts_block_names_the_file_the_key_and_the_fix(
    tmp_path: Path, alerts: Any, expected: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_pipeline(orders(tmp_path, alerts))
    assert f"orders.yaml: {expected}" in str(err.value)


def row(partition: int, lag: int | None, age: float | None = None, unknown: bool = False) -> dict[str, Any]:
    return {
        "topic": "orders", "partition": partition, "lag": lag,
        "oldest_unread_age_s": age, "oldest_unread_unknown": unknown,
    }  # fmt: skip


def test_the_total_lag_passes_max_lag_records_and_the_partitions_above_it_are_named() -> None:
    limits = AlertsConfig(max_lag_records=100)
    rows = [row(0, 150, 2.0), row(1, 30, 1.0), row(2, -4)]  # a negative lag counts as 0

    check = evaluate("orders", limits, rows, None)

    assert check.failed and check.total_lag == 180 and check.oldest_unread_age_s == 2.0
    assert [(p.limit, p.where, p.figure) for p in check.passed] == [
        (RECORDS, "orders[0]", 150), (RECORDS, "total", 180),
    ]  # fmt: skip
    assert check.message() == ("pipeline orders: lag 180 records (offsets) > max_lag_records 100 (orders[0])")
    assert [p["passed"] for p in check.partitions] == [[RECORDS], [], []]


def test_a_total_above_the_limit_fails_though_no_partition_alone_is() -> None:
    check = evaluate("orders", AlertsConfig(max_lag_records=100), [row(0, 60), row(1, 60)], None)

    assert (
        check.failed and check.message() == "pipeline orders: lag 120 records (offsets) > max_lag_records 100"
    )


def test_the_oldest_unread_age_passes_max_lag_seconds() -> None:
    limits = AlertsConfig(max_lag_records=1000, max_lag_seconds=60)

    check = evaluate("orders", limits, [row(0, 5, 61.5), row(1, 5, 10.0)], None)

    assert check.failed and [(p.limit, p.where) for p in check.passed] == [
        (SECONDS, "orders[0]"), (SECONDS, "total"),
    ]  # fmt: skip
    assert check.message() == (
        "pipeline orders: oldest unread record 61.5 s old > max_lag_seconds 60 (orders[0])"
    )


def test_figures_at_the_limits_pass_nothing() -> None:
    check = evaluate(
        "orders", AlertsConfig(max_lag_records=100, max_lag_seconds=60), [row(0, 100, 60.0), row(1, 0)], None
    )

    assert not check.failed and check.passed == ()
    assert check.message() == (
        "pipeline orders: within its lag limits (lag 100 records (offsets), oldest unread record 60 s)"
    )


def test_an_unread_age_is_unknown_only_when_an_age_limit_needs_it() -> None:
    rows = [row(0, 5, None, unknown=True)]

    assert evaluate("orders", AlertsConfig(max_lag_records=10), rows, "timed out").unknown is None
    unknown = evaluate("orders", AlertsConfig(max_lag_seconds=10), rows, "timed out").unknown
    assert unknown == "the oldest unread record of orders[0] was not read: timed out"


def test_check_lag_without_any_limit_exits_2_and_says_how_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "orders.yaml"
    path.write_text("name: orders\ntopics: [orders]\nvalue: {format: raw}\n")

    assert cli_main(["check-lag", "--config", str(path)]) == 2
    assert "has no lag limit: add `alerts: {max_lag_records" in capsys.readouterr().err


def test_the_pipeline_page_shows_the_limits_beside_the_lag_and_its_age(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from eos_ingest.airflow.ingestion_page import build_app
    from eos_ingest.service import status
    from tests.helpers import page_users
    from tests.helpers.ports import free_port

    folder = tmp_path / "pipelines"
    folder.mkdir()
    for name, alerts in (("orders", {"max_lag_records": 250000, "max_lag_seconds": 5400}), ("plain", None)):
        doc = {
            "name": name, "topics": [name], "kafka_conn_id": None, "value": {"format": "raw"},
            "kafka": {"bootstrap.servers": f"127.0.0.1:{free_port()}"},  # closed: the page still answers
            "control_db_url": f"sqlite:///{tmp_path / 'control.db'}", "alerts": alerts,
        }  # fmt: skip
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("EOS_PIPELINES_DIR", str(folder))
    monkeypatch.setattr(status, "KAFKA_TIMEOUT_S", 0.5)
    app = build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = page_users.viewer
    client = TestClient(app)

    page = client.get("/pipelines/orders").text
    limits = page.split("<dt>Lag alerts</dt><dd>", 1)[1].split("</dd>", 1)[0]
    assert "lag above 250,000 records, or oldest unread older than 1 h 30 min" in limits
    assert "(checked */15 * * * *)" in limits
    assert client.get("/api/pipelines/orders").json()["alerts"]["max_lag_seconds"] == 5400
    plain = client.get("/pipelines/plain").text
    assert "<dt>Lag alerts</dt><dd>none (<code>alerts:</code> in the pipeline file)</dd>" in plain
