"""Delta behind storage/table_reader.TableReader: a pipeline's Delta tables read with delta-rs (no
JVM, and other code than the writer's), their figures from the Delta log (storage/delta/figures.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.config.table_location import TableLocation
from eos_ingest.control.batches import Batch
from eos_ingest.storage.batch_rows import batch_filter, pruning_predicate, rows_filter, select_batch
from eos_ingest.storage.delta.figures import last_maintenance, table_figures
from eos_ingest.storage.object_stores import delta_rs_table
from eos_ingest.storage.table_names import TableName, output_names

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as pads
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession


def batch_files(delta: DeltaTable, batch: Batch) -> pads.Dataset:
    """The table as an Arrow dataset of only the files that may hold the batch's rows."""
    return delta.to_pyarrow_dataset(file_pruning_predicate=pruning_predicate(batch))


@dataclass(frozen=True)
class PublishedDelta:
    """A Delta table's latest version, opened with delta-rs."""

    delta: DeltaTable

    def column_names(self) -> list[str]:
        return list(self.delta.schema().to_arrow().names)

    def batch_rows(self, batch: Batch, columns: Sequence[str] | None = None) -> pa.Table:
        files = batch_files(self.delta, batch)

        def read(wanted: Sequence[str] | None, few_ranges: bool) -> pa.Table:
            where = batch_filter(batch) if few_ranges else rows_filter(batch)
            return files.to_table(columns=None if wanted is None else list(wanted), filter=where)

        return select_batch(read, batch, columns)


class DeltaReader:
    """A Delta pipeline's table and quarantine table, each a folder or s3a:// URI."""

    format = "delta"
    version_label = "Delta version"  # what figures()' version and a batch's delta_version are

    def __init__(self, config: PipelineConfig) -> None:
        self.names = output_names(config)

    def name(self, which: str) -> TableName:
        return self.names[which]

    def open(self, which: str) -> PublishedDelta | None:
        delta = delta_rs_table(self.names[which].location)
        return None if delta is None else PublishedDelta(delta)

    def spark_rows(self, spark: SparkSession, which: str) -> DataFrame | None:
        location = self.names[which].location
        if delta_rs_table(location) is None:  # delta-rs answers from the log, without a Spark job
            return None
        return spark.read.format("delta").load(str(location))

    def figures(self, which: str) -> dict[str, Any] | None:
        location = self.names[which].location
        figures = table_figures(location)
        if figures is None:
            return None
        return {**asdict(figures), "last_maintenance": last_maintenance(location)}


def committed_rows(
    location: TableLocation, batch: Batch, columns: Sequence[str] | None = None
) -> pa.Table | None:
    """The batch's rows of the Delta table at `location` (only `columns`; all if None), read with
    delta-rs; None if there is no table."""
    delta = delta_rs_table(location)
    return None if delta is None else PublishedDelta(delta).batch_rows(batch, columns)
