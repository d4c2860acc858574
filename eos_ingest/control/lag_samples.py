"""A pipeline's lag history: one sample per plan and per lag check, bounded per pipeline.

The page charts the last 24 hours; samples are kept for KEEP (a week, room for a longer look) and at
most MAX_PER_PIPELINE rows a pipeline (a lag check every minute writes 1,440 a day, a catch-up one per
batch). Both bounds are applied in the transaction that inserts, so the table never grows past them
and nothing else has to prune it.

Each function runs inside the caller's transaction (ControlStore's); none commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, and_, delete, insert, or_, select

from eos_ingest.control.schema import LagSource, lag_samples

KEEP = timedelta(days=7)
MAX_PER_PIPELINE = 10_000


@dataclass(frozen=True)
class LagSample:
    """One reading of a pipeline's lag: records (offsets) behind, and the oldest unread record's
    age in seconds (0: nothing unread; None: not read, or not answered in time)."""

    sampled_at: datetime
    source: LagSource
    lag_records: int
    oldest_unread_age_s: float | None


def insert_sample(
    conn: Connection,
    pipeline: str,
    sample: LagSample,
    *,
    keep: timedelta = KEEP,
    max_per_pipeline: int = MAX_PER_PIPELINE,
) -> None:
    """Insert `sample`, then delete the pipeline's samples older than `keep` before it and those
    beyond the newest `max_per_pipeline`."""
    if sample.lag_records < 0:
        raise ValueError(f"lag sample of pipeline {pipeline}: lag_records {sample.lag_records} is negative")
    conn.execute(
        insert(lag_samples).values(
            pipeline=pipeline,
            sampled_at=sample.sampled_at,
            source=sample.source.value,
            lag_records=sample.lag_records,
            oldest_unread_age_s=sample.oldest_unread_age_s,
        )
    )
    mine = lag_samples.c.pipeline == pipeline
    conn.execute(delete(lag_samples).where(mine, lag_samples.c.sampled_at < sample.sampled_at - keep))
    # The newest sample beyond the cap (read down the index): it and everything older go.
    first_dropped = conn.execute(
        select(lag_samples.c.sampled_at, lag_samples.c.sample_id)
        .where(mine)
        .order_by(lag_samples.c.sampled_at.desc(), lag_samples.c.sample_id.desc())
        .offset(max_per_pipeline)
        .limit(1)
    ).first()
    if first_dropped is not None:
        at, sample_id = first_dropped
        older = or_(
            lag_samples.c.sampled_at < at,
            and_(lag_samples.c.sampled_at == at, lag_samples.c.sample_id <= sample_id),
        )
        conn.execute(delete(lag_samples).where(mine, older))


def samples_since(conn: Connection, pipeline: str, since: datetime) -> list[LagSample]:
    """The pipeline's samples taken at or after `since`, oldest first."""
    rows = conn.execute(
        select(lag_samples)
        .where(lag_samples.c.pipeline == pipeline, lag_samples.c.sampled_at >= since)
        .order_by(lag_samples.c.sampled_at, lag_samples.c.sample_id)
    )
    return [
        LagSample(
            sampled_at=row.sampled_at,
            source=LagSource(row.source),
            lag_records=int(row.lag_records),
            oldest_unread_age_s=None if row.oldest_unread_age_s is None else float(row.oldest_unread_age_s),
        )
        for row in rows
    ]
