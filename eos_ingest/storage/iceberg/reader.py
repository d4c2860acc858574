"""Iceberg behind storage/table_reader.TableReader: a pipeline's Iceberg tables read with pyiceberg
through the pipeline's catalog (storage/iceberg/catalog.py: the JDBC catalog's rows read by
pyiceberg's SqlCatalog, its files from a local or s3a warehouse; a REST catalog's server by
pyiceberg's RestCatalog, with the same credentials), main's current snapshot only: never a branch
a batch has staged.

pyiceberg is the package's `iceberg` extra: it is imported where a table is read, so a Delta
pipeline's processes never load it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.batches import Batch
from eos_ingest.extras import needs_extra
from eos_ingest.storage.batch_rows import batch_topics, select_batch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.table_names import OUTPUT_TABLES, TableName, output_names

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Snapshots of main searched for the last maintenance (as Delta's HISTORY_DEPTH commits).
HISTORY_DEPTH = 1000
# Iceberg's operation of a snapshot that rewrites files without changing the rows (a compaction:
# rewrite_data_files, rewrite_manifests). A batch's publish is an append, overwrite or delete.
MAINTENANCE_OPERATION = "replace"


def batch_expression(batch: Batch, few_ranges: bool) -> Any:
    """The batch's rows as a pyiceberg row filter (storage/batch_rows.py's selection): its id or its
    ranges (few_ranges), else its id or a topic of its ranges (a superset in_batch narrows). The
    scan plans with it (manifest and file statistics), and filters the rows it reads."""
    import pyiceberg.expressions  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read

    # Its expressions are pydantic models, whose constructors mypy misreads without pydantic's plugin.
    e: Any = pyiceberg.expressions
    own = e.EqualTo("batch_id", int(batch.batch_id))
    if not few_ranges:
        topics = batch_topics(batch)
        return e.Or(own, e.In("kafka_topic", topics)) if topics else own
    clauses = [
        e.And(
            e.EqualTo("kafka_topic", r.topic),
            e.EqualTo("kafka_partition", int(r.partition)),
            e.GreaterThanOrEqual("kafka_offset", int(r.start)),
            e.LessThan("kafka_offset", int(r.end)),
        )
        for r in batch.ranges
        if r.end > r.start
    ]
    return e.Or(own, *clauses) if clauses else own


def snapshot_batch_rows(
    table: Any, snapshot_id: int | None, batch: Batch, columns: Sequence[str] | None = None
) -> pa.Table:
    """The batch's rows (only `columns`; all if None) in snapshot `snapshot_id` (None: main's
    current one) of the pyiceberg table `table`."""

    def read(wanted: Sequence[str] | None, few_ranges: bool) -> pa.Table:
        fields = ("*",) if wanted is None else tuple(wanted)
        where = batch_expression(batch, few_ranges)
        return table.scan(row_filter=where, selected_fields=fields, snapshot_id=snapshot_id).to_arrow()

    return select_batch(read, batch, columns)


@dataclass(frozen=True)
class PublishedIceberg:
    """An Iceberg table's main, at the snapshot current when it was loaded."""

    table: Any  # pyiceberg.table.Table

    def column_names(self) -> list[str]:
        return [field.name for field in self.table.schema().fields]

    def batch_rows(self, batch: Batch, columns: Sequence[str] | None = None) -> pa.Table:
        return snapshot_batch_rows(self.table, None, batch, columns)


class IcebergReader:
    """An Iceberg pipeline's table and quarantine table (namespace.table) in its catalog."""

    format = "iceberg"
    version_label = "Iceberg snapshot"  # what figures()' version and a batch's delta_version are

    def __init__(self, config: PipelineConfig) -> None:
        self.catalog = IcebergCatalog.of(config)
        self.names = output_names(config)
        self.tables = dict(zip(OUTPUT_TABLES, config.output_tables, strict=True))
        self._pyiceberg: Any = None

    def name(self, which: str) -> TableName:
        return self.names[which]

    def open(self, which: str) -> PublishedIceberg | None:
        # pyiceberg: the optional `iceberg` extra, imported only where an Iceberg table is read.
        with needs_extra("iceberg", "reading an Iceberg table without Spark (verify, the audit)"):
            from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read

        if self._pyiceberg is None:
            self._pyiceberg = self.catalog.pyiceberg()  # one catalog (one engine, one sign-in) per reader
        try:
            return PublishedIceberg(self._pyiceberg.load_table(self.tables[which]))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def spark_rows(self, spark: SparkSession, which: str) -> DataFrame | None:
        identifier = self.catalog.identifier(self.tables[which])
        self.catalog.ensure(spark)
        if not spark.catalog.tableExists(identifier):
            return None
        return spark.table(identifier)  # main's current snapshot, never a branch

    def figures(self, which: str) -> dict[str, Any] | None:
        """Main's current snapshot: its id (the version), its data files and their bytes (the
        snapshot summary's totals), and the newest compaction on main (MAINTENANCE_OPERATION)."""
        published = self.open(which)
        if published is None:
            return None
        table = published.table
        snapshot = table.current_snapshot()
        if snapshot is None:  # created, never written
            return {"version": None, "files": 0, "bytes": 0, "last_maintenance": None}
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if "total-data-files" in summary and "total-files-size" in summary:
            files, size = int(summary["total-data-files"]), int(summary["total-files-size"])
        else:  # a writer that keeps no totals: the snapshot's files, from its manifests
            tasks = list(table.scan().plan_files())
            files, size = len(tasks), sum(int(t.file.file_size_in_bytes) for t in tasks)
        return {
            "version": int(snapshot.snapshot_id),
            "files": files,
            "bytes": size,
            "last_maintenance": last_maintenance(table),
        }


def last_maintenance(table: Any) -> dict[str, Any] | None:
    """The newest compaction snapshot along main: its id, operation, time (UTC, ISO-8601) and the
    summary's figures; None if main has none within HISTORY_DEPTH snapshots."""
    snapshot = table.current_snapshot()
    for _ in range(HISTORY_DEPTH):
        if snapshot is None:
            return None
        summary = snapshot.summary
        if summary is not None and summary.operation.value == MAINTENANCE_OPERATION:
            return {
                "version": int(snapshot.snapshot_id),
                "operation": summary.operation.value,
                "at": datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC).isoformat(),
                "metrics": {
                    k: int(v) if v.isdigit() else v for k, v in summary.additional_properties.items()
                },
            }
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return None
