"""Spark wiring shared by the spark-submit job, the CLI and the tests: local jars and Delta settings.

Jobs use the jars that `make setup` fetched into the state folder, never `--packages`: an Ivy
resolution at every start is slow and needs the network at run time.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eos_ingest import paths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Settings every session needs, on any master. Delta's snapshot partitions default to 50, far
# too many for the small control-plane reads of a batch job.
DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
}

# Local-mode niceties: no UI port to collide on, no progress bars in logs.
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
}


def local_jars(jars_dir: Path | None = None) -> list[str]:
    """The connector jars to put on Spark's classpath; fails clearly when setup has not run."""
    folder = jars_dir or paths.spark_jars_dir()
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars) or not any("delta-spark" in j for j in jars):
        raise FileNotFoundError(
            f"Spark connector jars (spark-sql-kafka, delta-spark) are missing from {folder}: run 'make setup'"
        )
    return jars


def session_conf(master: str | None = None) -> dict[str, str]:
    """Every Spark setting a job needs; local settings are added for local masters."""
    conf = {"spark.jars": ",".join(local_jars()), **DELTA_CONF}
    if master is None or master.startswith("local"):
        conf.update(LOCAL_CONF)
    return conf


def build_session(
    app_name: str, master: str = "local[*]", extra: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession with Kafka and Delta on the classpath (used outside spark-submit)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**session_conf(master), **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
