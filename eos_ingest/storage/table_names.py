"""What a pipeline's output tables are called, per table format: the name a person reads (the page,
the DAG's doc panel), the folder or object-store prefix that holds the table (the Airflow Asset's
URI) and the OpenLineage dataset. From the config alone: nothing is opened, so the DAG files call it
while they are parsed.

OpenLineage's naming conventions name a table stored as files by its location: ``file`` and the
absolute path for a local folder, ``s3://{bucket}`` and the key for an s3a:// URI. OpenLineage's
Spark integration names an Iceberg table so too (by its location, with the catalog's name as a
symlink), so the datasets here join with the ones a Spark job's own events carry. An Iceberg
table of the JDBC catalog lives at <warehouse>/<namespace>/<table> (the catalog's default location,
which the writer never overrides). A REST catalog's server places its tables where it will, so
the config does not say where one is stored: its table is named by the catalog instead, the REST
resource `<uri>/v1/namespaces/<namespace>/tables/<table>` as its location and URI, and the
dataset (`<uri>` with `/<warehouse>` if the file names one, `<namespace>.<table>`). No credential
is needed for any of it: the DAG files name tables without the catalog's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.config.table_location import TableLocation, is_object_store
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


def catalog_name(config: PipelineConfig) -> str:
    """The pipeline's Iceberg catalog's name in Spark (and in a JDBC catalog's rows), from the
    config alone (storage/iceberg/catalog.py registers it under this name)."""
    return f"eos_{config.name}"


def delta_name(location: TableLocation) -> TableName:
    """The Delta table in the folder or s3a:// URI `location`."""
    return TableName(str(location), location, table_uri(location), location_dataset(location))


def iceberg_name(catalog: str, warehouse: TableLocation, table: str) -> TableName:
    """The Iceberg table `table` (namespace.table) of the JDBC catalog named `catalog` in Spark,
    whose warehouse is `warehouse` (the config's output.path: a Path for a local folder)."""
    namespace, name = table.split(".")
    if isinstance(warehouse, Path):
        location: TableLocation = warehouse / namespace / name
    else:
        location = f"{warehouse.rstrip('/')}/{namespace}/{name}"
    return TableName(f"{catalog}.{table}", location, table_uri(location), location_dataset(location))


def rest_iceberg_name(catalog: str, uri: str, warehouse: str | None, table: str) -> TableName:
    """The Iceberg table `table` (namespace.table) of the REST catalog at `uri` named `catalog` in
    Spark (`warehouse`: the server's warehouse the file names, if any)."""
    namespace, name = table.split(".")
    resource = f"{uri}/v1/namespaces/{namespace}/tables/{name}"
    where = f"{uri}/{warehouse}" if warehouse else uri
    return TableName(f"{catalog}.{table}", resource, resource, (where, table))


def output_names(config: PipelineConfig) -> dict[str, TableName]:
    """The pipeline's table and quarantine table (OUTPUT_TABLES), named for its output.format."""
    if config.output.format == "iceberg":
        catalog = config.output.catalog
        tables = dict(zip(OUTPUT_TABLES, config.output_tables, strict=True))
        if catalog.type == "rest":
            assert catalog.uri is not None  # the config requires it
            return {
                which: rest_iceberg_name(catalog_name(config), catalog.uri, catalog.warehouse, table)
                for which, table in tables.items()
            }
        assert config.output.path is not None  # the warehouse, filled in by the config
        return {
            which: iceberg_name(catalog_name(config), config.output.path, table)
            for which, table in tables.items()
        }
    return {TABLE: delta_name(config.output_path), QUARANTINE: delta_name(config.quarantine_path)}
