"""What the modules that read a pipeline's published output tables ask of its table format, beside
what a batch writes through (storage/table_format.py): the independent verify (service/verify.py),
the audit (quality/audit.py), the Ingestion page's Tables section (service/status.py). The names
(page, Asset, OpenLineage) come from the config alone: storage/table_names.py.

One implementation per format, chosen by `output.format` (table_formats.output_reader): Delta's
reads with delta-rs (storage/delta/reader.py), Iceberg's with pyiceberg through the pipeline's
catalog (storage/iceberg/reader.py). Both read what main (Delta: the latest version) publishes,
never a staged write, and none of them starts a JVM except spark_rows, which reads through the
caller's Spark session.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from eos_ingest.redact import redact_text
from eos_ingest.storage.table_names import OUTPUT_TABLES, TableName

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from eos_ingest.control.batches import Batch

log = logging.getLogger(__name__)


class PublishedTable(Protocol):
    """One output table as its current version publishes it, opened without Spark."""

    def column_names(self) -> list[str]:
        """The table's columns, in its schema's order."""
        ...

    def batch_rows(self, batch: Batch, columns: Sequence[str] | None = None) -> pa.Table:
        """The batch's rows (storage/batch_rows.py: inside its ranges, or carrying its id), only
        `columns` (all if None), reading only the files that may hold them."""
        ...


class TableReader(Protocol):
    """A pipeline's output tables (`which`: table_names.TABLE or QUARANTINE) in one format."""

    format: str
    # What a table's version (figures) and a batch's recorded version (delta_version) are, as the
    # page names them: "Delta version", "Iceberg snapshot".
    version_label: str

    def name(self, which: str) -> TableName:
        """How the table is named (page, Asset, OpenLineage)."""
        ...

    def open(self, which: str) -> PublishedTable | None:
        """The table as it is now; None before its first write."""
        ...

    def spark_rows(self, spark: SparkSession, which: str) -> DataFrame | None:
        """Every row of the table's current version as a frame of `spark`; None before its first write."""
        ...

    def figures(self, which: str) -> dict[str, Any] | None:
        """What the Ingestion page shows of the table: {"version", "files", "bytes",
        "last_maintenance"} (last_maintenance: {"version", "operation", "at", "metrics"} or None);
        None before its first write."""
        ...


def page_figures(reader: TableReader) -> dict[str, dict[str, Any] | None]:
    """reader.figures of each output table; a table that cannot be read (a store or catalog that
    does not answer) gets {"error": ...}: the page still renders."""

    def one(which: str) -> dict[str, Any] | None:
        try:
            return reader.figures(which)
        except Exception as exc:  # delta-rs, pyiceberg, OSError, SQLAlchemy kinds: the page must render
            log.warning("table %s: no figures: %s", reader.name(which).shown, exc)
            return {"error": redact_text(f"{type(exc).__name__}: {exc}")}

    return {which: one(which) for which in OUTPUT_TABLES}
