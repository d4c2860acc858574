"""Delta Lake behind storage/table_format.TableFormat: the staged replaceWhere of storage/delta/writer.py
(its files from Delta's own WriteIntoDelta, storage/delta/staged_write.py), committed with Delta's
optimistic transaction and its idempotent txnAppId/txnVersion."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from eos_ingest.storage.delta import writer
from eos_ingest.storage.delta.staged_write import StagedReplace
from eos_ingest.storage.table_format import Replace, ReplaceResult, StagedWrite, TableFormat, Txn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


class DeltaFormat:
    name = "delta"

    def stage(self, spark: SparkSession, replace: Replace) -> StagedWrite:
        return writer.stage(spark, replace)

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
        self, spark: SparkSession, replace: Replace, *, before_write: Callable[[], None] | None = None
    ) -> ReplaceResult:
        return writer.replace_ranges(spark, replace, before_write=before_write)


DELTA: TableFormat = DeltaFormat()
