"""What the two s3a Spark applications of bench/object_storage.py share: a session whose Hadoop
configuration reaches the object store (and the coordinator, when a control DB URL is given), and
one row written as a Parquet file under the table, ready to be committed as an AddFile by Delta's
own commit path (`DeltaLog.forTable(...).startTransaction().commit(actions, ManualUpdate)`).

Imported by its siblings as a plain module: spark-submit puts the application's folder first on
sys.path.
"""

from __future__ import annotations

import json
from typing import Any


def s3a_session(control_db_url: str) -> Any:
    """The running SparkSession, with the S3 access of the AWS_* variables and the coordinator of
    `control_db_url` set in its Hadoop configuration, as the eos-ingest job sets them."""
    from pyspark.sql import SparkSession

    from eos_ingest.storage.object_stores import S3Access, coordinator_conf

    spark = SparkSession.builder.getOrCreate()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {**S3Access.from_env().hadoop_conf(), **coordinator_conf(control_db_url)}.items():
        hadoop.set(key, value)
    return spark


def manual_update(spark: Any) -> Any:
    """Delta's ManualUpdate operation, the one a commit of hand-made actions names."""
    # Spark's class loader holds the --jars classes (Class.forName would use the JVM's own).
    operation = spark._jvm.org.apache.spark.util.Utils.classForName(
        "org.apache.spark.sql.delta.DeltaOperations$ManualUpdate$", True, False
    )
    return operation.getField("MODULE$").get(None)


def stage_row(spark: Any, table: str, staging: str, row: tuple, schema: str) -> Any:
    """Writes `row` as one Parquet file under `<table>/<staging>` and returns the Scala list of
    actions (one AddFile of that file) that a Delta commit takes."""
    jvm = spark._jvm
    spark.createDataFrame([row], schema).coalesce(1).write.parquet(f"{table}/{staging}")
    fs_path = jvm.org.apache.hadoop.fs.Path
    fs = fs_path(table).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    part = next(
        s for s in fs.listStatus(fs_path(f"{table}/{staging}")) if s.getPath().getName().endswith(".parquet")
    )
    add = {"add": {"path": f"{staging}/{part.getPath().getName()}", "partitionValues": {}, "size": part.getLen(),
                   "modificationTime": part.getModificationTime(), "dataChange": True}}  # fmt: skip
    actions = jvm.java.util.ArrayList()
    actions.add(jvm.org.apache.spark.sql.delta.actions.Action.fromJson(json.dumps(add)))
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toList()


def start_transaction(spark: Any, table: str) -> Any:
    """A new optimistic transaction on the Delta table at `table`."""
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, table
    ).startTransaction()
