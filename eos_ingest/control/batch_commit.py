"""Step 7 of the exactly-once protocol (docs/exactly-once.md): the attempt that holds a planned
batch's fence marks it committed with its counts and table versions and, for a scheduled batch,
moves each partition's committed offset start -> end by compare-and-set, in the caller's one
transaction (ControlStore.commit_batch). Any mismatch raises FencedError, which rolls it all back."""

from __future__ import annotations

from sqlalchemy import Connection, and_, update

from eos_ingest.control import queries as q
from eos_ingest.control.batches import Batch
from eos_ingest.control.schema import BatchKind, BatchStatus, batches, utc_now
from eos_ingest.errors import FencedError


def fenced(batch: Batch, fence: int, consequence: str) -> FencedError:
    """The error of an attempt holding `fence` whose batch is no longer planned with it."""
    return FencedError(
        f"batch {batch.batch_id}: this attempt holds fence {fence} but the batch is "
        f"{batch.status.value} with fence {batch.fence}: another attempt owns or finished "
        f"it, so this attempt {consequence}"
    )


def check_counts(batch_id: int, records_read: int, records_written: int, records_quarantined: int) -> None:
    """ValueError unless every record read was written or quarantined, and none is negative."""
    counts = (records_read, records_written, records_quarantined)
    if min(counts) < 0 or records_read != records_written + records_quarantined:
        raise ValueError(
            f"batch {batch_id}: records_read={records_read} must equal records_written="
            f"{records_written} + records_quarantined={records_quarantined} (none negative): "
            "every record read is either written or quarantined, never dropped"
        )


def commit(
    conn: Connection,
    batch_id: int,
    fence: int,
    store: str,
    *,
    counts: tuple[int, int, int],
    versions: tuple[int | None, int | None],
) -> Batch:
    """Mark `batch_id` committed if it is planned with `fence` (counts: read, written, quarantined;
    versions: of the table and of the quarantine table) and move a scheduled batch's offsets."""
    now = utc_now()
    records_read, records_written, records_quarantined = counts
    delta_version, quarantine_delta_version = versions
    where = and_(
        batches.c.batch_id == batch_id,
        batches.c.status == BatchStatus.PLANNED.value,
        batches.c.fence == fence,
    )
    changed = conn.execute(
        update(batches).where(where).values(
            status=BatchStatus.COMMITTED.value, records_read=records_read,
            records_written=records_written, records_quarantined=records_quarantined,
            delta_version=delta_version, quarantine_delta_version=quarantine_delta_version,
            error=None, updated_at=now, committed_at=now,
        )
    )  # fmt: skip
    batch = q.require(conn, batch_id, store)
    if changed.rowcount != 1:
        raise fenced(batch, fence, "commits nothing")
    if batch.kind is BatchKind.SCHEDULED:
        for r in batch.ranges:
            q.cas_offset(conn, batch.pipeline, r.topic, r.partition, r.start, r.end, now, batch_id)
    return batch
