"""The one door to Py4J: the Java objects behind a classic Spark session, reached through pyspark's
private attributes (`_jvm`, `_jsparkSession`, `_jsc`, `_jdf`), and the Python wrappers built
around a Java frame or column. No other module of the package touches those attributes
(tests/unit/test_jvm.py checks it), so a pyspark upgrade that moves them breaks here only.

Why a door at all: pyspark's public API has no handle on what these callers need, and each has a
figure or a failure behind it:

- Delta's write command with its commit held back until the gate (storage/delta/staged_write.py: one
  Spark job for the read, the parse and the table's files instead of two; its docstring has the
  figure). Exit: a Delta API that writes a replace's files and commits them later (none in
  delta-spark's Python or Scala API; Delta Kernel's Transaction has it, for other engines).
- Iceberg's Java API: a branch's snapshots and its fast-forward (storage/iceberg/branch.py,
  iceberg_format.py), the catalog's table objects (iceberg_catalog.py), schema updates
  (iceberg_schema.py) and SparkActions (iceberg_maintenance.py). Exit: Iceberg's SQL procedures
  and DDL where one says the same (`CALL ... fast_forward`, `ALTER TABLE`), which parse a string
  per call and do not return the Java objects the callers read.
- The Hadoop configuration of the running session (storage/object_stores.py). Exit: the
  spark.hadoop.* settings at the session's start, for a value known then.
- Avro's reader/writer compatibility check (formats/avro_decode.py) and a literal map column
  (formats/from_avro.py, which says why). Exit: pyspark's from_avro, once Spark evaluates its
  options once; no Python API checks Avro compatibility with Java Avro's rules.
- Spark's JSON schema inference over a frame's strings (formats/schema_evolution.py): the JVM's
  DataFrameReader.json(Dataset[String]). Exit: pyspark's read.json, which takes an RDD of strings
  only, so it starts Python workers and ships every value through them.
- The session made the active one of a new thread (batch/quarantine_replace.py). Exit: none in
  pyspark; Delta falls back to the active session when it loads a snapshot there.

Gate: written against and tested on pyspark KNOWN_SERIES (4.1, pyproject's pin; the lock's
4.1.3). On another pyspark the door still opens, since there is no other way to these objects,
and says once in the log that it is untested there. A Spark Connect session has no JVM in this
process: the door says so, where Py4J would fail with an AttributeError on None.

Here, not in spark/: spark/ sits above storage/ and formats/ in the package's layers (its session
builder reads storage's settings), and both call the door; this module imports only `versions`
of the package, and pyspark only when a door is opened (DAG parsing and the audit never import it).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from eos_ingest.versions import installed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

# The pyspark minor series whose private attributes this door was written against and tested on.
KNOWN_SERIES = (4, 1)


def pyspark_version() -> tuple[int, ...]:
    """The installed pyspark's release (pyspark-client ships the same files under its own name)."""
    return installed("pyspark", "pyspark-client")


def is_known(version: tuple[int, ...]) -> bool:
    """Whether the door was tested on pyspark `version`."""
    return version[:2] == KNOWN_SERIES


@functools.cache
def _checked() -> None:
    """Says once per process when the installed pyspark is outside the tested series."""
    version = pyspark_version()
    if not is_known(version):
        log.warning(
            "pyspark %s: eos_ingest.jvm reaches the JVM through pyspark's private attributes, "
            "tested on pyspark %s.x only",
            ".".join(map(str, version)) or "(not found)",
            ".".join(map(str, KNOWN_SERIES)),
        )


def _classic(owner: Any, attribute: str) -> Any:
    _checked()
    value = getattr(owner, attribute, None)
    if value is None:
        raise RuntimeError(
            f"{type(owner).__name__} has no {attribute}: eos-ingest needs a classic Spark session "
            "with its JVM in this process, not a Spark Connect one"
        )
    return value


def jvm_of(spark: SparkSession | None = None) -> Any:
    """The gateway's view of the JVM (Java classes by their full names) of `spark`, by default the
    active session."""
    if spark is None:
        from pyspark.sql import SparkSession  # noqa: PLC0415 pyspark only once a door opens (a JVM-free process imports this module)

        spark = SparkSession.active()
    return _classic(spark, "_jvm")


def java_session(spark: SparkSession) -> Any:
    """The JVM's SparkSession (org.apache.spark.sql.classic.SparkSession) behind `spark`."""
    return _classic(spark, "_jsparkSession")


def java_context(spark: SparkSession) -> Any:
    """The JVM's JavaSparkContext behind `spark`'s SparkContext."""
    return _classic(spark.sparkContext, "_jsc")


def java_frame(frame: DataFrame) -> Any:
    """The JVM's Dataset[Row] behind `frame`."""
    return _classic(frame, "_jdf")


def python_frame(java: Any, spark: SparkSession) -> DataFrame:
    """A pyspark DataFrame over the JVM's Dataset[Row] `java`."""
    from pyspark.sql import DataFrame  # noqa: PLC0415 pyspark only once a door opens (a JVM-free process imports this module)

    _checked()
    return DataFrame(java, spark)


def python_column(java: Any) -> Column:
    """A pyspark Column over the JVM's Column `java`."""
    from pyspark.sql import Column  # noqa: PLC0415 pyspark only once a door opens (a JVM-free process imports this module)

    _checked()
    return Column(java)
