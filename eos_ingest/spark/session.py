"""Spark wiring shared by the spark-submit job, the CLI and the tests: local jars, Delta settings,
and the spark-submit launcher with its environment.

Jobs use the jars that `make setup` fetched into the state folder, never `--packages`: an Ivy
resolution at every start is slow and needs the network at run time.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eos_ingest import paths
from eos_ingest.errors import ConfigError
from eos_ingest.storage.object_stores import LOG_STORE_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Settings every session needs, on any master. Delta's snapshot partitions default to 50, far
# too many for the small control-plane reads of a batch job. DataFrame debugging (on by default)
# records each PySpark call's Python call site in the JVM for error messages: ~14 Py4J round trips
# per call instead of one: 2,009 -> 519 to build one batch's parse (~0.2 s less of a busy driver's
# batch); the job's errors are its own (errors.py), so the call sites are not needed.
DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Spark's default pattern of settings whose values it hides (UI, event log) and an Iceberg REST
    # catalog's OAuth2 `credential` (client id:secret), which the default misses.
    "spark.redaction.regex": "(?i)secret|password|token|access[.]?key|credential",
}

# Local-mode niceties: no UI port to collide on, no progress bars in logs.
LOCAL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # VACUUM lists a table's folders in a Spark job of this many tasks (Spark's default 10,000,
    # sized for clusters): on 2 cores those empty tasks were nearly all of a VACUUM's time. A table
    # of 30 date partitions, VACUUM retention 0: 30.6-34.7 s -> 2.0-4.1 s (2 runs each, local[2]);
    # `maintain` vacuums the table and its quarantine.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
}

# The driver JVM's options of a local job, a named profile (submit.job_conf; the class-data archive
# is made with them too). "two-core", the default, is tuned for a machine of 2 cores. The parallel
# collector: a batch job wants throughput, not short pauses, and G1's
# concurrent threads take the cores the tasks run on. A 950,000-record batch 23.2 -> 21.1 s
# (medians of 3, alternated, 2 cores); a 10,000-record one 14.8 -> 13.8 s.
# C2 compiles a method later (4x HotSpot's thresholds): a job runs much code (planning, Delta's
# commits, per-batch projections) warm but not hot, and C2 compiling it took a core of the two
# through a backlog. The tasks' loops still reach C2 within their first records. A 950,000-record
# batch 21.1 -> 19.0 s (medians of 3, alternated); a catch-up of 4.75M in 5 batches 57.2 -> 54.6 s
# (medians of 5 and 7), the job JVM's CPU 95-100 -> 88-90 s; a 10,000-record batch 13.1 -> 12.6 s.
_LATER_C2 = (
    "-XX:Tier4InvocationThreshold=20000 -XX:Tier4MinInvocationThreshold=2400 "
    "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=160000"
)
# "small-batches": C1 only. A job of a few hundred thousand records ends before C2's compiles pay
# back. `eos-ingest run`, first batch of a pipeline on 2 partitions, class archive on, quiet 2-core
# machine, wall seconds two-core -> small-batches (runs alternated): 40 records 19.2 -> 15.2 (and
# 29.1 -> 21.0 s of CPU; medians of 3); 10,000 records 17.3 -> 14.7; 50,000 20.1 -> 16.7; 200,000
# 21.7 -> 18.2; 600,000 23.8 -> 23.8; 1,000,000 26.2 -> 28.4 (means of 2): past that, the tasks'
# loops stay in C1's slower code.
DRIVER_JVM_PROFILES: dict[str, str] = {
    "two-core": f"-XX:+UseParallelGC {_LATER_C2}",
    "small-batches": "-XX:+UseParallelGC -XX:TieredStopAtLevel=1",
    "none": "",
}
# Without a profile named in the environment, a job that will read at most this many records gets
# "small-batches", any other job (or one whose size is not known when it is submitted) "two-core".
SMALL_BATCH_RECORDS = 200_000
# The submitting process's environment picks the profile; EOS_DRIVER_JAVA_OPTIONS, when set, is
# used instead of any profile (empty: none). Not a pipeline key: a machine's, not a pipeline's.
DRIVER_JVM_PROFILE_ENV = "EOS_DRIVER_JVM_PROFILE"
DRIVER_JAVA_OPTIONS_ENV = "EOS_DRIVER_JAVA_OPTIONS"


def driver_jvm_profile(environ: Mapping[str, str] = os.environ, *, job_records: int | None = None) -> str:
    """The name of the local driver's profile: EOS_DRIVER_JVM_PROFILE if set, else by the job's
    size (job_records, None when unknown); an unknown name raises ConfigError."""
    name = environ.get(DRIVER_JVM_PROFILE_ENV, "").strip()
    if not name:
        small = job_records is not None and job_records <= SMALL_BATCH_RECORDS
        return "small-batches" if small else "two-core"
    if name not in DRIVER_JVM_PROFILES:
        raise ConfigError(
            f"{DRIVER_JVM_PROFILE_ENV}={name!r} is not a driver JVM profile; use one of "
            f"{', '.join(sorted(DRIVER_JVM_PROFILES))}, or set {DRIVER_JAVA_OPTIONS_ENV} to the options"
        )
    return name


def local_driver_java_options(
    environ: Mapping[str, str] = os.environ, *, job_records: int | None = None
) -> str:
    """The driver JVM's options of a local job: EOS_DRIVER_JAVA_OPTIONS if set, else the options of
    driver_jvm_profile's profile."""
    if DRIVER_JAVA_OPTIONS_ENV in environ:
        return environ[DRIVER_JAVA_OPTIONS_ENV].strip()
    return DRIVER_JVM_PROFILES[driver_jvm_profile(environ, job_records=job_records)]


