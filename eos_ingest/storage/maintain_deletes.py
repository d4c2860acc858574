"""What maintain's deletes run under, in both formats (Delta's VACUUM, storage/delta/maintenance.py;
Iceberg's expire_snapshots and remove_orphan_files, storage/iceberg/maintenance.py): the pipeline's
VACUUM lock (its rows: control/vacuum_lock.py) and the retention that planned batches need.

A planned batch (a running or crashed ingest, a backfill) may still read or replace from the table
versions of its start, and its staged files (Delta's Parquet files, Iceberg's branch) are
referenced by no published version until its commit. So the deletes keep everything younger than
the oldest planned batch, never less than Delta's default of 7 days while one is planned, and the
check that no batch is in flight is made when the deletes are due, under the lock that keeps new
attempts from taking a fence (ControlStore.take_fence).
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from eos_ingest.control.batches import Batch
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import ConfigError, MaintenanceBusyError
from eos_ingest.fault_points import pause_if_asked

# Delta's default delta.deletedFileRetentionDuration: 7 days; the floor while a batch is planned.
DEFAULT_RETENTION_HOURS = 168
# How long the VACUUM lock outlives a maintain that died holding it (batches exit 75 meanwhile and
# are retried). It is renewed before each table's deletes, and only their first moments need it:
# VACUUM spares the files written after it started (their modification time is above its cut-off),
# so an attempt that takes a fence once the lease ran out is safe beside a long VACUUM.
VACUUM_LOCK_LEASE = timedelta(minutes=10)
# Fault injection for tests: pause (as the batch attempt's pauses) after the compaction, before the
# VACUUM lock is taken; and with the lock held, before the deletes.
PAUSE_BEFORE_VACUUM_ENV = "EOS_FAULT_PAUSE_BEFORE_VACUUM"
PAUSE_UNDER_VACUUM_LOCK_ENV = "EOS_FAULT_PAUSE_UNDER_VACUUM_LOCK"


def vacuum_retention_hours(
    planned: Sequence[Batch], requested: float | None, now: datetime | None = None
) -> float:
    """The VACUUM retention in hours: it keeps every file a planned batch may still read.

    A planned batch started from a version no older than its created_at, so the retention must
    cover now - the oldest planned batch's created_at, and is never below Delta's 7 days then.
    `requested` (--retention-hours) below that is refused with ConfigError naming the batch;
    without a planned batch any requested value >= 0 is used, else 7 days."""
    now = now or datetime.now(UTC)
    if requested is not None and (requested < 0 or math.isnan(requested)):
        raise ConfigError(f"--retention-hours {requested} is not valid; use a number of hours >= 0, e.g. 168")
    if not planned:
        return float(DEFAULT_RETENTION_HOURS if requested is None else requested)
    oldest = min(planned, key=lambda b: b.created_at)
    age_hours = (now - oldest.created_at).total_seconds() / 3600
    needed = max(float(DEFAULT_RETENTION_HOURS), math.ceil(age_hours) + 1.0)
    if requested is None:
        return needed
    if requested < needed:
        raise ConfigError(
            f"--retention-hours {requested:g} is refused: batch {oldest.batch_id} ({oldest.kind.value}, "
            f"planned at {oldest.created_at.isoformat()}) is unfinished and may still read or replace "
            f"files of the versions since then, so VACUUM must keep at least {needed:g} hours (never "
            f"below Delta's default {DEFAULT_RETENTION_HOURS} while a batch is planned); leave the "
            "option out, give at least that, or finish or abandon the batch first"
        )
    return float(requested)


@dataclass(frozen=True)
class HeldVacuumLock:
    """What under_vacuum_lock yields: the retention its deletes may use, and renew(), called before
    each table's deletes."""

    store: ControlStore
    pipeline: str
    holder: str
    in_flight: bool  # a batch was in flight: no lock taken, the retention spares it instead
    hours: float
    done: str

    def renew(self, skipped: str) -> None:
        """Renew the lease; MaintenanceBusyError naming `skipped` when it ran out (a batch may have
        staged files since)."""
        if not self.in_flight and not self.store.renew_vacuum(self.pipeline, self.holder, VACUUM_LOCK_LEASE):
            raise MaintenanceBusyError(
                f"pipeline {self.pipeline}: {self.done}, {skipped}: this maintain's VACUUM lock ran out "
                "(its lease) before it, so a batch may have staged files since; run maintain again"
            )


@contextmanager
def under_vacuum_lock(
    store: ControlStore, pipeline: str, requested_hours: float | None, *, done: str, left: str
) -> Iterator[HeldVacuumLock]:
    """The deletes of maintain (Delta's VACUUM, Iceberg's expire_snapshots and remove_orphan_files),
    for both formats: take the pipeline's VACUUM lock unless a batch is in flight, pick the
    retention (vacuum_retention_hours), release the lock at the end. A retention the in-flight batch
    needs more than asked: MaintenanceBusyError, "<done>, <left>: ...", retriable. Why the check is
    made here, not when maintain starts: a batch may be planned and staged while compaction runs."""
    pause_if_asked(PAUSE_BEFORE_VACUUM_ENV)
    holder = f"{socket.gethostname()} pid {os.getpid()}"
    in_flight = store.begin_vacuum(pipeline, holder, VACUUM_LOCK_LEASE)
    try:
        try:
            hours = vacuum_retention_hours(in_flight, requested_hours)
        except ConfigError as exc:
            raise MaintenanceBusyError(
                f"pipeline {pipeline}: {done}, {left}: a batch was planned since maintain started and "
                f"may still need the files they would delete ({exc}); run maintain again once it is committed"
            ) from exc
        pause_if_asked(PAUSE_UNDER_VACUUM_LOCK_ENV)
        yield HeldVacuumLock(store, pipeline, holder, bool(in_flight), hours, done)
    finally:
        if not in_flight:
            store.end_vacuum(pipeline, holder)
