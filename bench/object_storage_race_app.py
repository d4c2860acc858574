"""A Spark application for bench/object_storage.py (`--race-rounds`) and
tests/integration/storage/test_s3a_commits.py: adds one row per round to an s3a Delta table, and
commits each round at the same instant as its twin application, so that their commits race.

    spark-submit ... object_storage_race_app.py <table> <writer> <rounds> <barrier_dir>

Each round writes its row as a Parquet file under the table (slow, and at its own pace), then
meets the other writer at a file barrier, and at an agreed instant starts a Delta transaction and
commits an AddFile of that file: Delta's own commit path (OptimisticTransaction.commit, the log
store of spark.delta.logStore.s3a.impl), without the seconds of jitter a whole DataFrame write has
on a busy machine. The S3 access comes from the AWS_* variables and the control DB URL from
EOS_RACE_CONTROL_DB_URL, set in the running session as the eos-ingest job does (object_storage).
Prints one line per round: `committed <writer> <round> version <v>`. When both writers got the same
version in a round (one commit overwrote the other), both stop at the next barrier and print
`collided <writer> <round> version <v>`: the race has shown its loss, no more rounds are needed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    from pyspark.sql import SparkSession

    from eos_ingest.storage.object_stores import S3Access, coordinator_conf

    table, writer, rounds, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    spark = SparkSession.builder.getOrCreate()
    jvm = spark._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {
        **S3Access.from_env().hadoop_conf(),
        **coordinator_conf(os.environ["EOS_RACE_CONTROL_DB_URL"]),
    }
    for key, value in settings.items():
        hadoop.set(key, value)
    schema = "writer STRING, round INT"
    if writer == "a":  # one writer creates the table, so that both race on appends only
        spark.createDataFrame([], schema).write.format("delta").mode("append").save(table)
    delta = jvm.org.apache.spark.sql.delta.DeltaLog
    # Spark's class loader holds the --jars classes (Class.forName would use the JVM's own).
    operation = jvm.org.apache.spark.util.Utils.classForName(
        "org.apache.spark.sql.delta.DeltaOperations$ManualUpdate$", True, False
    )
    manual_update = operation.getField("MODULE$").get(None)
    fs_path = jvm.org.apache.hadoop.fs.Path

    def meet(name: str, last_version: str = "") -> float:
        """Waits for the other writer at barrier `name`; returns the instant both agree on. Each
        writer leaves the version its previous commit got in its barrier file."""
        # Written aside and renamed: the other writer must never read a created but empty file.
        aside = barrier / f".{name}-{writer}.tmp"
        aside.write_text(last_version)
        os.replace(aside, barrier / f"{name}-{writer}")
        deadline = time.time() + 300
        while len(list(barrier.glob(f"{name}-*"))) < 2:
            if time.time() > deadline:
                raise TimeoutError(f"the other writer never reached barrier {name}")
            time.sleep(0.01)
        return max(p.stat().st_mtime for p in barrier.glob(f"{name}-*")) + 0.5

    meet("start")  # the table exists
    version = None
    for r in range(rounds):
        staging = f"staging/{writer}-{r}"
        spark.createDataFrame([(writer, r)], schema).coalesce(1).write.parquet(f"{table}/{staging}")
        root = fs_path(table)
        fs = root.getFileSystem(hadoop)
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
        instant = meet(f"round{r}", "" if version is None else str(version))
        # Both writers got the same version in the previous round: a commit was overwritten. Both
        # read the same two files, so both stop here, and the caller finds the loss in the table.
        seen = {p.read_text() for p in barrier.glob(f"round{r}-*")}
        if version is not None and seen == {str(version)}:
            print(f"collided {writer} {r - 1} version {version}", flush=True)
            break
        time.sleep(max(0.0, instant - time.time()))
        version = delta.forTable(spark._jsparkSession, table).startTransaction().commit(seq, manual_update)
        print(f"committed {writer} {r} version {version}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
