"""The Iceberg catalog of an `output.format: iceberg` pipeline, as Spark and pyiceberg reach it.

`jdbc` (the default): Iceberg's JDBC catalog in a database the pipeline already has, by default its
control DB (SQLite or PostgreSQL), beside the control tables (Iceberg adds `iceberg_tables` and
`iceberg_namespace_properties`); its warehouse is `output.path`, a local folder or an s3a:// URI
(read and written through hadoop-aws, with the pipeline's S3 access: object_stores.py). The
catalog's name is the JDBC catalog's `catalog_name`, which is how pyiceberg's SqlCatalog finds
the same tables.

`rest`: a REST catalog server at `output.catalog.uri`, which places the tables and commits their
metadata; the credentials come from the Airflow connection `output.catalog.conn_id`
(rest_auth.py). pyiceberg's RestCatalog reads the same server with the same properties.

In Spark it is the catalog `eos_<pipeline>`, registered in the running session on first use (its
settings are session SQL settings, so no secret is on a spark-submit command line).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from eos_ingest.config.table_location import is_object_store
from eos_ingest.errors import ConfigError
from eos_ingest.extras import needs_extra
from eos_ingest.jvm import java_session, jvm_of
from eos_ingest.storage.iceberg.rest_auth import SECRET_PROPERTIES, properties_from_env
from eos_ingest.storage.object_stores import S3Access
from eos_ingest.storage.table_names import catalog_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eos_ingest.config.pipeline import PipelineConfig

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
# How long a JDBC connection waits for the SQLite control DB's write lock (the control store's
# own busy_timeout is the same 30 s, control/engine.py).
SQLITE_BUSY_TIMEOUT_MS = "30000"
# PostgreSQL's SQL states of a server that ended or refused the session while it restarts
# (admin_shutdown, crash_shutdown, cannot_connect_now). Iceberg's JDBC catalog reconnects and runs
# a statement once more only on the states it knows (08000, 08003, 08006, 08007, 40001), so a
# pooled connection that a restart ended failed the publish: with these, a restart is a reconnect
# (tests/integration/batch/test_postgres_restart.py).
POSTGRES_RESTART_STATES = "57P01,57P02,57P03"


@dataclass(frozen=True)
class IcebergCatalog:
    """name: the catalog's name in Spark (and in the JDBC catalog's rows); uri: the SQLAlchemy URL of
    a jdbc catalog's database, or a rest catalog's http(s) URL; warehouse: the folder or s3a:// URI
    under which a jdbc catalog's tables live, or the warehouse a rest server is asked for (None: its
    default); auth: a rest catalog's credential/token/scope/oauth2-server-uri (never shown)."""

    name: str
    uri: str
    warehouse: str | None
    type: str = "jdbc"
    auth: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, config: PipelineConfig, environ: Mapping[str, str] | None = None) -> IcebergCatalog:
        """The pipeline's catalog; a rest catalog's credentials from its connection as `environ`
        (default: this process's) holds it."""
        catalog = config.output.catalog
        if catalog.type == "rest":
            auth = properties_from_env(catalog.conn_id, os.environ if environ is None else environ)
            uri = config.iceberg_catalog_uri
            return cls(catalog_name(config), uri, catalog.warehouse, "rest", tuple(sorted(auth.items())))
        return cls(catalog_name(config), config.iceberg_catalog_uri, str(config.output_path))

    def properties(self) -> dict[str, str]:
        """The catalog's Iceberg properties (Spark's catalog settings less its prefix; pyiceberg's)."""
        if self.type == "rest":
            found = {"uri": self.uri, **dict(self.auth)}
            if "credential" in found and "oauth2-server-uri" not in found:
                # The server's own token endpoint, named: Iceberg's client warns that its implicit
                # fallback to it will go (apache/iceberg#10537); pyiceberg's default is the same.
                found["oauth2-server-uri"] = f"{self.uri}/v1/oauth/tokens"
            if self.warehouse:
                found["warehouse"] = self.warehouse
            return found
        assert self.warehouse is not None
        found = {"warehouse": self.warehouse, **jdbc_settings(self.uri)}
        if is_object_store(self.warehouse):
            # Hadoop's FileIO over hadoop-aws (the JDBC catalog's default, named here): the s3a jars
            # and the session's fs.s3a.* access (object_stores.configure_session) already serve Delta's
            # s3a tables. Iceberg's S3FileIO would add iceberg-aws and a second S3 client to the jobs.
            found["io-impl"] = HADOOP_FILE_IO
        return found

    def identifier(self, table: str) -> str:
        """Spark's name of `table` (namespace.table) in this catalog."""
        return f"{self.name}.{table}"

    def spark_conf(self) -> dict[str, str]:
        """The session settings that register the catalog in Spark."""
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {
            prefix: SPARK_CATALOG,
            f"{prefix}.type": self.type,
            # Every read loads the table's current metadata: a publish checks main as it is now,
            # not as this session's cache last saw it (another process may have moved it).
            f"{prefix}.cache-enabled": "false",
        }
        conf.update({f"{prefix}.{k}": v for k, v in self.properties().items()})
        if any(key in SECRET_PROPERTIES for key, _ in self.auth):
            conf[f"{prefix}.rest.auth.type"] = "oauth2"  # what Iceberg infers, with a warning
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
        manager = java_session(spark).sessionState().catalogManager()
        if loaded:
            manager.reset()
        if self.type == "rest":
            # Loading it now signs in (a token for the client credentials, the server's config):
            # a refused credential is named here, not deep inside the batch's first statement.
            try:
                manager.catalog(self.name)
            except Exception as exc:
                self._refused(exc)
                raise

    def java_table(self, spark: SparkSession, table: str) -> Any:
        """The org.apache.iceberg.Table of `table`, loaded now (its current metadata)."""
        self.ensure(spark)
        return jvm_of(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            java_session(spark), self.identifier(table)
        )

    def pyiceberg(self) -> Any:
        """The same catalog in pyiceberg (no JVM), for reads without Spark: a SqlCatalog on the
        jdbc catalog's database, a RestCatalog on the rest server with the same credentials."""
        if self.type == "rest":
            with needs_extra("iceberg", "reading an Iceberg table without Spark (verify, the audit)"):
                from pyiceberg.catalog.rest import RestCatalog  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read

            try:
                return RestCatalog(self.name, **self.properties())
            except Exception as exc:
                self._refused(exc)
                raise
        with needs_extra("iceberg", "reading an Iceberg table without Spark (verify, the audit)"):
            from pyiceberg.catalog.sql import SqlCatalog  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read
        assert self.warehouse is not None
        found = {"uri": self.uri, "warehouse": _pyiceberg_warehouse(self.warehouse)}
        if is_object_store(self.warehouse):  # pyarrow's S3 client, with the same AWS_* access
            found.update(pyiceberg_s3(S3Access.from_env()))
        return SqlCatalog(self.name, **found)

    def pyiceberg_at(self, table: str, metadata_location: str) -> Any:
        """pyiceberg's `table` (namespace.table) as of the metadata file `metadata_location` (one a
        Spark statement just committed), for the gate's read of a staged branch. A jdbc catalog's:
        the file itself (StaticTable, no catalog query), on a local disk or on an s3a warehouse
        with the pipeline's S3 access. A rest catalog's: loaded from the server (where it places
        the files and the access to them, vended credentials too, are the server's to say), which
        holds that metadata or a newer one."""
        if self.type == "rest":
            return self.pyiceberg().load_table(table)
        with needs_extra("iceberg", "reading an Iceberg table without Spark (the gate)"):
            from pyiceberg.table import StaticTable  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read
        found = pyiceberg_s3(S3Access.from_env()) if is_object_store(metadata_location) else {}
        return StaticTable.from_metadata(metadata_location, properties=found)

    def _refused(self, exc: BaseException) -> None:
        """A ConfigError naming output.catalog and the fix when `exc` is the server refusing the
        credentials (Iceberg's NotAuthorizedException or ForbiddenException, pyiceberg's OAuthError,
        UnauthorizedError or ForbiddenError); returns otherwise."""
        java = getattr(exc, "java_exception", None)
        text = str(java.toString()) if java is not None else f"{type(exc).__name__}: {exc}"
        if not any(k in text for k in ("NotAuthorized", "Forbidden", "OAuthError", "Unauthorized")):
            return
        for key, value in self.auth:  # the server's message could echo what it was sent
            if key in SECRET_PROPERTIES:
                text = text.replace(value, "***")
        raise ConfigError(
            f"the Iceberg REST catalog at {self.uri} (output.catalog) refused this pipeline's sign-in "
            f"({text.splitlines()[0][:300]}); fix the Airflow connection named by output.catalog.conn_id: "
            "its login and password are the OAuth2 client id and secret, or its password alone a bearer "
            "token (extra scope and oauth2-server-uri where the server needs them)"
        ) from None


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
    settings = {"uri": jdbc, "retryable_status_codes": POSTGRES_RESTART_STATES}
    if url.username:
        settings["jdbc.user"] = url.username
    if url.password:
        settings["jdbc.password"] = str(url.password)
    return settings


def pyiceberg_s3(access: S3Access) -> dict[str, str]:
    """pyiceberg's FileIO properties of an S3 API store (path-style requests, as hadoop-aws's)."""
    found = access.named(
        "s3.endpoint", "s3.region", "s3.access-key-id", "s3.secret-access-key", "s3.session-token"
    )
    found["s3.force-virtual-addressing"] = "false"
    return found


def _pyiceberg_warehouse(warehouse: str) -> str:
    """pyiceberg's spelling of the warehouse: a local folder as file://, s3a:// as s3://."""
    if warehouse.startswith("s3a://"):
        return "s3://" + warehouse.removeprefix("s3a://")
    return warehouse if "://" in warehouse else f"file://{warehouse}"
