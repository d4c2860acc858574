"""Table maintenance: OPTIMIZE (compact small files) and VACUUM (delete unreferenced files) of a
pipeline's table and its quarantine table, and the figures the Ingestion page shows about them.

Exactly-once is untouched: OPTIMIZE only rewrites files (its commit has dataChange=false), so the
rows and every batch's txnAppId stay as they were; a replace racing an OPTIMIZE commit fails with
a concurrent-modification error that writer.replace_ranges retries (ConcurrentDeleteReadException
and ConcurrentDeleteDeleteException are in its list).

VACUUM deletes files that the current version no longer references and that were removed longer
ago than the retention. A planned batch (a running or crashed ingest, a backfill) may still read
or replace from the versions of its start, so the retention covers the age of the oldest planned
batch, and is never below Delta's default of 7 days unless the operator asks for less and no batch
is planned (vacuum_retention_hours).

Maintenance is recorded by Delta itself: its OPTIMIZE and VACUUM END commits carry the time and
the metrics (files and bytes removed and added), read back with delta-rs (last_maintenance): no
table in the control DB, no schema change.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.config.table_location import TableLocation
from eos_ingest.control.store import Batch, ControlStore
from eos_ingest.errors import ConfigError, MaintenanceBusyError
from eos_ingest.fault_points import pause_if_asked
from eos_ingest.redact import redact_text
from eos_ingest.storage.lost_races import retry_lost_races
from eos_ingest.storage.object_stores import delta_rs_table
from eos_ingest.storage.delta.writer import is_conflict

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Delta's default delta.deletedFileRetentionDuration: 7 days.
DEFAULT_RETENTION_HOURS = 168
# Commits searched for the last maintenance (a table taking a batch an hour makes 168 a week).
HISTORY_DEPTH = 1000
MAINTENANCE_OPERATIONS = ("OPTIMIZE", "VACUUM END")
# Spark refuses a VACUUM below the table's retention unless this check is off.
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# Tries of one OPTIMIZE that loses to concurrent writers (a batch's replace), 1 s, 2 s, 4 s ... apart.
OPTIMIZE_ATTEMPTS = 5
# How long the VACUUM lock outlives a maintain that died holding it (batches exit 75 meanwhile and
# are retried). It is renewed before each table's VACUUM, and only a VACUUM's first moments need
# it: VACUUM spares the files written after it started (their modification time is above its
# cut-off), so an attempt that takes a fence once the lease ran out is safe beside a long VACUUM.
VACUUM_LOCK_LEASE = timedelta(minutes=10)
# Fault injection for tests: pause (as batch_sequence's pauses) after OPTIMIZE, before the VACUUM
# lock is taken; and with the lock held, before VACUUM.
PAUSE_BEFORE_VACUUM_ENV = "EOS_FAULT_PAUSE_BEFORE_VACUUM"
PAUSE_UNDER_VACUUM_LOCK_ENV = "EOS_FAULT_PAUSE_UNDER_VACUUM_LOCK"
# Writes VACUUM START / VACUUM END commits (with metrics) to the log, where last_maintenance reads them.
_VACUUM_LOGGING = "spark.databricks.delta.vacuum.logging.enabled"


@dataclass(frozen=True)
class TableFigures:
    """The current version of a Delta table: its data files and their total size."""

    version: int
    files: int
    bytes: int


def table_figures(location: TableLocation) -> TableFigures | None:
    """Files and bytes of the table's current version, read from its log with delta-rs; None if
    there is no table."""
    delta = delta_rs_table(location)
    if delta is None:
        return None
    return _figures(delta)


def _figures(delta: DeltaTable) -> TableFigures:
    import pyarrow as pa

    actions = pa.table(delta.get_add_actions(flatten=True))
    size = int(pa.compute.sum(actions.column("size_bytes")).as_py() or 0) if actions.num_rows else 0
    return TableFigures(int(delta.version()), actions.num_rows, size)


def last_maintenance(location: TableLocation) -> dict[str, Any] | None:
    """The newest OPTIMIZE or VACUUM END commit of the table: its version, operation, time (UTC,
    ISO-8601) and metrics; None if the table has none (or no table)."""
    delta = delta_rs_table(location)
    if delta is None:
        return None
    for commit in delta.history(HISTORY_DEPTH):  # newest first
        if commit.get("operation") in MAINTENANCE_OPERATIONS:
            return {
                "version": int(commit["version"]),
                "operation": commit["operation"],
                "at": datetime.fromtimestamp(int(commit["timestamp"]) / 1000, UTC).isoformat(),
                "metrics": _numbers(commit.get("operationMetrics") or {}),
            }
    return None


def _numbers(metrics: dict[str, Any]) -> dict[str, Any]:
    """Delta Spark writes every operation metric as a string: whole numbers become ints."""
    return {k: int(v) if isinstance(v, str) and v.isdigit() else v for k, v in metrics.items()}


def table_maintenance_status(config: PipelineConfig) -> dict[str, Any]:
    """What the Ingestion page shows per table: file count, size and the last maintenance;
    None for a table not written yet. A table that cannot be read (a store that does not answer)
    gets {"error": ...}: the page still renders."""

    def one(location: TableLocation) -> dict[str, Any] | None:
        try:
            figures = table_figures(location)
            if figures is None:
                return None
            return {**asdict(figures), "last_maintenance": last_maintenance(location)}
        except Exception as exc:  # delta-rs raises its own and OSError kinds; the page must render
            log.warning("table %s: no figures: %s", location, exc)
            return {"error": redact_text(f"{type(exc).__name__}: {exc}")}

    return {"table": one(config.output_path), "quarantine": one(config.quarantine_path)}


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


def maintain_table(
    spark: SparkSession | None, location: TableLocation, retention_hours: float, *, dry_run: bool = False
) -> dict[str, Any] | None:
    """A dry run of maintenance on one Delta table (None if there is no table): the figures now and
    how many files VACUUM would delete, listed with delta-rs; nothing changes, no Spark.
    (maintain_tables does the real run of both tables.)"""
    del spark
    if not dry_run:
        raise ValueError("maintain_table is the dry run; call maintain_tables to change the tables")
    delta = delta_rs_table(location)
    if delta is None:
        return None
    doomed = delta.vacuum(
        retention_hours=int(retention_hours), dry_run=True, enforce_retention_duration=False
    )
    return {
        "before": asdict(_figures(delta)),
        "retention_hours": retention_hours,
        "would_vacuum_files": len(doomed),
    }


def maintain_tables(
    spark: SparkSession,
    store: ControlStore,
    pipeline: str,
    locations: dict[str, TableLocation],
    requested_hours: float | None,
) -> dict[str, Any]:
    """OPTIMIZE every table of `locations` (name -> table), then VACUUM them under the pipeline's
    VACUUM lock. Returns per name the figures before and after, the OPTIMIZE metrics and the files
    VACUUM deleted (None for a table not written yet).

    Why the lock: VACUUM deletes every unreferenced file older than its retention, and a batch's
    staged files are unreferenced until its commit. So the check that no batch is in flight is made
    when VACUUM is due, not only when maintain starts (a batch may be planned and staged while
    OPTIMIZE runs), and from that check to the end of VACUUM no attempt takes a fence
    (ControlStore.take_fence). A batch in flight then leaves VACUUM to a retention that spares it
    (vacuum_retention_hours), or, when the requested one would not, VACUUM is skipped:
    MaintenanceBusyError, retriable, after OPTIMIZE did its work."""
    reports: dict[str, Any] = {}
    for name, location in locations.items():
        delta = delta_rs_table(location)
        if delta is None:
            reports[name] = None
            continue
        before = _figures(delta)
        reports[name] = {"before": asdict(before), "optimize": _optimize(spark, location)}
    with under_vacuum_lock(
        store, pipeline, requested_hours, done="OPTIMIZE done", left="VACUUM skipped"
    ) as held:
        for name, location in locations.items():
            if reports[name] is not None:
                held.renew(f"VACUUM of {location} skipped")
                reports[name].update(_vacuum(spark, location, held.hours))
    for name, location in locations.items():
        if reports[name] is not None:
            log.info("maintained %s: %s", location, reports[name])
    return reports


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


def _optimize(spark: SparkSession, location: TableLocation) -> dict[str, Any]:
    """OPTIMIZE (compaction) of one table, retried on Delta's concurrent-modification errors: a
    batch's replace that commits while OPTIMIZE rewrites the files it removes wins, and OPTIMIZE,
    which changed nothing, starts over from the new version. Past the tries MaintenanceBusyError."""
    import delta.exceptions  # noqa: F401  (installs the conversion of Delta's conflict errors)
    from delta.tables import DeltaTable as SparkDeltaTable

    def compact() -> dict[str, Any]:
        rows = SparkDeltaTable.forPath(spark, str(location)).optimize().executeCompaction()
        found = rows.select("metrics").collect()
        return found[0]["metrics"].asDict(recursive=True) if found else {}

    def give_up(exc: BaseException, made: int) -> Exception:
        return MaintenanceBusyError(
            f"OPTIMIZE of {location} lost to concurrent writers {made} times ({type(exc).__name__}); "
            "it changed nothing: run maintain again"
        )

    optimized, attempts = retry_lost_races(
        compact, lost=is_conflict, tries=OPTIMIZE_ATTEMPTS, what=f"OPTIMIZE of {location}", give_up=give_up
    )
    wanted = ("numFilesAdded", "numFilesRemoved", "partitionsOptimized")
    return {**{k: optimized.get(k) for k in wanted}, "attempts": attempts}


def _vacuum(spark: SparkSession, location: TableLocation, retention_hours: float) -> dict[str, Any]:
    """VACUUM of one table with a retention vacuum_retention_hours allowed; the figures after it."""
    from delta.tables import DeltaTable as SparkDeltaTable

    table = SparkDeltaTable.forPath(spark, str(location))
    previous = {key: spark.conf.get(key, None) for key in (_RETENTION_CHECK, _VACUUM_LOGGING)}
    try:
        spark.conf.set(_VACUUM_LOGGING, "true")
        if retention_hours < DEFAULT_RETENTION_HOURS:
            # Only reached when vacuum_retention_hours allowed it: no batch is in flight.
            spark.conf.set(_RETENTION_CHECK, "false")
        table.vacuum(float(retention_hours))
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    after = table_figures(location)
    assert after is not None  # the table existed a moment ago and OPTIMIZE never deletes it
    vacuumed = last_maintenance(location)
    return {
        "after": asdict(after),
        "retention_hours": retention_hours,
        "vacuum": vacuumed["metrics"] if vacuumed and vacuumed["operation"] == "VACUUM END" else None,
    }
