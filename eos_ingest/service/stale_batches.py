"""Planned batches that nothing runs any more: a killed backfill, a scheduled batch whose DAG stopped.

A planned batch is in flight as far as maintenance knows (storage/delta/maintenance.py): while any is
planned, maintain's deletes (Delta's VACUUM; Iceberg's expire_snapshots and remove_orphan_files)
keep everything the oldest one may still read, so their retention grows with its age, and maintain
never takes the pipeline's VACUUM lock (control/vacuum_lock.py). A backfill is rerun by nothing but
a person (its DAG's retries end; the scheduled DAG resumes only the scheduled batch), so one
killed for good would hold them back forever, unseen.

This module names them: every planned batch older than the bound (STALE_HOURS_ENV, default
DEFAULT_STALE_HOURS), with when it was planned, what it holds back and the way out (resume or
abandon). `eos-ingest status`, the Ingestion page, `maintain` and the lag alerts all show
stale_batches' entries. Pure: batches and a time in, entries out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from eos_ingest.control.store import Batch, BatchKind, BatchStatus
from eos_ingest.errors import ConfigError

# Hours after its plan from which a planned batch is named as stale.
STALE_HOURS_ENV = "EOS_STALE_BATCH_HOURS"
# The ingest and backfill DAGs' spark_ingest runs at most 4 hours a try, 3 tries a minute apart:
# past 12 hours no attempt Airflow started is still running.
DEFAULT_STALE_HOURS = 12.0
# VACUUM's floor while a batch is planned (maintain_deletes.DEFAULT_RETENTION_HOURS; not imported:
# the storage layer sits below this one only for the batch's own steps).
_RETENTION_FLOOR_HOURS = 168


def stale_hours(environ: Mapping[str, str] | None = None) -> float:
    """The bound in hours (STALE_HOURS_ENV, else DEFAULT_STALE_HOURS); ConfigError naming the
    variable, the value and the fix when it is not a number of hours >= 0."""
    text = (os.environ if environ is None else environ).get(STALE_HOURS_ENV)
    if text is None or not text.strip():
        return DEFAULT_STALE_HOURS
    try:
        hours = float(text)
    except ValueError:
        hours = math.nan
    if math.isnan(hours) or hours < 0 or math.isinf(hours):
        raise ConfigError(
            f"{STALE_HOURS_ENV} = {text!r} is not a number of hours >= 0; give e.g. 24, or unset it "
            f"for the default {DEFAULT_STALE_HOURS:g}"
        )
    return hours


def stale_batches(
    pipeline: str,
    planned: Sequence[Batch],
    *,
    now: datetime | None = None,
    bound_hours: float | None = None,
) -> list[dict[str, Any]]:
    """Every planned batch of `planned` planned more than `bound_hours` (default: stale_hours())
    before `now`, oldest first: its id, kind, plan and last attempt times, age, what it holds back,
    the way out, and all of it in one line (`message`)."""
    now = now or datetime.now(UTC)
    bound = stale_hours() if bound_hours is None else bound_hours
    old = [
        b
        for b in planned
        if b.status is BatchStatus.PLANNED and (now - b.created_at).total_seconds() >= bound * 3600
    ]
    return [_entry(pipeline, b, now, bound) for b in sorted(old, key=lambda b: b.created_at)]


def way_out(pipeline: str, batch: Batch) -> str:
    """The commands that end the batch's wait: run it again, or give it up."""
    run = (
        f"eos-ingest backfill --pipeline {pipeline} --resume {batch.batch_id}"
        if batch.kind is BatchKind.BACKFILL
        else f"eos-ingest run --pipeline {pipeline}"
    )
    return (
        f"resume it with `{run}`, or give it up with "
        f'`eos-ingest abandon --pipeline {pipeline} --batch-id {batch.batch_id} --reason "..."`'
    )


def _entry(pipeline: str, batch: Batch, now: datetime, bound: float) -> dict[str, Any]:
    age = (now - batch.created_at).total_seconds() / 3600
    retention = max(float(_RETENTION_FLOOR_HOURS), math.ceil(age) + 1.0)
    holds = (
        f"it holds maintain back: the retention of its deletes (VACUUM; on Iceberg expire_snapshots "
        f"and remove_orphan_files) is kept at {retention:g} hours, its age and growing, and the "
        "VACUUM lock is never taken while it is planned"
    )
    out = way_out(pipeline, batch)
    attempt = (
        "never attempted"
        if batch.fence == 0
        else f"last attempt (fence {batch.fence}) at {batch.updated_at.isoformat()}"
    )
    message = (
        f"batch {batch.batch_id} ({batch.kind.value}) of pipeline {pipeline} is planned since "
        f"{batch.created_at.isoformat()} ({age:.1f} h, past {STALE_HOURS_ENV}={bound:g}; {attempt}), "
        f"likely left by a killed attempt: {holds}; {out}"
    )
    return {
        "batch_id": batch.batch_id,
        "kind": batch.kind.value,
        "planned_at": batch.created_at.isoformat(),
        "last_attempt_at": None if batch.fence == 0 else batch.updated_at.isoformat(),
        "fence": batch.fence,
        "age_hours": round(age, 2),
        "holds_back": {"retention_hours": retention, "vacuum_lock": True},
        "way_out": out,
        "message": message,
    }
