"""Step 1 of the exactly-once protocol: plan the pipeline's next scheduled batch, or return the
pending one, in the caller's transaction (ControlStore.plan_scheduled's; none commits here).

The data-loss policy for a pending batch is plan/data_loss.decide_pending; this applies it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from sqlalchemy import Connection, insert, update

from eos_ingest.control import queries as q
from eos_ingest.control.batches import Batch
from eos_ingest.control.schema import BatchKind, BatchStatus, batches, offsets, utc_now
from eos_ingest.plan import data_loss
from eos_ingest.plan.identity import KafkaIdentity, check_identities
from eos_ingest.plan.ranges import Plan, TopicPartition

log = logging.getLogger(__name__)


def plan_scheduled(
    conn: Connection,
    pipeline: str,
    make_plan: Callable[[dict[TopicPartition, int]], Plan],
    identity: KafkaIdentity | None,
    airflow_run_id: str | None,
    override_note: str | None,
    log_starts: Mapping[TopicPartition, int] | None,
    allow_data_loss: bool,
) -> tuple[Batch | None, bool]:
    """ControlStore.plan_scheduled's transaction (its docstring says what it returns and why)."""
    q.lock_pipeline(conn, pipeline)
    pending = q.pending(conn, pipeline)
    if identity is not None:
        recorded = q.recorded_identities(conn, pipeline)
        topics = sorted(identity.topic_ids)
        found = check_identities(
            pipeline, recorded, identity, topics, pending_batch=pending.batch_id if pending else None
        )
        q.record_identities(conn, pipeline, found)
    if pending is not None:
        decision = data_loss.decide_pending(
            pipeline,
            pending.batch_id,
            pending.ranges,
            log_starts or {},
            allow_data_loss=allow_data_loss,
        )
        if decision.action is data_loss.PendingAction.RESUME:
            return pending, False
        if decision.error is not None:
            raise decision.error
        conn.execute(
            update(batches)
            .where(batches.c.batch_id == pending.batch_id, batches.c.status == BatchStatus.PLANNED.value)
            .values(
                status=BatchStatus.ABANDONED.value,
                error=decision.abandon_reason,
                updated_at=utc_now(),
            )
        )
    committed = q.committed(conn, pipeline)
    plan = make_plan(dict(committed))
    starts = q.check_plan(pipeline, plan, committed)
    now = utc_now()
    for tp in plan.new_partitions:
        conn.execute(
            insert(offsets).values(
                pipeline=pipeline, topic=tp.topic, partition=tp.partition,
                committed_offset=starts[tp], updated_at=now,
            )
        )  # fmt: skip
    for lost in plan.skipped:
        q.cas_offset(conn, pipeline, lost.topic, lost.partition, lost.committed, lost.log_start, now)
    loss_note = data_loss.accepted_loss_note(plan.skipped)
    note = "; ".join(n for n in (override_note, loss_note) if n) or None
    if not plan.has_records:
        if loss_note:
            # Durable and visible (status, UI): a committed batch of empty ranges.
            log.warning("pipeline %s: %s (no records to plan)", pipeline, loss_note)
            kind = BatchKind.SCHEDULED
            empty = q.insert_batch(conn, pipeline, kind, plan.ranges, note, airflow_run_id)
            conn.execute(
                update(batches).where(batches.c.batch_id == empty).values(
                    status=BatchStatus.COMMITTED.value, records_read=0, records_written=0,
                    records_quarantined=0, committed_at=now, updated_at=now,
                )
            )  # fmt: skip
        return None, True
    batch_id = q.insert_batch(
        conn, pipeline, BatchKind.SCHEDULED, plan.ranges, note, airflow_run_id,
        identity.topic_ids if identity is not None else None,
    )  # fmt: skip
    return q.load(conn, batches.c.batch_id == batch_id, 1)[0], True
