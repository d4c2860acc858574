"""What the Ingestion page and `eos-ingest maintain` show of a Delta table: its current version's
files and bytes, and its last maintenance, read from the Delta log with delta-rs (no JVM).

Maintenance is recorded by Delta itself: its OPTIMIZE and VACUUM END commits carry the time and
the metrics (files and bytes removed and added), read back here (last_maintenance): no table in
the control DB, no schema change.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.config.table_location import TableLocation
from eos_ingest.redact import redact_text
from eos_ingest.storage.object_stores import delta_rs_table

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

# Commits searched for the last maintenance (a table taking a batch an hour makes 168 a week).
HISTORY_DEPTH = 1000
MAINTENANCE_OPERATIONS = ("OPTIMIZE", "VACUUM END")


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
    return figures_of(delta)


def figures_of(delta: DeltaTable) -> TableFigures:
    """The figures of a Delta table delta-rs opened."""
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
