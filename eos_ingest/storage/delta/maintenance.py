"""Table maintenance of a Delta pipeline: OPTIMIZE (compact small files) and VACUUM (delete
unreferenced files) of its table and its quarantine table.

Exactly-once is untouched: OPTIMIZE only rewrites files (its commit has dataChange=false), so the
rows and every batch's txnAppId stay as they were; a replace racing an OPTIMIZE commit fails with
a concurrent-modification error that writer.replace_ranges retries (ConcurrentDeleteReadException
and ConcurrentDeleteDeleteException are in its list).

VACUUM deletes files that the current version no longer references and that were removed longer
ago than the retention, under the pipeline's VACUUM lock with the retention planned batches need
(storage/maintain_deletes.py, shared with Iceberg's maintain). The figures before and after, and
the last maintenance the page shows, are read from the Delta log (figures.py).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import delta.exceptions  # noqa: F401  (installs the conversion of Delta's conflict errors)
from delta.tables import DeltaTable as SparkDeltaTable

from eos_ingest.config.table_location import TableLocation
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import MaintenanceBusyError
from eos_ingest.storage.commit_outcomes import is_delta_conflict
from eos_ingest.storage.delta.figures import figures_of, last_maintenance, table_figures
from eos_ingest.storage.lost_races import retry_lost_races
from eos_ingest.storage.maintain_deletes import DEFAULT_RETENTION_HOURS, under_vacuum_lock
from eos_ingest.storage.object_stores import delta_rs_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Spark refuses a VACUUM below the table's retention unless this check is off.
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# Tries of one OPTIMIZE that loses to concurrent writers (a batch's replace), 1 s, 2 s, 4 s ... apart.
OPTIMIZE_ATTEMPTS = 5
# Writes VACUUM START / VACUUM END commits (with metrics) to the log, where last_maintenance reads them.
_VACUUM_LOGGING = "spark.databricks.delta.vacuum.logging.enabled"


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
        "before": asdict(figures_of(delta)),
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
        before = figures_of(delta)
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


def _optimize(spark: SparkSession, location: TableLocation) -> dict[str, Any]:
    """OPTIMIZE (compaction) of one table, retried on Delta's concurrent-modification errors: a
    batch's replace that commits while OPTIMIZE rewrites the files it removes wins, and OPTIMIZE,
    which changed nothing, starts over from the new version. Past the tries MaintenanceBusyError."""

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
        compact,
        lost=is_delta_conflict,
        tries=OPTIMIZE_ATTEMPTS,
        what=f"OPTIMIZE of {location}",
        give_up=give_up,
    )
    wanted = ("numFilesAdded", "numFilesRemoved", "partitionsOptimized")
    return {**{k: optimized.get(k) for k in wanted}, "attempts": attempts}


def _vacuum(spark: SparkSession, location: TableLocation, retention_hours: float) -> dict[str, Any]:
    """VACUUM of one table with a retention vacuum_retention_hours allowed; the figures after it."""
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
