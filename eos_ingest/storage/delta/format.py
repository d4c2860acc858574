"""Delta Lake behind storage/table_format.TableFormat: the staged replaceWhere of storage/delta/writer.py
(its files from Delta's own WriteIntoDelta, storage/delta/staged_write.py), committed with Delta's
optimistic transaction and its idempotent txnAppId/txnVersion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from eos_ingest.storage.delta import writer
from eos_ingest.storage.delta.staged_write import StagedReplace
from eos_ingest.storage.table_format import ReplaceResult, StagedWrite, TableFormat, Txn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from eos_ingest.plan.ranges import PlannedRange


class DeltaFormat:
    name = "delta"

    def stage(
        self,
        spark: SparkSession,
        rows: DataFrame,
        path: str,
        ranges: Sequence[PlannedRange],
        batch_id: int,
        partition_by: Sequence[str] = (),
        *,
        txn: Txn | None = None,
        merge_schema: bool = False,
    ) -> StagedWrite:
        return writer.stage(
            spark, rows, path, ranges, batch_id, partition_by, txn=txn, merge_schema=merge_schema
        )

    def table_schema(self, spark: SparkSession, path: str) -> StructType | None:
        """The Delta table's schema, read from its log on the driver; None when there is no table."""
        from delta.tables import DeltaTable  # noqa: PLC0415 delta-spark imports pyspark, which the CLI and the audit, importing this module through table_formats, may never use

        if not DeltaTable.isDeltaTable(spark, path):
            return None
        return spark.read.format("delta").load(path).schema

    def commit_staged(
        self,
        stage_once: Callable[[], StagedWrite],
        path: str,
        batch_id: int,
        *,
        txn: Txn | None = None,
        check: Callable[[StagedWrite], None] | None = None,
        before_write: Callable[[], None] | None = None,
        before_commit: Callable[[], None] | None = None,
    ) -> ReplaceResult:
        # Every StagedWrite this format's stage() makes is a StagedReplace.
        return writer.commit_staged(
            cast("Callable[[], StagedReplace]", stage_once),
            path,
            batch_id,
            txn=txn,
            check=check,
            before_write=before_write,
            before_commit=before_commit,
        )

    def replace_ranges(
        self,
        spark: SparkSession,
        rows: DataFrame,
        path: str,
        ranges: Sequence[PlannedRange],
        batch_id: int,
        partition_by: Sequence[str] = (),
        *,
        txn: Txn | None = None,
        before_write: Callable[[], None] | None = None,
    ) -> ReplaceResult:
        return writer.replace_ranges(
            spark, rows, path, ranges, batch_id, partition_by, txn=txn, before_write=before_write
        )


DELTA: TableFormat = DeltaFormat()
