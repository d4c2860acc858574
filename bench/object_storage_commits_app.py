"""A Spark application for bench/object_storage.py: the cost of Delta's log commit on an s3a table.

    spark-submit ... bench/object_storage_commits_app.py <table> <commits>

Creates the table, then per commit writes one small Parquet file under it (untimed) and times only
Delta's commit of its AddFile (OptimisticTransaction.commit: the log store of
spark.delta.logStore.s3a.impl writes `_delta_log/<N>.json`). Prints one JSON line: the commit
times in milliseconds. The S3 access comes from the AWS_* variables; the control DB URL (for the
coordinator) from EOS_BENCH_CONTROL_DB_URL.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    from pyspark.sql import SparkSession

    from eos_ingest.storage.object_stores import S3Access, coordinator_conf

    table, commits = sys.argv[1], int(sys.argv[2])
    spark = SparkSession.builder.getOrCreate()
    jvm = spark._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {**S3Access.from_env().hadoop_conf(),
                       **coordinator_conf(os.environ["EOS_BENCH_CONTROL_DB_URL"])}.items():  # fmt: skip
        hadoop.set(key, value)
    schema = "n INT"
    spark.createDataFrame([], schema).write.format("delta").mode("append").save(table)
    delta = jvm.org.apache.spark.sql.delta.DeltaLog
    operation = jvm.org.apache.spark.util.Utils.classForName(
        "org.apache.spark.sql.delta.DeltaOperations$ManualUpdate$", True, False
    )
    manual_update = operation.getField("MODULE$").get(None)
    fs_path = jvm.org.apache.hadoop.fs.Path
    fs = fs_path(table).getFileSystem(hadoop)
    times_ms = []
    for i in range(commits):
        staging = f"staging/{i}"
        spark.createDataFrame([(i,)], schema).coalesce(1).write.parquet(f"{table}/{staging}")
        part = next(
            s
            for s in fs.listStatus(fs_path(f"{table}/{staging}"))
            if s.getPath().getName().endswith(".parquet")
        )
        add = {"add": {"path": f"{staging}/{part.getPath().getName()}", "partitionValues": {}, "size": part.getLen(),
                       "modificationTime": part.getModificationTime(), "dataChange": True}}  # fmt: skip
        actions = jvm.java.util.ArrayList()
        actions.add(jvm.org.apache.spark.sql.delta.actions.Action.fromJson(json.dumps(add)))
        seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toList()
        txn = delta.forTable(spark._jsparkSession, table).startTransaction()
        started = time.perf_counter()
        txn.commit(seq, manual_update)
        times_ms.append(round((time.perf_counter() - started) * 1000, 1))
    print(json.dumps({"commit_ms": times_ms}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
