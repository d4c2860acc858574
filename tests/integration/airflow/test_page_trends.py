"""The Ingestion page's charts on the real broker and real control DBs (SQLite and PostgreSQL): the
lag that a real plan (`eos-ingest plan`) and a real lag check (`eos-ingest check-lag`) recorded,
read back by the plugin's own app, each chart ending at the value the page's tables show.

The batch is committed as the Spark job would commit it (its counts given): the charts read the
control DB, not the table. Without a broker: tests/unit/airflow/test_ingestion_page.py (the page) and
tests/unit/service/test_trends.py (the samples)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from eos_ingest.airflow.ingestion_page import build_app
from eos_ingest.cli import main as cli_main
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.schema import LagSource
from eos_ingest.service.operations import open_store
from tests.helpers import page_users
from tests.helpers.kafka import TxProducer
from tests.helpers.page_charts import figures, latest

pytestmark = pytest.mark.integration


def page_client() -> TestClient:
    """The plugin's app as a viewer sees it (login and access checks overridden)."""
    app = build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = page_users.viewer
    return TestClient(app)


def cell(page: str, cell_id: str) -> str:
    found = re.search(rf'<td class="num" id="{cell_id}">([^<]*)</td>', page)
    assert found, f"no cell {cell_id} on the page"
    return found.group(1)


def test_the_page_charts_the_lag_a_plan_and_a_lag_check_recorded_ending_at_its_tables_values(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    control_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    started = datetime.now(UTC)
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i} for i in range(30)], commit=True, partition=0)
    producer.transaction(topic, [{"id": i} for i in range(4)], commit=True, partition=1)
    config = make_pipeline([topic], control_db_url, alerts={"max_lag_records": 1000, "max_lag_seconds": 3600})

    # A plan, as the ingest DAG's plan task and `eos-ingest run` make it; the job's commit.
    assert cli_main(["plan", "--config", str(config.source)]) == 0
    batch_id = json.loads(capsys.readouterr().out)["batch"]["batch_id"]
    store = open_store(config)
    store.commit_batch(
        batch_id, store.take_fence(batch_id), records_read=34, records_written=33, records_quarantined=1,
        delta_version=0, quarantine_delta_version=None,
    )  # fmt: skip
    # New records, then a lag check, as the alerts DAG runs it.
    producer.transaction(topic, [{"id": i} for i in range(6)], commit=True, partition=0)
    assert cli_main(["check-lag", "--config", str(config.source)]) == 0
    checked = json.loads(capsys.readouterr().out)

    samples = store.lag_samples_since(config.name, started - timedelta(seconds=1))
    # Offsets: 30 + 4 records and a commit marker each; then 6 and a marker behind the commit.
    assert [(s.source, s.lag_records) for s in samples] == [(LagSource.PLAN, 36), (LagSource.CHECK_LAG, 7)]
    assert samples[0].oldest_unread_age_s is None  # a plan reads no record
    assert samples[1].oldest_unread_age_s == checked["oldest_unread_age_s"] and checked["total_lag"] == 7

    monkeypatch.setenv("EOS_PIPELINES_DIR", str(config.source.parent))
    client = page_client()
    page = client.get(f"/pipelines/{config.name}").text
    charts = figures(page)

    assert list(charts) == ["lag", "oldest-unread", "duration", "written", "quarantined"]
    # The lag charts end at the page's own reading: the partitions table's total row.
    assert latest(charts["lag"]) == ("now", cell(page, "total-lag")) == ("now", "7")
    assert latest(charts["oldest-unread"]) == ("now", cell(page, "total-unread"))
    assert cell(page, "total-unread").endswith((" s", " min"))  # the 6 records are unread: an age
    # The batch charts end at the committed batch, as its row shows it.
    row = re.search(rf'<tr id="batch-{batch_id}"[^>]*>(.*?)</tr>', page, re.S)
    assert row is not None
    assert latest(charts["written"]) == (f"batch {batch_id}", "33")
    assert latest(charts["quarantined"]) == (f"batch {batch_id}", "1")
    assert '<td class="num">34</td><td class="num">33</td><td class="num">1</td>' in row.group(1)
    when, took = latest(charts["duration"])
    assert when == f"batch {batch_id}" and f'took <span class="duration">{took}</span>' in row.group(1)

    # The plan's and the check's samples, in one 5-minute bucket (its largest lag) unless a
    # bucket's end fell between them; then now.
    trends = client.get(f"/api/pipelines/{config.name}").json()["trends"]
    points = trends["lag"]
    assert sum(p["samples"] for p in points) == 2 and max(p["lag_records"] for p in points) == 36
    assert points[-1]["oldest_unread_age_s"] == samples[1].oldest_unread_age_s
    (line,) = charts["lag"].iter("polyline")
    assert len(line.get("points", "").split()) == len(points) + 1
    assert [(b["batch_id"], b["records_written"]) for b in trends["batches"]] == [(batch_id, 33)]
    store.close()
