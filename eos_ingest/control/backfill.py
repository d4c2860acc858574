"""Backfill batches: re-ingest ranges below the committed offsets, checked against them in the
transaction that plans the batch. A backfill never moves committed offsets.

Each function runs inside the caller's transaction (ControlStore's); none commits.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from eos_ingest.control import queries as q
from eos_ingest.control.schema import BatchKind
from eos_ingest.errors import BackfillRangeError
from eos_ingest.plan.identity import KafkaIdentity, check_identities
from eos_ingest.plan.ranges import PlannedRange, TopicPartition


def check_request(pipeline: str, ranges: Sequence[PlannedRange], reason: str) -> None:
    """BackfillRangeError unless some ranges and a reason are given (before any transaction)."""
    if not ranges:
        raise BackfillRangeError(f"backfill of pipeline {pipeline!r}: no ranges given; pass at least one")
    if not reason.strip():
        raise BackfillRangeError(f"backfill of pipeline {pipeline!r}: reason is empty; say why it is needed")


def insert_backfill(
    conn: Connection,
    pipeline: str,
    ranges: Sequence[PlannedRange],
    reason: str,
    airflow_run_id: str | None,
    identity: KafkaIdentity | None,
) -> int:
    """Check the ranges against the committed offsets and insert the planned backfill batch: its id."""
    q.lock_pipeline(conn, pipeline)  # no operator reset moves the offsets under our check
    if identity is not None:
        topics = sorted({r.topic for r in ranges})
        found = check_identities(pipeline, q.recorded_identities(conn, pipeline), identity, topics)
        q.record_identities(conn, pipeline, found)
    committed = q.committed(conn, pipeline)
    seen: set[TopicPartition] = set()
    for r in ranges:
        tp = TopicPartition(r.topic, r.partition)
        where = f"backfill range {r.topic}[{r.partition}] [{r.start}, {r.end}) of pipeline {pipeline!r}"
        if tp in seen:
            raise BackfillRangeError(f"{where}: the partition appears twice; merge its ranges into one")
        seen.add(tp)
        if tp not in committed:
            raise BackfillRangeError(
                f"{where}: the pipeline has no committed offset for this partition; only "
                "offsets already ingested by scheduled batches can be backfilled"
            )
        end = committed[tp]
        if not 0 <= r.start < r.end <= end:
            raise BackfillRangeError(
                f"{where} is not a non-empty range inside [0, {end}) (committed_offset={end}): "
                f"choose start < end <= {end}; offsets from {end} on are ingested by scheduled batches"
            )
    batch_id = q.insert_batch(
        conn, pipeline, BatchKind.BACKFILL, tuple(ranges), reason, airflow_run_id,
        identity.topic_ids if identity is not None else None,
    )  # fmt: skip
    return batch_id
