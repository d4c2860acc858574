"""The table formats eos-ingest writes, by name: a pipeline's output table is one of these
(`output.format`: Delta, the default, or Iceberg in the pipeline's catalog). output_format is what
a batch writes through (table_format.TableFormat); output_reader what reads the published tables
(table_reader.TableReader: verify, the audit, the Ingestion page).

The one module of storage/'s shared level that imports the format folders: a registry must name
its implementations, so that the batch, the audit and verify choose a format by the config alone
and import none themselves (pyproject.toml's import-linter contracts: the formats import none of
each other, the other shared modules neither of them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eos_ingest.config.output import FORMATS

if TYPE_CHECKING:
    from eos_ingest.config.pipeline import PipelineConfig
    from eos_ingest.storage.table_format import TableFormat
    from eos_ingest.storage.table_reader import TableReader

# Each format is imported when a pipeline asks for it, not with this registry: the formats' readers
# and Delta's writer bring pyarrow, pandas and numpy (~110 MB, ~0.9 s of CPU), which the CLI's
# commands that only plan, launch or report (every `eos-ingest run` waits beside its Spark driver
# for the whole batch) and Airflow's tasks do without. Iceberg's writer also brings pyspark.


def output_format(config: PipelineConfig | None = None) -> TableFormat:
    """The implementation of the pipeline's table format (Delta without a pipeline). Its tables
    are named as PipelineConfig.output_tables names them."""
    name = config.output.format if config is not None else "delta"
    if name == "delta":
        from eos_ingest.storage.delta.format import DELTA  # noqa: PLC0415 pyarrow: asked for (above)

        return DELTA
    if name == "iceberg" and config is not None:
        from eos_ingest.storage.iceberg.catalog import IcebergCatalog  # noqa: PLC0415 pyspark: asked for (above)
        from eos_ingest.storage.iceberg.format import IcebergFormat  # noqa: PLC0415 pyspark: asked for (above)

        return IcebergFormat(IcebergCatalog.of(config))
    raise ValueError(f"unknown table format {name!r}; eos-ingest writes {', '.join(FORMATS)}")


def output_reader(config: PipelineConfig) -> TableReader:
    """The reader of the pipeline's published table and quarantine table, in its format."""
    if config.output.format == "iceberg":
        from eos_ingest.storage.iceberg.reader import IcebergReader  # noqa: PLC0415 pyarrow: asked for (above)

        return IcebergReader(config)
    if config.output.format == "delta":
        from eos_ingest.storage.delta.reader import DeltaReader  # noqa: PLC0415 pyarrow: asked for (above)

        return DeltaReader(config)
    raise ValueError(f"unknown table format {config.output.format!r}; eos-ingest reads {', '.join(FORMATS)}")


def uses_iceberg(config: PipelineConfig) -> bool:
    """Whether the pipeline's Spark sessions need Iceberg's jars."""
    return config.output.format == "iceberg"
