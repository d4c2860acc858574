"""The bound of the marker search (storage/iceberg/markers.py): the plan time less the clock margin."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from eos_ingest.storage.iceberg.markers import CLOCK_MARGIN_ENV, floor_ms, marker
from eos_ingest.storage.table_format import Txn

PLANNED = datetime(2026, 12, 6, 10, 0, 0, 250_000, tzinfo=UTC)


def test_the_floor_is_the_plan_time_less_the_margin_of_a_minute_unless_set(monkeypatch) -> None:
    monkeypatch.delenv(CLOCK_MARGIN_ENV, raising=False)
    planned_ms = int(PLANNED.timestamp() * 1000)
    assert floor_ms(PLANNED) == planned_ms - 60_000
    assert floor_ms(PLANNED.replace(tzinfo=None)) == planned_ms - 60_000  # SQLite's naive UTC
    monkeypatch.setenv(CLOCK_MARGIN_ENV, "2.5")
    assert floor_ms(PLANNED) == planned_ms - 2_500
    assert floor_ms(None) is None  # no plan time (tools, tests): the whole history


@pytest.mark.parametrize("value", ["a minute", "-1"])
def test_a_margin_that_is_not_seconds_is_named_with_its_fix(monkeypatch, value: str) -> None:
    monkeypatch.setenv(CLOCK_MARGIN_ENV, value)
    with pytest.raises(ValueError, match=f"{CLOCK_MARGIN_ENV}=.*give seconds"):
        floor_ms(PLANNED)


def test_the_marker_names_the_batch_and_the_attempt() -> None:
    assert marker(7, None) == {"eos.batch-id": "7"}
    assert marker(7, Txn("app", 3, planned_at=PLANNED)) == {
        "eos.batch-id": "7", "eos.app-id": "app", "eos.fence": "3"
    }  # fmt: skip
