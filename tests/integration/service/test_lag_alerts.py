"""Lag alerts against a real broker and a real control DB: `eos-ingest check-lag` and the
eos_alerts__<name> DAG run by Airflow's own task runner (dag.test), its callback included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from eos_ingest import paths
from eos_ingest.cli import main as cli_main
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.errors import EXIT_LAG_LIMIT
from eos_ingest.service.operations import open_store
from tests.helpers.batches import ingest_first_batch
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def check_lag(
    config: PipelineConfig, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, dict, str]:
    code = cli_main(["check-lag", "--config", str(config.source), *options])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_unread_records_past_max_lag_records_fail_the_check_and_under_it_pass(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    control_db_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i} for i in range(30)], commit=True, partition=0)
    producer.transaction(topic, [{"id": i} for i in range(4)], commit=True, partition=1)
    # Fresh records: the age limit holds, only the records limit is passed.
    config = make_pipeline([topic], control_db_url, alerts={"max_lag_records": 20, "max_lag_seconds": 3600})

    code, shown, err = check_lag(config, capsys)

    assert code == EXIT_LAG_LIMIT == 4
    # 30 records + a commit marker on partition 0, 4 + 1 on partition 1: offsets, as the page's lag.
    assert shown["total_lag"] == 36 and shown["failed"] is True
    assert [(p["limit"], p["where"], p["figure"]) for p in shown["passed"]] == [
        ("max_lag_records", f"{topic}[0]", 31), ("max_lag_records", "total", 36),
    ]  # fmt: skip
    assert f"pipeline itest: lag 36 records (offsets) > max_lag_records 20 ({topic}[0])" in err
    assert shown["oldest_unread_age_s"] < 3600

    assert check_lag(config, capsys, "--max-lag-records", "36")[0] == 0  # at the limit: not passed

    ingest_first_batch(config, open_store(config))  # plan to the LSOs, commit: lag 0
    code, shown, _ = check_lag(config, capsys)
    assert code == 0 and shown["total_lag"] == 0 and shown["passed"] == []
    assert shown["oldest_unread_age_s"] is None  # nothing unread


def test_records_older_than_max_lag_seconds_fail_the_check(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = make_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    hour_ago_ms = int((time.time() - 3600) * 1000)
    for i in range(3):  # CreateTime: the record keeps the timestamp its producer gave it
        producer.produce(topic, json.dumps({"id": i}).encode(), partition=0, timestamp=hour_ago_ms + i)
    producer.flush(30)
    config = make_pipeline(
        [topic], f"sqlite:///{tmp_path / 'control.db'}",
        alerts={"max_lag_records": 1000, "max_lag_seconds": 1800},
    )  # fmt: skip

    code, shown, err = check_lag(config, capsys)

    assert code == EXIT_LAG_LIMIT
    assert [(p["limit"], p["where"]) for p in shown["passed"]] == [
        ("max_lag_seconds", f"{topic}[0]"), ("max_lag_seconds", "total"),
    ]  # fmt: skip
    assert 3600 <= shown["oldest_unread_age_s"] < 3700 and shown["total_lag"] == 3
    assert "pipeline itest: oldest unread record 36" in err and "s old > max_lag_seconds 1800" in err
    assert check_lag(config, capsys, "--max-lag-seconds", "7200")[0] == 0


NOTIFIER = '''
import json, os

from airflow.sdk import BaseNotifier


class FileNotifier(BaseNotifier):
    """Writes what a Slack or SMTP notifier would send to the file $ALERT_FILE."""

    def notify(self, context):
        ti = context["ti"]
        with open(os.environ["ALERT_FILE"], "w") as f:
            json.dump({"dag_id": ti.dag_id, "task_id": ti.task_id, "error": str(context.get("exception"))}, f)
'''


def test_the_alerts_dag_fails_when_a_limit_is_passed_and_calls_its_notifier(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    tmp_path: Path,
) -> None:
    """Airflow's own path: dag.test() runs check_lag in its task runner; the task fails and the
    runner calls the notifier class alerts.on_failure_callback names."""
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, [{"id": i} for i in range(12)], commit=True, partition=0)
    (tmp_path / "eos_test_notify.py").write_text(NOTIFIER)
    config = make_pipeline(
        [topic], f"sqlite:///{tmp_path / 'control.db'}", kafka_conn_id=None,
        alerts={"max_lag_records": 10, "on_failure_callback": "eos_test_notify.FileNotifier"},
    )  # fmt: skip
    alert = tmp_path / "alert.json"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(paths.REPO_ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "EOS_PIPELINES_DIR": str(config.source.parent),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(paths.REPO_ROOT)]),
        "ALERT_FILE": str(alert),
    }
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)

    run = subprocess.run(
        [sys.executable, "-m", "tests.integration.service.alerts_dag_run", "eos_alerts__itest"],
        env=env, cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip

    assert run.returncode == 0, run.stderr[-4000:]
    states = json.loads(run.stdout.strip().splitlines()[-1])
    assert states == {"run": "failed", "tasks": {"check_lag": "failed"}}
    sent = json.loads(alert.read_text())
    assert sent["dag_id"] == "eos_alerts__itest" and sent["task_id"] == "check_lag"
    assert "pipeline itest: lag 13 records (offsets) > max_lag_records 10" in sent["error"]
