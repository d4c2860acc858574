"""Planned batches past the bound are named with what they hold back and the way out (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from eos_ingest.config.pipeline import AlertsConfig
from eos_ingest.control.store import Batch, BatchKind, BatchStatus
from eos_ingest.errors import ConfigError
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.service.lag_alerts import evaluate
from eos_ingest.service.stale_batches import DEFAULT_STALE_HOURS, STALE_HOURS_ENV, stale_batches, stale_hours

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def batch(
    batch_id: int, hours_ago: float, kind=BatchKind.BACKFILL, status=BatchStatus.PLANNED, fence=1
) -> Batch:
    planned = NOW - timedelta(hours=hours_ago)
    return Batch(
        batch_id, "orders", kind, status, fence, None, None, None, None, None, None, None, None,
        "backfill: replay", None, None, planned, planned + timedelta(minutes=5), None,
        (PlannedRange("orders", 0, 5, 20),),
    )  # fmt: skip


def test_only_planned_batches_older_than_the_bound_are_named_oldest_first() -> None:
    found = stale_batches(
        "orders",
        [batch(3, 1), batch(2, 30), batch(1, 200), batch(4, 50, status=BatchStatus.COMMITTED)],
        now=NOW,
        bound_hours=12,
    )
    assert [s["batch_id"] for s in found] == [1, 2]
    oldest = found[0]
    assert oldest["kind"] == "backfill" and oldest["planned_at"] == (NOW - timedelta(hours=200)).isoformat()
    assert oldest["holds_back"] == {"retention_hours": 201.0, "vacuum_lock": True}  # its age, past 168
    assert found[1]["holds_back"]["retention_hours"] == 168.0  # never below Delta's default
    for part in (
        "batch 1 (backfill) of pipeline orders is planned since",
        "201 hours",
        "VACUUM lock",
        "eos-ingest backfill --pipeline orders --resume 1",
        "eos-ingest abandon --pipeline orders --batch-id 1",
    ):
        assert part in oldest["message"], oldest["message"]


def test_a_stale_scheduled_batch_is_resumed_by_run() -> None:
    (found,) = stale_batches(
        "orders", [batch(7, 20, kind=BatchKind.SCHEDULED, fence=0)], now=NOW, bound_hours=12
    )
    assert "`eos-ingest run --pipeline orders`" in found["way_out"]
    assert found["last_attempt_at"] is None and "never attempted" in found["message"]


def test_the_bound_comes_from_the_environment_and_a_bad_one_is_refused_with_its_fix() -> None:
    assert stale_hours({}) == DEFAULT_STALE_HOURS
    assert stale_hours({STALE_HOURS_ENV: "0.5"}) == 0.5
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(ConfigError, match=rf"{STALE_HOURS_ENV} = '{bad}' is not a number of hours >= 0"):
            stale_hours({STALE_HOURS_ENV: bad})


def test_a_stale_batch_fails_the_lag_check_and_its_message_names_it() -> None:
    partitions = [{"topic": "orders", "partition": 0, "lag": 0, "oldest_unread_age_s": None}]
    check = evaluate("orders", AlertsConfig(max_lag_records=10), partitions, None)
    assert not check.failed
    from dataclasses import replace

    stale = tuple(stale_batches("orders", [batch(9, 40)], now=NOW, bound_hours=12))
    check = replace(check, stale=stale)
    assert check.failed
    assert "batch 9 (backfill)" in check.message() and "--resume 9" in check.message()
    assert check.to_dict()["stale_batches"][0]["batch_id"] == 9
