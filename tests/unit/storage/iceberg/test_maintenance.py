"""Which unpublished branches `maintain` removes from an Iceberg table: only those whose attempt can
no longer publish (storage/iceberg/maintenance.py, branch_in_flight), never the running attempt's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from eos_ingest.control.store import Batch, BatchStatus
from eos_ingest.storage.iceberg.maintenance import branch_in_flight, stale_branches
from tests.helpers.batches import batch_row

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def batch(batch_id: int, status: BatchStatus, fence: int, updated: timedelta = timedelta(hours=1)) -> Batch:
    return batch_row(
        batch_id, status=status, fence=fence, created_at=NOW - timedelta(hours=2), updated_at=NOW - updated
    )


def test_only_a_planned_batch_s_current_fence_or_a_just_abandoned_one_is_in_flight() -> None:
    planned = batch(5, BatchStatus.PLANNED, 3)
    assert branch_in_flight(planned, 3, NOW)
    assert not branch_in_flight(planned, 2, NOW)  # fenced out: the control DB refuses its publish
    assert not branch_in_flight(batch(5, BatchStatus.COMMITTED, 3), 3, NOW)
    assert not branch_in_flight(batch(5, BatchStatus.FAILED, 3), 3, NOW)
    assert not branch_in_flight(None, 1, NOW)  # no such batch: nobody holds a fence of it
    abandoned = batch(5, BatchStatus.ABANDONED, 3, updated=timedelta(minutes=2))
    assert branch_in_flight(abandoned, 3, NOW)  # may have passed its last fence check just before
    assert not branch_in_flight(replace(abandoned, updated_at=NOW - timedelta(minutes=11)), 3, NOW)


def test_stale_branches_names_only_eos_branches_whose_attempt_cannot_publish() -> None:
    batches = {5: batch(5, BatchStatus.PLANNED, 3), 6: batch(6, BatchStatus.COMMITTED, 1)}
    refs = [
        "main",
        "eos_batch5_f3",
        "eos_batch5_f2",
        "eos_batch6_f1",
        "eos_batch7_f1",
        "audit",
        "eos_batchx_f1",
    ]
    assert stale_branches(refs, batches.get) == ["eos_batch5_f2", "eos_batch6_f1", "eos_batch7_f1"]
