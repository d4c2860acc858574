"""The Iceberg catalog of an `output.format: iceberg` pipeline, as Spark and pyiceberg reach it.

The catalog is Iceberg's JDBC catalog in a database the pipeline already has: by default its control
DB (SQLite or PostgreSQL), beside the control tables (Iceberg adds `iceberg_tables` and
`iceberg_namespace_properties`); its warehouse is `output.path`, a local folder or an s3a:// URI.
In Spark it is the catalog `eos_<pipeline>`, registered in the running session on first use (its
settings are session SQL settings, so no secret is on a spark-submit command line). The same name
is the JDBC catalog's `catalog_name`, which is how pyiceberg's SqlCatalog finds the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from eos_ingest.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eos_ingest.config.pipeline import PipelineConfig

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
# How long a JDBC connection waits for the SQLite control DB's write lock (the control store's
# own busy_timeout is the same 30 s, control/engine.py).
SQLITE_BUSY_TIMEOUT_MS = "30000"


@dataclass(frozen=True)
class IcebergCatalog:
    """name: the catalog's name in Spark and in the JDBC catalog's rows; uri: the SQLAlchemy URL of
    its database; warehouse: the folder or s3a:// URI under which its tables live."""

    name: str
    uri: str
    warehouse: str

    @classmethod
    def of(cls, config: PipelineConfig) -> IcebergCatalog:
        return cls(f"eos_{config.name}", config.iceberg_catalog_uri, str(config.output_path))

    def identifier(self, table: str) -> str:
        """Spark's name of `table` (namespace.table) in this catalog."""
        return f"{self.name}.{table}"

    def spark_conf(self) -> dict[str, str]:
        """The session settings that register the catalog in Spark."""
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {
            prefix: SPARK_CATALOG,
            f"{prefix}.type": "jdbc",
            f"{prefix}.warehouse": self.warehouse,
            # Every read loads the table's current metadata: a publish checks main as it is now,
            # not as this session's cache last saw it (another process may have moved it).
            f"{prefix}.cache-enabled": "false",
        }
        conf.update({f"{prefix}.{k}": v for k, v in jdbc_settings(self.uri).items()})
        return conf

    def ensure(self, spark: SparkSession) -> None:
        """Register the catalog in `spark` (a no-op when it is registered as it should be). A
        catalog Spark loaded under this name with other settings (a test's earlier pipeline of
        the same name) is dropped from Spark's catalog manager, which loads it anew."""
        wanted = self.spark_conf()
        current = {key: spark.conf.get(key, None) for key in wanted}
        if current == wanted:
            return
        loaded = current[f"spark.sql.catalog.{self.name}"] is not None
        for key, value in wanted.items():
            spark.conf.set(key, value)
        if loaded:
            spark._jsparkSession.sessionState().catalogManager().reset()

    def java_table(self, spark: SparkSession, table: str) -> Any:
        """The org.apache.iceberg.Table of `table`, loaded now (its current metadata)."""
        self.ensure(spark)
        jvm = spark._jvm
        assert jvm is not None
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, self.identifier(table)
        )

    def pyiceberg(self) -> Any:
        """The same catalog as pyiceberg's SqlCatalog (no JVM): for reads without Spark."""
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(self.name, uri=self.uri, warehouse=_pyiceberg_warehouse(self.warehouse))


def jdbc_settings(uri: str) -> dict[str, str]:
    """The JDBC catalog's `uri` and `jdbc.*` settings for the database at SQLAlchemy URL `uri`."""
    url = make_url(uri)
    backend = url.get_backend_name()
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise ConfigError(
                f"the Iceberg JDBC catalog needs a database file, not {uri!r}: set control_db_url "
                "(or output.catalog.uri) to sqlite:///<file> or postgresql+psycopg://user@host/db"
            )
        return {"uri": f"jdbc:sqlite:{url.database}", "jdbc.busy_timeout": SQLITE_BUSY_TIMEOUT_MS}
    if backend != "postgresql":
        raise ConfigError(
            f"the Iceberg JDBC catalog runs on SQLite or PostgreSQL, not {backend}; set control_db_url "
            "(or output.catalog.uri) to sqlite:///<file> or postgresql+psycopg://user@host/db"
        )
    host = url.host or "localhost"
    host = f"[{host}]" if ":" in host else host
    jdbc = f"jdbc:postgresql://{host}{f':{url.port}' if url.port else ''}/{url.database or ''}"
    params = {k: v for k, v in url.query.items() if isinstance(v, str)}
    if "sslmode" in params:  # the one libpq option most URLs carry; pgjdbc spells it the same
        jdbc += f"?sslmode={params['sslmode']}"
    settings = {"uri": jdbc}
    if url.username:
        settings["jdbc.user"] = url.username
    if url.password:
        settings["jdbc.password"] = str(url.password)
    return settings


def _pyiceberg_warehouse(warehouse: str) -> str:
    """pyiceberg's spelling of the warehouse: a local folder as file://, s3a:// as s3://."""
    if warehouse.startswith("s3a://"):
        return "s3://" + warehouse.removeprefix("s3a://")
    return warehouse if "://" in warehouse else f"file://{warehouse}"
