"""The VACUUM retention keeps what a planned batch may still read (maintain_deletes.vacuum_retention_hours)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from eos_ingest.control.store import Batch, BatchKind
from eos_ingest.errors import ConfigError
from eos_ingest.storage.maintain_deletes import DEFAULT_RETENTION_HOURS, vacuum_retention_hours
from tests.helpers.batches import batch_row

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def planned(batch_id: int, age: timedelta, kind: BatchKind = BatchKind.SCHEDULED) -> Batch:
    return batch_row(batch_id, kind=kind, created_at=NOW - age)


def test_without_a_planned_batch_the_default_is_delta_s_seven_days_and_a_request_is_taken() -> None:
    assert vacuum_retention_hours([], None, NOW) == DEFAULT_RETENTION_HOURS == 168
    assert vacuum_retention_hours([], 0, NOW) == 0
    assert vacuum_retention_hours([], 24, NOW) == 24


def test_a_planned_batch_older_than_seven_days_raises_the_retention_to_its_age() -> None:
    old = planned(7, timedelta(days=10, minutes=5), BatchKind.BACKFILL)
    assert vacuum_retention_hours([planned(9, timedelta(hours=1)), old], None, NOW) == 10 * 24 + 2
    assert vacuum_retention_hours([planned(9, timedelta(hours=1))], None, NOW) == 168


@pytest.mark.parametrize("requested", [0, 24, 167.5])
def test_a_request_below_what_a_planned_batch_needs_is_refused_naming_the_batch(requested: float) -> None:
    with pytest.raises(ConfigError) as refused:
        vacuum_retention_hours([planned(4, timedelta(hours=2))], requested, NOW)
    text = str(refused.value)
    assert f"--retention-hours {requested:g} is refused: batch 4 (scheduled" in text
    assert "at least 168 hours" in text and "finish or abandon the batch first" in text


def test_a_request_covering_the_planned_batches_is_taken_and_a_negative_one_refused() -> None:
    assert vacuum_retention_hours([planned(4, timedelta(hours=2))], 500, NOW) == 500
    with pytest.raises(ConfigError, match="use a number of hours >= 0"):
        vacuum_retention_hours([], -1, NOW)
