"""Tables on an S3 API store (``s3a://bucket/prefix``): where the access comes from, and how Spark,
Delta's commit coordinator and delta-rs get it.

Access: the standard AWS variables every AWS tool reads (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION), in the environment of the process that
reads or writes the table. Never in the pipeline file.

Spark: hadoop-aws's ``fs.s3a.*`` settings, set in the running session's Hadoop configuration by
the job itself (``configure_session``), so no secret is on a spark-submit command line; Spark ships
that configuration to its executors with every write. Path-style access, and plain HTTP when the
endpoint is ``http://`` (a local server).

Commits: Delta's default log store for s3a is safe only within one driver (two applications can
both write version N, and one commit silently vanishes). Every s3a table's commits therefore go
through the control DB: ``eos.ingest.delta.JdbcLogStore`` (jvm/delta-jdbc-logstore), whose
put-if-absent of a commit entry (``INSERT ... ON CONFLICT DO NOTHING``) is the commit. It needs a
control DB every writer shares: PostgreSQL (config refuses SQLite with an s3a table).

delta-rs (the audit, the writer's version lookup) reads with ``storage_options``: the same access.
The location itself (TableLocation, the check of an s3a:// URI) is the config's: config/table_location.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from eos_ingest.config.table_location import S3A, TableLocation, is_object_store
from eos_ingest.errors import ConfigError
from eos_ingest.jvm import java_context

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

    from eos_ingest.config.pipeline import PipelineConfig

# Delta's log store for s3a paths, set at session start (Delta reads it from the SparkConf).
LOG_STORE_CLASS = "eos.ingest.delta.JdbcLogStore"
LOG_STORE_CONF = {"spark.delta.logStore.s3a.impl": LOG_STORE_CLASS}
_JDBC = "eos.delta.jdbc."  # the log store's settings (JdbcLogStore.PREFIX)


def table_uri(location: TableLocation) -> str:
    """A URI for the table: s3a://... as it is, a local folder as file://..."""
    return location if isinstance(location, str) else location.as_uri()


