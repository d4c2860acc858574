"""Batches for tests: a control-store batch row built in memory, for unit tests of what reads one
(retention, branches in flight, job sizes, the audit's reader: only the fields a test cares about
are named); a first batch planned, or committed without Spark, in a real control store."""

from __future__ import annotations

from datetime import UTC, datetime

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.batches import Batch
from eos_ingest.control.schema import BatchKind, BatchStatus
from eos_ingest.control.store import ControlStore
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.service.operations import open_store, plan_batch
from tests.helpers.kafka import TxProducer


def batch_row(
    batch_id: int = 1,
    *ranges: PlannedRange,
    status: BatchStatus = BatchStatus.PLANNED,
    kind: BatchKind = BatchKind.SCHEDULED,
    fence: int = 0,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
) -> Batch:
    """Batch `batch_id` of pipeline "p" with the given ranges; every count, version, result and
    note unset (None), as for a batch that has not run; times default to now."""
    created = created_at or datetime.now(UTC)
    return Batch(
        batch_id=batch_id, pipeline="p", kind=kind, status=status, fence=fence,
        records_read=None, records_written=None, records_quarantined=None, delta_version=None,
        quarantine_delta_version=None, dq_success=None, dq_result=None, dq_report_path=None,
        override_note=None, error=None, airflow_run_id=None,
        created_at=created, updated_at=updated_at or created, committed_at=None, ranges=tuple(ranges),
    )  # fmt: skip


def produce_batch(bootstrap: str, topic: str) -> None:
    """300 committed records with 50 aborted ones between them."""
    producer = TxProducer(bootstrap)
    producer.transaction(topic, [{"id": i, "name": "x", "amount": 1.0} for i in range(200)], commit=True)
    producer.transaction(topic, [{"id": -1, "name": "aborted", "amount": 0.0}] * 50, commit=False)
    producer.transaction(topic, [{"id": i, "name": "y", "amount": 2.0} for i in range(200, 300)], commit=True)


def planned_batch(bootstrap: str, topic: str, make_pipeline, control_db_url: str):
    """A topic with committed and aborted transactions, and its first batch planned (not run):
    (config, store, batch)."""
    produce_batch(bootstrap, topic)
    config = make_pipeline([topic], control_db_url)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    return config, store, batch


def ingest_first_batch(config: PipelineConfig, store: ControlStore) -> dict[int, int]:
    """Plan to the LSOs and commit the batch as a Spark job would; returns partition -> end."""
    batch, _ = plan_batch(config, store)
    assert batch is not None
    store.commit_batch(
        batch.batch_id, store.take_fence(batch.batch_id), records_read=0, records_written=0,
        records_quarantined=0, delta_version=0, quarantine_delta_version=None,
    )  # fmt: skip
    return {r.partition: r.end for r in batch.ranges}
