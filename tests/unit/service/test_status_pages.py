"""The Ingestion page's history in pages (keyset on the batch id) and the age of the lag.

A real SQLite control DB holding 10,000 batches, written by the control store's own insert in one
transaction (plan + commit per batch takes ~80 ms here: 14 minutes for 10,000). Kafka is a closed
port, or its timestamps are given: the broker's side is tests/integration/service/test_status.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import event

from eos_ingest.airflow.ingestion_page import build_app
from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.control import queries as control_queries
from eos_ingest.control.store import BatchKind, ControlStore
from eos_ingest.plan.ranges import PartitionOffsets, PlannedRange
from eos_ingest.service import status
from eos_ingest.service.status import batch_page, oldest_unread, pipeline_status
from tests.helpers import page_users
from tests.helpers.ports import free_port

MANY = 10_000


def insert_batches(store: ControlStore, pipeline: str, count: int) -> list[int]:
    """`count` planned backfill batches of one range each, through the control store's insert, one transaction."""

    def run(conn: Any) -> list[int]:
        return [
            control_queries.insert_batch(
                conn, pipeline, BatchKind.BACKFILL, [PlannedRange("orders", 0, i, i + 1)], "test", None
            )
            for i in range(count)
        ]

    return store._db.run(run, write=True)  # bulk fill for a test, the plans' own insert


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """pipelines/demo.yaml on a control DB with 10,000 batches of demo and 5 of another pipeline
    interleaved (their ids are gaps in demo's)."""
    root = tmp_path_factory.mktemp("many")
    folder = root / "pipelines"
    folder.mkdir()
    db_url = f"sqlite:///{root / 'control.db'}"
    doc = {
        "name": "demo", "topics": ["orders"], "kafka_conn_id": None, "value": {"format": "raw"},
        "kafka": {"bootstrap.servers": f"127.0.0.1:{free_port()}"}, "control_db_url": db_url,
    }  # fmt: skip
    (folder / "demo.yaml").write_text(yaml.safe_dump(doc))
    store = ControlStore(db_url)
    store.ensure_schema()
    started = time.perf_counter()
    ids = insert_batches(store, "demo", MANY // 2)
    others = insert_batches(store, "other", 5)
    ids += insert_batches(store, "demo", MANY - MANY // 2)
    fill_s = time.perf_counter() - started
    yield {"folder": folder, "store": store, "ids": ids, "others": others, "fill_s": fill_s, "url": db_url}
    store.close()


@pytest.fixture
def client(many: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> TestClient:
    monkeypatch.setenv("EOS_PIPELINES_DIR", str(many["folder"]))
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(status, "KAFKA_TIMEOUT_S", 0.5)
    app = build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = page_users.viewer  # may read every pipeline
    return TestClient(app)


def shown_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="batch-(\d+)"', page)]


def href(page: str, text: str) -> str:
    found = re.search(r'<a href="([^"]+)">' + re.escape(text) + "</a>", page)
    assert found, f"no link {text!r} on the page"
    return found.group(1).replace("&amp;", "&")


def test_the_page_shows_the_newest_batches_and_its_links_walk_the_history(
    client: TestClient, many: dict[str, Any]
) -> None:
    ids = many["ids"]
    first = client.get("/pipelines/demo?batches=25")
    assert first.status_code == 200
    assert shown_ids(first.text) == ids[::-1][:25]
    assert ">newer<" not in first.text  # the newest page has no newer one

    older = client.get("/pipelines/demo" + href(first.text, "older"))
    assert shown_ids(older.text) == ids[::-1][25:50]
    # Across the other pipeline's ids (in the middle of demo's): no batch lost or repeated.
    middle = client.get(f"/pipelines/demo?batches=25&before={many['others'][-1]}")
    assert shown_ids(middle.text) == [i for i in ids if i < many["others"][-1]][::-1][:25]

    newer = client.get("/pipelines/demo" + href(older.text, "newer"))
    assert shown_ids(newer.text) == ids[::-1][:25]
    oldest = client.get(f"/pipelines/demo?batches=25&before={ids[25]}")
    assert shown_ids(oldest.text) == ids[:25][::-1]
    assert ">older<" not in oldest.text and "oldest page" in oldest.text


def test_the_json_pages_by_the_same_keys(client: TestClient, many: dict[str, Any]) -> None:
    ids = many["ids"]
    body = client.get(f"/api/pipelines/demo?batches=10&before={ids[5000]}").json()
    assert [b["batch_id"] for b in body["batches"]] == ids[4990:5000][::-1]
    assert body["page"] == {"newer_after": ids[4999], "older_before": ids[4990]}
    up = client.get(f"/api/pipelines/demo?batches=10&after={ids[4999]}").json()
    assert [b["batch_id"] for b in up["batches"]] == ids[5000:5010][::-1]
    # Near the top, a page above `after` is the first page, full.
    top = client.get(f"/api/pipelines/demo?batches=10&after={ids[-3]}").json()
    assert [b["batch_id"] for b in top["batches"]] == ids[::-1][:10]
    assert top["page"]["newer_after"] is None
    assert client.get("/api/pipelines/demo?before=0").status_code == 422


def test_a_page_is_read_by_the_index_not_by_an_offset(many: dict[str, Any]) -> None:
    """Keyset, not OFFSET: every query of a page deep in the history searches the index on
    (pipeline, batch_id) (SQLite's plan; PostgreSQL's b-tree serves the same predicate), so the
    page at the 9,900th batch costs what the first costs. A plan, not a timing: the machine is busy."""
    store: ControlStore = many["store"]
    engine = store._db.engine  # the store's own connections
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many_: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM eos_batches" in statement:
            statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        batch_page(store, "demo", 50, before=many["ids"][100])
        batch_page(store, "demo", 50, after=many["ids"][5000])
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(statements) == 4  # each page: its rows and one look the other way
    with engine.connect() as conn:
        for statement, parameters in statements:
            # SQLAlchemy's SQLite dialect always writes LIMIT ? OFFSET ?: the offset must be 0.
            assert "OFFSET" not in statement.upper() or parameters[-1] == 0, (statement, parameters)
            plan = " | ".join(
                row[-1] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            )
            assert "SEARCH eos_batches USING" in plan and "ix_eos_batches_pipeline" in plan, plan
            assert "TEMP B-TREE" not in plan, plan  # no sort of the matching rows: the index is the order


@pytest.fixture
def config(tmp_path: Path) -> PipelineConfig:
    doc = {
        "name": "demo", "topics": ["t"], "kafka_conn_id": None, "value": {"format": "raw"},
        "kafka": {"bootstrap.servers": f"127.0.0.1:{free_port()}"},
        "control_db_url": f"sqlite:///{tmp_path / 'control.db'}",
    }  # fmt: skip
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(doc))
    return load_pipeline(tmp_path / "demo.yaml")


def rows(*lags: int | None, committed: int | None = 5) -> list[dict[str, Any]]:
    return [
        {"topic": "t", "partition": i, "committed_offset": committed, "log_start": 0, "lag": lag}
        for i, lag in enumerate(lags)
    ]


def test_age_is_read_at_the_committed_offset_of_lagging_partitions_only(config: PipelineConfig) -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    asked: dict[tuple[str, int], int] = {}

    def read(positions: Any) -> dict[tuple[str, int], int | None]:
        asked.update(positions)
        return {("t", 0): int(now.timestamp() * 1000) - 90_000, ("t", 2): None}

    partitions = rows(4, 0, 2) + rows(3, committed=None)[:1]
    partitions[3]["partition"] = 3  # never committed: read from its log start
    error = oldest_unread(config, partitions, read, now)
    assert asked == {("t", 0): 5, ("t", 2): 5, ("t", 3): 0}  # partition 1 lags by 0: not read
    assert partitions[0]["oldest_unread_age_s"] == 90.0
    assert partitions[0]["oldest_unread_timestamp"] == "2026-11-25T11:58:30+00:00"
    assert partitions[1]["oldest_unread_age_s"] is None and not partitions[1]["oldest_unread_unknown"]
    assert partitions[2]["oldest_unread_age_s"] is None and not partitions[2]["oldest_unread_unknown"]
    assert partitions[3]["oldest_unread_unknown"] is True  # asked, not answered in time
    assert error is not None and "within" in error


def test_a_broker_that_does_not_answer_makes_the_age_unknown_and_the_page_still_answers(
    config: PipelineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ControlStore(config.control_db_url)
    store.ensure_schema()
    monkeypatch.setattr(status, "RECORD_TIMEOUT_S", 1.0)
    started = time.perf_counter()
    shown = pipeline_status(config, store, offsets=[PartitionOffsets("t", 0, 0, 10)])
    took = time.perf_counter() - started
    store.close()
    (row,) = shown["partitions"]
    assert row["lag"] == 10 and row["oldest_unread_unknown"] is True
    assert row["oldest_unread_age_s"] is None and shown["oldest_unread_age_s"] is None
    assert shown["oldest_unread_error"].startswith("KafkaUnavailableError")
    assert took < 1.0 + 2.0  # bounded by RECORD_TIMEOUT_S, not librdkafka's minutes