@dataclass(frozen=True)
class S3Access:
    """Endpoint, region and credentials of an S3 API store (secret fields never shown)."""

    endpoint: str | None
    region: str | None
    access_key: str | None
    secret_key: str | None
    session_token: str | None = None

    def __repr__(self) -> str:  # a repr in a log or traceback must not carry the secret
        return f"S3Access(endpoint={self.endpoint!r}, region={self.region!r}, access_key=***)"

    def named(
        self, endpoint: str, region: str, access_key: str, secret_key: str, session_token: str
    ) -> dict[str, str]:
        """The access under one client's property names (delta-rs's, pyiceberg's): the fields
        that have a value, the region us-east-1 unless set."""
        return {
            name: value
            for name, value in (
                (endpoint, self.endpoint),
                (region, self.region or "us-east-1"),
                (access_key, self.access_key),
                (secret_key, self.secret_key),
                (session_token, self.session_token),
            )
            if value
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> S3Access:
        env = os.environ if environ is None else environ

        def get(*names: str) -> str | None:
            return next((env[n] for n in names if env.get(n)), None)

        return cls(
            endpoint=get("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
            region=get("AWS_REGION", "AWS_DEFAULT_REGION"),
            access_key=get("AWS_ACCESS_KEY_ID"),
            secret_key=get("AWS_SECRET_ACCESS_KEY"),
            session_token=get("AWS_SESSION_TOKEN"),
        )

    def hadoop_conf(self) -> dict[str, str]:
        """hadoop-aws settings. Without keys, hadoop-aws's own chain (instance roles etc.) applies."""
        conf = {"fs.s3a.path.style.access": "true"}
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
            conf["fs.s3a.connection.ssl.enabled"] = str(self.endpoint.startswith("https://")).lower()
        if self.region:
            conf["fs.s3a.endpoint.region"] = self.region
        if self.access_key and self.secret_key:
            conf["fs.s3a.access.key"] = self.access_key
            conf["fs.s3a.secret.key"] = self.secret_key
            if self.session_token:
                conf["fs.s3a.session.token"] = self.session_token
                conf["fs.s3a.aws.credentials.provider"] = (
                    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
                )
        return conf

    def storage_options(self) -> dict[str, str]:
        """delta-rs (object_store) options: the same store, read only (no locking option needed)."""
        options = self.named(
            "AWS_ENDPOINT_URL",
            "AWS_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        )
        if self.endpoint and self.endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
        if self.endpoint:
            options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        return options


def delta_rs_uri(location: TableLocation) -> str:
    """The location as delta-rs opens it (object_store spells the scheme s3://)."""
    if isinstance(location, str) and is_object_store(location):
        return "s3://" + location.removeprefix(S3A)
    return str(location)


def storage_options(location: TableLocation) -> dict[str, str] | None:
    """delta-rs storage_options for the table at `location`: None for a local table."""
    return S3Access.from_env().storage_options() if is_object_store(location) else None


def delta_rs_table(location: TableLocation) -> DeltaTable | None:
    """The Delta table at `location` opened with delta-rs (with the store's access), or None."""
    from deltalake import DeltaTable  # noqa: PLC0415 delta-rs only where a Delta table is opened: the Spark job and Iceberg pipelines load this module without it

    uri, options = delta_rs_uri(location), storage_options(location)
    if not DeltaTable.is_deltatable(uri, storage_options=options):
        return None
    return DeltaTable(uri, storage_options=options)


# The commit coordinator's table in the control DB (JdbcLogStore's default, eos.delta.jdbc.table).
COORDINATOR_TABLE = "eos_delta_commits"


def coordinator_conf(control_db_url: str) -> dict[str, str]:
    """The JDBC settings of the commit coordinator, from the pipeline's SQLAlchemy URL."""
    url = make_url(control_db_url)
    if url.get_backend_name() != "postgresql":
        raise ConfigError(
            f"the Delta commit coordinator of s3a tables needs a PostgreSQL control DB, not "
            f"{url.get_backend_name()}; set control_db_url: postgresql+psycopg://user@host/db"
        )
    host = url.host or "localhost"
    host = f"[{host}]" if ":" in host else host
    jdbc = f"jdbc:postgresql://{host}{f':{url.port}' if url.port else ''}/{url.database or ''}"
    params = {k: v for k, v in url.query.items() if isinstance(v, str)}
    if "sslmode" in params:  # the one libpq option most URLs carry; pgjdbc spells it the same
        jdbc += f"?sslmode={params['sslmode']}"
    conf = {f"{_JDBC}url": jdbc}
    if url.username:
        conf[f"{_JDBC}user"] = url.username
    if url.password:
        conf[f"{_JDBC}password"] = str(url.password)
    return conf


def uses_object_store(config: PipelineConfig) -> bool:
    locations = (config.output.path, config.output.quarantine_path)  # Iceberg: the warehouse only
    return any(is_object_store(location) for location in locations if location is not None)


def session_hadoop_conf(config: PipelineConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every Hadoop setting a Spark session needs for the pipeline's s3a tables ({} if local)."""
    if not uses_object_store(config):
        return {}
    return {**S3Access.from_env(environ).hadoop_conf(), **coordinator_conf(config.control_db_url)}


def configure_session(spark: SparkSession, config: PipelineConfig) -> None:
    """Sets the pipeline's s3a and coordinator settings in a running session's Hadoop
    configuration, before the session first touches a table (hadoop-aws caches one file system
    per bucket with the settings it was created with). A session started without the s3a jars
    and LOG_STORE_CONF fails here, naming the fix, rather than committing unsafely."""
    settings = session_hadoop_conf(config)
    if not settings:
        return
    impl = spark.sparkContext.getConf().get(next(iter(LOG_STORE_CONF)), None)
    if impl != LOG_STORE_CLASS:
        raise ConfigError(
            f"pipeline {config.name}: its tables are on s3a, but this Spark session was started "
            f"without {next(iter(LOG_STORE_CONF))}={LOG_STORE_CLASS} (found {impl!r}); start it "
            "through eos-ingest (spark_session.session_conf / submit.job_conf with object_storage=True)"
        )
    hadoop = java_context(spark).hadoopConfiguration()
    for key, value in settings.items():
        hadoop.set(key, value)