def local_jars(
    jars_dir: Path | None = None, *, object_storage: bool = False, iceberg: bool = False
) -> list[str]:
    """The connector jars to put on Spark's classpath; fails clearly when setup has not run.

    object_storage adds hadoop-aws, the AWS SDK and the Delta commit coordinator (s3a tables):
    only then, since the SDK alone is a jar of ~640 MB that every executor would fetch. iceberg
    adds Iceberg's Spark runtime and the JDBC drivers of its catalog (output.format iceberg)."""
    folder = jars_dir or paths.spark_jars_dir()
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars) or not any("delta-spark" in j for j in jars):
        raise FileNotFoundError(
            f"Spark connector jars (spark-sql-kafka, delta-spark) are missing from {folder}: run 'make setup'"
        )
    if object_storage:
        s3a = sorted(str(p) for p in paths.s3a_jars_dir().glob("*.jar"))
        if not any("hadoop-aws" in j for j in s3a) or not any("delta-jdbc-logstore" in j for j in s3a):
            raise FileNotFoundError(
                f"the s3a jars (hadoop-aws, eos-delta-jdbc-logstore) are missing from "
                f"{paths.s3a_jars_dir()}: run 'make setup'"
            )
        jars += s3a
    if iceberg:
        found = sorted(str(p) for p in paths.iceberg_jars_dir().glob("*.jar"))
        if not any("iceberg-spark-runtime" in j for j in found):
            raise FileNotFoundError(
                f"Iceberg's Spark runtime (iceberg-spark-runtime) is missing from {paths.iceberg_jars_dir()}: "
                "run 'make setup'"
            )
        jars += found
    return jars


def session_conf(
    master: str | None = None, *, object_storage: bool = False, iceberg: bool = False
) -> dict[str, str]:
    """Every Spark setting a job needs; local settings are added for local masters, the s3a
    jars and Delta's commit coordinator for a pipeline with s3a tables (storage/object_stores.py),
    Iceberg's jars for an Iceberg pipeline (its catalog is registered by the table format itself,
    storage/iceberg/catalog.py)."""
    jars = local_jars(object_storage=object_storage, iceberg=iceberg)
    conf = {"spark.jars": ",".join(jars), **DELTA_CONF}
    if object_storage:
        conf.update(LOG_STORE_CONF)
    if master is None or master.startswith("local"):
        conf.update(LOCAL_CONF)
    return conf


def build_session(
    app_name: str,
    master: str = "local[*]",
    extra: dict[str, str] | None = None,
    *,
    object_storage: bool = False,
    iceberg: bool = False,
) -> SparkSession:
    """A SparkSession with Kafka and Delta (and Iceberg) on the classpath (used outside spark-submit)."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 out of DAG parsing and the CLI's JVM-free commands

    builder = SparkSession.builder.appName(app_name).master(master)
    conf = session_conf(master, object_storage=object_storage, iceberg=iceberg)
    for key, value in {**conf, **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def spark_submit_binary() -> str:
    """spark-submit of the running interpreter's pyspark (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if not found:
        raise FileNotFoundError("spark-submit not found: run 'make setup' or install pyspark")
    return found


def spark_submit_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for spark-submit: pip's pyspark as SPARK_HOME and this interpreter for Python.

    Without them the launcher script looks for pyspark with whatever python3 is on PATH.
    """
    import pyspark  # noqa: PLC0415 out of DAG parsing: only a launch needs it

    env = dict(os.environ if base is None else base)
    env.setdefault("SPARK_HOME", str(Path(pyspark.__file__).parent))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The job's driver may import the package from the --py-files zip, where no checkout is found:
    # it must use this side's state folder (GX results, Data Docs), not a per-user default.
    env.setdefault("EOS_STATE_DIR", str(paths.state_dir()))
    # The folder holding the eos_ingest this process imported (a checkout's root, or site-packages):
    # the job imports the same library, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(paths.PACKAGE_DIR.parent), env.get("PYTHONPATH", "")) if p
    )
    return env
