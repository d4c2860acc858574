"""The lag history and the charts' data without a broker: the samples a plan and a lag check
record (Kafka's answers given), that a sample that cannot be recorded fails neither, and what
pipeline_trends reads back for the page. A real SQLite control DB; the broker's side is
tests/integration/airflow/test_page_trends.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.control.schema import LagSource
from eos_ingest.control.store import BatchStatus, ControlStore, LagSample
from eos_ingest.kafka.offsets import KafkaSnapshot
from eos_ingest.plan.identity import KafkaIdentity
from eos_ingest.plan.ranges import PartitionOffsets, Plan, PlannedRange, TopicPartition
from eos_ingest.service import lag_alerts, operations, trends
from eos_ingest.service.status import batch_duration_s, batch_status
from tests.helpers.ports import free_port

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PipelineConfig:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    doc = {
        "name": "orders", "topics": ["t"], "kafka_conn_id": None, "value": {"format": "raw"},
        "kafka": {"bootstrap.servers": f"127.0.0.1:{free_port()}"},  # nothing listens: reads are given
        "control_db_url": f"sqlite:///{tmp_path / 'control.db'}", "alerts": {"max_lag_records": 1000},
    }  # fmt: skip
    (tmp_path / "orders.yaml").write_text(yaml.safe_dump(doc))
    return load_pipeline(tmp_path / "orders.yaml")


@pytest.fixture
def store(config: PipelineConfig) -> Iterator[ControlStore]:
    s = operations.open_store(config)
    yield s
    s.close()


def kafka_says(monkeypatch: pytest.MonkeyPatch, *lsos: int) -> list[PartitionOffsets]:
    """The offsets (log start 0, these LSOs) the plan's Kafka read returns."""
    offsets = [PartitionOffsets("t", p, 0, lso) for p, lso in enumerate(lsos)]
    snapshot = KafkaSnapshot(offsets, KafkaIdentity("cluster", {"t": "topic-id"}))
    monkeypatch.setattr(operations, "fetch_snapshot", lambda settings, topics: snapshot)
    return offsets


def recorded(store: ControlStore) -> list[tuple[LagSource, int, float | None]]:
    return [
        (s.source, s.lag_records, s.oldest_unread_age_s)
        for s in store.lag_samples_since("orders", datetime.now(UTC) - timedelta(hours=1))
    ]


def commit(store: ControlStore, batch_id: int, written: int = 0, quarantined: int = 0) -> None:
    store.commit_batch(
        batch_id, store.take_fence(batch_id), records_read=written + quarantined, records_written=written,
        records_quarantined=quarantined, delta_version=0, quarantine_delta_version=None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([{"lag": 5, "oldest_unread_age_s": 30.0}, {"lag": 2, "oldest_unread_age_s": 90.5}], (7, 90.5)),
        ([{"lag": 5, "oldest_unread_age_s": None, "oldest_unread_unknown": True}], (5, None)),  # not read
        ([{"lag": 0, "oldest_unread_age_s": None}, {"lag": -3}], (0, 0.0)),  # nothing unread: age 0
        ([{"lag": 4, "oldest_unread_age_s": 8.0}, {"lag": 1, "oldest_unread_unknown": True}], (5, 8.0)),
        ([{"lag": None}, {"lag": 6}], (6, 0.0)),  # a partition Kafka did not list has no lag
    ],
)
def test_lag_figures_are_the_pages_total_lag_and_largest_age(rows: list[dict[str, Any]], expected) -> None:
    assert trends.lag_figures(rows) == expected


