"""A Spark application for test_s3a_commit_cleanup.py (as a role with the documented grants only):
appends one row per commit to an s3a Delta table through the commit coordinator with a small
keep_versions, then acts as a writer that paused for a long time before its commit insert (a
zombie) and tries to take an old version whose entry the cleanup has deleted.

    spark-submit ... s3a_commit_cleanup_app.py <table> <commits> <keep_versions> <zombie_version>

Prints `committed <version>` per append and `zombie <refused|accepted> <error class>` at the end.
"""

from __future__ import annotations

import os
import sys
import uuid


def main() -> int:
    from delta.tables import DeltaTable
    from py4j.protocol import Py4JJavaError
    from pyspark.sql import SparkSession

    from eos_ingest.storage.object_stores import LOG_STORE_CLASS, S3Access, coordinator_conf

    table, commits, keep, zombie = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    spark = SparkSession.builder.getOrCreate()
    jvm = spark._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {
        **S3Access.from_env().hadoop_conf(),
        **coordinator_conf(os.environ["EOS_TEST_CONTROL_DB_URL"]),
        "eos.delta.jdbc.keep_versions": keep,
    }
    for key, value in settings.items():
        hadoop.set(key, value)
    for i in range(commits):
        spark.createDataFrame([(i,)], "n INT").write.format("delta").mode("append").save(table)
        version = DeltaTable.forPath(spark, table).history(1).first()["version"]
        print(f"committed {version}", flush=True)

    # The zombie: its commit insert for `zombie` (an old version), as BaseExternalLogStore.write
    # makes it after the file-existence check that passed long ago. Reached by reflection: the
    # method is protected, and Spark's class loader holds the --jars classes.
    load = jvm.org.apache.spark.util.Utils.classForName
    store_class = load(LOG_STORE_CLASS, True, False)
    entry_class = load("eos.ingest.delta.ExternalCommitEntry", True, False)
    gateway = spark.sparkContext._gateway
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = hadoop
    store = store_class.getConstructors()[0].newInstance(args)
    root = jvm.org.apache.hadoop.fs.Path(table)
    qualified = root.getFileSystem(hadoop).makeQualified(root)
    entry_args = gateway.new_array(jvm.java.lang.Object, 5)
    entry_args[0] = qualified
    entry_args[1] = f"{zombie:020d}.json"
    entry_args[2] = f".tmp/{zombie:020d}.json.{uuid.uuid4()}"
    entry_args[3] = False
    entry_args[4] = None
    entry = entry_class.getConstructors()[0].newInstance(entry_args)
    put = next(m for m in store_class.getDeclaredMethods() if m.getName() == "putExternalEntry")
    put.setAccessible(True)
    call = gateway.new_array(jvm.java.lang.Object, 2)
    call[0] = entry
    call[1] = False
    try:
        put.invoke(store, call)
        print("zombie accepted -", flush=True)
    except Py4JJavaError as exc:
        cause = exc.java_exception.getCause()
        print(f"zombie refused {cause.getClass().getName() if cause else exc.java_exception}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
