"""Row-level reads and writes of the control tables, shared by ControlStore's transactions.

Every function takes the caller's Connection and never commits: ControlStore decides where a
transaction starts and ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, insert, select, text, update

from eos_ingest.control.batches import Batch, RangeRecord
from eos_ingest.control.schema import (
    BatchKind,
    BatchStatus,
    advisory_key,
    batch_ranges,
    batches,
    offsets,
    topic_identities,
    utc_now,
)
from eos_ingest.errors import BatchStateError, FencedError, PlanError
from eos_ingest.plan.identity import TopicIdentity
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition


def lock_pipeline(conn: Connection, pipeline: str) -> None:
    """Serialize planners (and resets) of one pipeline. SQLite: BEGIN IMMEDIATE already did."""
    if conn.dialect.name == "postgresql":
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_key(f"eos:pipeline:{pipeline}")}
        )


def committed(conn: Connection, pipeline: str) -> dict[TopicPartition, int]:
    rows = conn.execute(select(offsets).where(offsets.c.pipeline == pipeline))
    return {TopicPartition(r.topic, r.partition): int(r.committed_offset) for r in rows}


def pending(conn: Connection, pipeline: str) -> Batch | None:
    found = load(
        conn,
        and_(
            batches.c.pipeline == pipeline,
            batches.c.kind == BatchKind.SCHEDULED.value,
            batches.c.status == BatchStatus.PLANNED.value,
        ),
        1,
    )
    return found[0] if found else None


def load(conn: Connection, where: Any, limit: int, *, oldest_first: bool = False) -> list[Batch]:
    """The first `limit` batches matching `where`, newest first (or oldest first), with their ranges."""
    order = batches.c.batch_id.asc() if oldest_first else batches.c.batch_id.desc()
    rows = conn.execute(select(batches).where(where).order_by(order).limit(limit)).all()
    ranges: dict[int, list[PlannedRange]] = {int(r.batch_id): [] for r in rows}
    ids: dict[int, list[str | None]] = {int(r.batch_id): [] for r in rows}
    if ranges:
        query = (
            select(batch_ranges)
            .where(batch_ranges.c.batch_id.in_(list(ranges)))
            .order_by(batch_ranges.c.topic, batch_ranges.c.partition)
        )
        for r in conn.execute(query):
            ranges[int(r.batch_id)].append(range_of(r))
            ids[int(r.batch_id)].append(r.topic_id)
    return [batch_of(row, tuple(ranges[int(row.batch_id)]), tuple(ids[int(row.batch_id)])) for row in rows]


def require(conn: Connection, batch_id: int, store: str) -> Batch:
    """The batch, or BatchStateError naming the control store (`store`, its URL without password)."""
    found = load(conn, batches.c.batch_id == batch_id, 1)
    if not found:
        raise BatchStateError(f"batch {batch_id} does not exist in the control store {store}")
    return found[0]


def range_of(row: Row[Any]) -> PlannedRange:
    return PlannedRange(row.topic, int(row.partition), int(row.start_offset), int(row.end_offset))


def batch_of(
    row: Row[Any], ranges: tuple[PlannedRange, ...], topic_ids: tuple[str | None, ...] = ()
) -> Batch:
    values = dict(row._mapping)
    values["batch_id"] = int(values["batch_id"])
    values["kind"] = BatchKind(values["kind"])
    values["status"] = BatchStatus(values["status"])
    values["dq_success"] = None if values["dq_success"] is None else bool(values["dq_success"])
    return Batch(**values, ranges=ranges, range_topic_ids=topic_ids or (None,) * len(ranges))


def recorded_identities(conn: Connection, pipeline: str) -> dict[str, TopicIdentity]:
    rows = conn.execute(select(topic_identities).where(topic_identities.c.pipeline == pipeline))
    return {r.topic: TopicIdentity(r.topic, r.topic_id, r.cluster_id) for r in rows}


def record_identities(conn: Connection, pipeline: str, identities: Sequence[TopicIdentity]) -> None:
    """Insert or overwrite the recorded identity of each topic (the caller holds the pipeline lock)."""
    now = utc_now()
    for ident in identities:
        key = and_(topic_identities.c.pipeline == pipeline, topic_identities.c.topic == ident.topic)
        values = {"topic_id": ident.topic_id, "cluster_id": ident.cluster_id, "recorded_at": now}
        if conn.execute(update(topic_identities).where(key).values(**values)).rowcount == 0:
            conn.execute(insert(topic_identities).values(pipeline=pipeline, topic=ident.topic, **values))


def insert_batch(
    conn: Connection,
    pipeline: str,
    kind: BatchKind,
    ranges: Sequence[PlannedRange],
    note: str | None,
    airflow_run_id: str | None,
    topic_ids: Mapping[str, str | None] | None = None,
) -> int:
    now = utc_now()
    batch_id = int(
        conn.execute(
            insert(batches).values(
                pipeline=pipeline, kind=kind.value, status=BatchStatus.PLANNED.value, fence=0,
                override_note=note, airflow_run_id=airflow_run_id, created_at=now, updated_at=now,
            ).returning(batches.c.batch_id)
        ).scalar_one()
    )  # fmt: skip
    conn.execute(
        insert(batch_ranges),
        [
            {"batch_id": batch_id, "topic": r.topic, "partition": r.partition,
             "start_offset": r.start, "end_offset": r.end, "topic_id": (topic_ids or {}).get(r.topic)}
            for r in ranges
        ],
    )  # fmt: skip
    return batch_id


def cas_offset(
    conn: Connection,
    pipeline: str,
    topic: str,
    partition: int,
    expected: int,
    new: int,
    now: datetime,
    batch_id: int | None = None,
) -> None:
    """committed_offset: expected -> new, or FencedError (the caller's transaction rolls back)."""
    key = and_(offsets.c.pipeline == pipeline, offsets.c.topic == topic, offsets.c.partition == partition)
    changed = conn.execute(
        update(offsets)
        .where(key, offsets.c.committed_offset == expected)
        .values(committed_offset=new, updated_at=now)
    )
    if changed.rowcount != 1:
        actual = conn.execute(select(offsets.c.committed_offset).where(key)).scalar_one_or_none()
        who = f"batch {batch_id}" if batch_id is not None else f"plan of pipeline {pipeline!r}"
        raise FencedError(
            f"{who}: committed_offset of {topic}[{partition}] is {actual}, expected {expected}: the "
            "offsets moved outside this batch (a concurrent commit or an operator reset); nothing was committed"
        )


def check_plan(
    pipeline: str, plan: Plan, committed: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Where each partition's range must start; PlanError if the plan does not start there.

    A range that does not start at the committed offset would leave a gap or a duplicate, and its
    commit could never pass the compare-and-set: refuse it at plan time, with the partition named.
    """
    starts = dict(committed)
    for lost in plan.skipped:
        if (
            starts.get(TopicPartition(lost.topic, lost.partition)) != lost.committed
            or lost.log_start <= lost.committed
        ):
            raise PlanError(
                f"plan of {pipeline!r}: lost offsets {lost} do not match committed offsets {committed}"
            )
        starts[TopicPartition(lost.topic, lost.partition)] = lost.log_start
    first = {TopicPartition(r.topic, r.partition): r.start for r in plan.ranges}
    for tp in plan.new_partitions:
        if tp in committed or tp not in first:
            raise PlanError(f"plan of {pipeline!r}: new partition {tp} already has an offset or has no range")
        starts[tp] = first[tp]
    for r in plan.ranges:
        expected = starts.get(TopicPartition(r.topic, r.partition))
        if expected != r.start or r.end < r.start:
            raise PlanError(
                f"plan of {pipeline!r}: range {r.topic}[{r.partition}] [{r.start}, {r.end}) must start at "
                f"the committed offset {expected} and not end before it; this is a planner bug, not bad data"
            )
    if len(first) != len(plan.ranges):
        raise PlanError(f"plan of {pipeline!r}: a partition has more than one range: {plan.ranges}")
    return starts


def committed_ranges(conn: Connection, pipeline: str, topic: str | None) -> list[PlannedRange]:
    query = (
        select(batch_ranges)
        .join(batches, batches.c.batch_id == batch_ranges.c.batch_id)
        .where(
            batches.c.pipeline == pipeline,
            batches.c.status == BatchStatus.COMMITTED.value,
            batch_ranges.c.start_offset < batch_ranges.c.end_offset,
        )
        .order_by(batch_ranges.c.topic, batch_ranges.c.partition, batch_ranges.c.start_offset)
    )
    if topic is not None:
        query = query.where(batch_ranges.c.topic == topic)
    return [range_of(r) for r in conn.execute(query)]


def range_records(conn: Connection, pipeline: str) -> list[RangeRecord]:
    query = (
        select(batch_ranges, batches.c.status)
        .join(batches, batches.c.batch_id == batch_ranges.c.batch_id)
        .where(batches.c.pipeline == pipeline)
        .order_by(batch_ranges.c.batch_id, batch_ranges.c.topic, batch_ranges.c.partition)
    )
    return [
        RangeRecord(int(r.batch_id), r.status == BatchStatus.COMMITTED.value, range_of(r), r.topic_id)
        for r in conn.execute(query)
    ]