def test_each_plan_records_the_lag_it_read_without_an_age(
    config: PipelineConfig, store: ControlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka_says(monkeypatch, 40, 2)
    first, created = operations.plan_batch(config, store)
    assert first is not None and created
    # Read after the plan, as the page would: nothing committed yet, so the whole log is lag.
    assert recorded(store) == [(LagSource.PLAN, 42, None)]

    commit(store, first.batch_id, written=42)
    kafka_says(monkeypatch, 50, 2)
    second, created = operations.plan_batch(config, store)
    assert second is not None and created
    again, created = operations.plan_batch(config, store)  # the pending batch, unchanged
    assert again == second and not created
    assert recorded(store) == [
        (LagSource.PLAN, 42, None),
        (LagSource.PLAN, 10, None),  # 50 - 40 on partition 0, 2 - 2 on partition 1
        (LagSource.PLAN, 10, None),
    ]


def test_a_sample_that_cannot_be_recorded_is_a_warning_and_the_plan_goes_on(
    config: PipelineConfig,
    store: ControlStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka_says(monkeypatch, 10)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("connection to postgresql://eos:s3cret@db/control lost")

    monkeypatch.setattr(store, "record_lag_sample", refuse)
    with caplog.at_level(logging.WARNING, logger="eos_ingest.service.trends"):
        batch, created = operations.plan_batch(config, store)

    assert batch is not None and created and batch.status is BatchStatus.PLANNED
    assert [r.ranges for r in store.list_batches("orders")] == [(PlannedRange("t", 0, 0, 10),)]
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert "pipeline orders: the lag read by this plan was not recorded: RuntimeError" in warning.getMessage()
    assert "s3cret" not in warning.getMessage()  # redacted, as every shown error


def test_a_lag_check_records_the_lag_and_the_age_it_read(
    config: PipelineConfig, store: ControlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    offsets = kafka_says(monkeypatch, 30)
    written_ms = int((NOW - timedelta(seconds=75)).timestamp() * 1000)
    result = lag_alerts.check_lag(
        config, store, config.alerts, read_offsets=lambda: offsets,
        read_timestamps=lambda positions: dict.fromkeys(positions, written_ms), now=NOW,
    )  # fmt: skip
    assert (result.total_lag, result.oldest_unread_age_s) == (30, 75.0)
    assert recorded(store) == [(LagSource.CHECK_LAG, 30, 75.0)]


def test_a_lag_check_whose_age_is_unknown_still_records_the_lag(
    config: PipelineConfig, store: ControlStore
) -> None:
    """The age limit cannot be checked (LagUnknownError, retried), but the lag was read: a sample
    without an age, a gap in the age's history only."""
    limits = config.alerts.model_copy(update={"max_lag_seconds": 60})  # type: ignore[union-attr]
    with pytest.raises(lag_alerts.LagUnknownError):
        lag_alerts.check_lag(
            config, store, limits, read_offsets=lambda: [PartitionOffsets("t", 0, 0, 12)],
            read_timestamps=lambda positions: {}, now=NOW,  # Kafka did not answer for the record
        )  # fmt: skip
    assert recorded(store) == [(LagSource.CHECK_LAG, 12, None)]


def test_a_batchs_duration_runs_from_its_plan_to_its_commit_or_failure(store: ControlStore) -> None:
    planned, _ = store.plan_scheduled(
        "orders",
        lambda c: Plan(ranges=(PlannedRange("t", 0, 0, 5),), new_partitions=(TopicPartition("t", 0),)),
    )
    assert planned is not None and batch_duration_s(planned) is None  # still running
    commit(store, planned.batch_id, written=5)
    done = store.get_batch(planned.batch_id)
    assert done.committed_at is not None
    assert batch_duration_s(done) == round((done.committed_at - done.created_at).total_seconds(), 3)
    assert batch_status(done)["duration_s"] == batch_duration_s(done)
    failing, _ = store.plan_scheduled("orders", lambda c: Plan(ranges=(PlannedRange("t", 0, 5, 9),)))
    assert failing is not None
    store.fail_batch(failing.batch_id, store.take_fence(failing.batch_id), "ReadError: gone")
    failed = store.get_batch(failing.batch_id)
    assert batch_duration_s(failed) == round((failed.updated_at - failed.created_at).total_seconds(), 3)


def sample_at(ago: timedelta, lag: int, age: float | None = None) -> LagSample:
    return LagSample(NOW - ago, LagSource.CHECK_LAG, lag, age)


def test_the_trends_hold_the_windows_samples_largest_per_bucket_and_the_last_batches(
    store: ControlStore,
) -> None:
    minutes = timedelta(minutes=1)
    for ago, lag, age in (
        (25 * 60 * minutes, 999, 1.0),  # before the window: not shown
        (600 * minutes, 40, None),
        (61 * minutes, 10, 5.0), (60.5 * minutes, 30, None), (60.2 * minutes, 20, 9.0),  # one 5-min bucket
        (1 * minutes, 7, 2.0),
    ):  # fmt: skip
        store.record_lag_sample("orders", sample_at(ago, lag, age))
    new = (TopicPartition("t", 0),)
    ids = []
    for n in range(3):
        batch, _ = store.plan_scheduled(
            "orders",
            lambda c, n=n: Plan(
                ranges=(PlannedRange("t", 0, n, n + 1),), new_partitions=new if n == 0 else ()
            ),
        )
        assert batch is not None
        ids.append(batch.batch_id)
        if n < 2:
            commit(store, batch.batch_id, written=n + 1, quarantined=n)

    shown = trends.pipeline_trends(store, "orders", NOW, batches=2)

    assert shown["window_hours"] == 24
    assert [(p["ago_s"], p["samples"], p["lag_records"], p["oldest_unread_age_s"]) for p in shown["lag"]] == [
        (600 * 60, 1, 40, None),
        (60.2 * 60, 3, 30, 9.0),  # at the bucket's newest sample: the largest lag and age of three
        (60, 1, 7, 2.0),
    ]
    assert shown["lag"][-1]["at"] == (NOW - minutes).isoformat()
    # The last two batches, oldest first: the committed one with its counts, the planned one without.
    (older, newest) = shown["batches"]
    assert (older["batch_id"], older["status"], older["records_written"], older["records_quarantined"]) == (
        ids[1], "committed", 2, 1,
    )  # fmt: skip
    assert older["duration_s"] is not None and older["duration_s"] >= 0
    assert (newest["batch_id"], newest["status"], newest["duration_s"], newest["records_written"]) == (
        ids[2], "planned", None, None,
    )  # fmt: skip
    assert set(newest) == {
        "batch_id", "kind", "status", "created_at", "duration_s", "records_written", "records_quarantined",
    }  # fmt: skip


def test_a_window_without_samples_or_batches_is_empty(store: ControlStore) -> None:
    assert trends.pipeline_trends(store, "orders", NOW) == {"window_hours": 24, "lag": [], "batches": []}
