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

from delta_log_commit import manual_update, s3a_session, stage_row, start_transaction


def main() -> int:
    table, commits = sys.argv[1], int(sys.argv[2])
    spark = s3a_session(os.environ["EOS_BENCH_CONTROL_DB_URL"])
    schema = "n INT"
    spark.createDataFrame([], schema).write.format("delta").mode("append").save(table)
    operation = manual_update(spark)
    times_ms = []
    for i in range(commits):
        seq = stage_row(spark, table, f"staging/{i}", (i,), schema)
        txn = start_transaction(spark, table)
        started = time.perf_counter()
        txn.commit(seq, operation)
        times_ms.append(round((time.perf_counter() - started) * 1000, 1))
    print(json.dumps({"commit_ms": times_ms}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
