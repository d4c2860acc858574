"""What a pipeline's output tables are called, per table format: the name a person reads (the page,
the DAG's doc panel), the folder or object-store prefix that holds the table (the Airflow Asset's
URI) and the OpenLineage dataset. From the config alone: nothing is opened, so the DAG files call it
while they are parsed.

OpenLineage's naming conventions name a table stored as files by its location: ``file`` and the
absolute path for a local folder, ``s3://{bucket}`` and the key for an s3a:// URI. OpenLineage's
Spark integration names an Iceberg table so too (by its location, with the catalog's name as a
symlink), so the datasets here join with the ones a Spark job's own events carry. An Iceberg
table of the JDBC catalog lives at <warehouse>/<namespace>/<table> (the catalog's default location,
which the writer never overrides).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.config.table_location import TableLocation, is_object_store
from eos_ingest.storage.iceberg_catalog import IcebergCatalog
from eos_ingest.storage.object_stores import table_uri

TABLE, QUARANTINE = "table", "quarantine"
# The pipeline's two output tables, in the order every listing shows them.
OUTPUT_TABLES = (TABLE, QUARANTINE)


@dataclass(frozen=True)
class TableName:
    """shown: how a person finds the table (Delta: its folder or URI; Iceberg: its Spark name,
    catalog.namespace.table). location: the folder or s3a:// URI holding it. uri: location as a
    URI (file:///... or s3a://...), the Airflow Asset's. dataset: OpenLineage's (namespace, name)."""

    shown: str
    location: TableLocation
    uri: str
    dataset: tuple[str, str]


def location_dataset(location: TableLocation) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a table stored in the folder or s3a:// URI `location`."""
    if is_object_store(location):
        uri = urlsplit(str(location))
        return f"s3://{uri.netloc}", uri.path.strip("/")
    return "file", str(location)


def delta_name(location: TableLocation) -> TableName:
    """The Delta table in the folder or s3a:// URI `location`."""
    return TableName(str(location), location, table_uri(location), location_dataset(location))


def iceberg_name(catalog: IcebergCatalog, warehouse: TableLocation, table: str) -> TableName:
    """The Iceberg table `table` (namespace.table) of `catalog`, whose warehouse is `warehouse`
    (the config's output.path: a Path for a local folder)."""
    namespace, name = table.split(".")
    if isinstance(warehouse, Path):
        location: TableLocation = warehouse / namespace / name
    else:
        location = f"{warehouse.rstrip('/')}/{namespace}/{name}"
    return TableName(catalog.identifier(table), location, table_uri(location), location_dataset(location))


def output_names(config: PipelineConfig) -> dict[str, TableName]:
    """The pipeline's table and quarantine table (OUTPUT_TABLES), named for its output.format."""
    if config.output.format == "iceberg":
        assert config.output.path is not None  # the warehouse, filled in by the config
        catalog = IcebergCatalog.of(config)
        return {
            which: iceberg_name(catalog, config.output.path, table)
            for which, table in zip(OUTPUT_TABLES, config.output_tables, strict=True)
        }
    return {TABLE: delta_name(config.output_path), QUARANTINE: delta_name(config.quarantine_path)}
