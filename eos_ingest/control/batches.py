"""The control DB's rows as plain data: a batch with its ranges (Batch) and a range as recorded
(RangeRecord). Here, apart from the store and its queries, so that what only reads a batch (the
output tables' readers, the retention of maintain) imports its type without the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from eos_ingest.control.schema import BatchKind, BatchStatus
from eos_ingest.plan.ranges import PlannedRange


@dataclass(frozen=True)
class Batch:
    """One row of eos_batches with its ranges (sorted by topic, partition)."""

    batch_id: int
    pipeline: str
    kind: BatchKind
    status: BatchStatus
    fence: int
    records_read: int | None
    records_written: int | None
    records_quarantined: int | None
    delta_version: int | None
    quarantine_delta_version: int | None
    dq_success: bool | None
    dq_result: str | None
    dq_report_path: str | None
    override_note: str | None
    error: str | None
    airflow_run_id: str | None
    created_at: datetime
    updated_at: datetime
    committed_at: datetime | None
    ranges: tuple[PlannedRange, ...]
    # The Kafka topic id each range was planned under, aligned with `ranges` (None: not recorded).
    range_topic_ids: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class RangeRecord:
    """One range of one batch as recorded: for `verify`, which must tell topic incarnations apart."""

    batch_id: int
    committed: bool
    range: PlannedRange
    topic_id: str | None
