"""A Spark application for test_s3a_commit_timeout.py: appends one row per Delta commit to an s3a
table through JdbcLogStore.

    spark-submit ... s3a_coordinator_app.py append <table> <first n> <commits>
    spark-submit ... s3a_coordinator_app.py stall <table> <folder>

`append` prints `committed <version>` per commit. `stall` commits n=0 and writes `committed 0` to
<folder>/ready, then waits for <folder>/go; times the commit of n=1 and writes `failed <seconds>
<error>` (or `committed <version> <seconds>`) to <folder>/tried, then waits for <folder>/again;
then commits n=2 and prints `committed <version>`. The waits are bounded (300 s).

The outcomes go into the signal files rather than stdout because spark-submit copies the Python
driver's stdout through a JVM thread: a line printed before a signal file was touched could
reach the test after the file (the CI run of 4964cfb read `tried` before its line).

The coordinator's settings: EOS_TEST_CONTROL_DB_URL (the control DB, as coordinator_conf turns it
into eos.delta.jdbc.*) and EOS_TEST_JDBC_SETTINGS (a JSON object of further Hadoop settings, e.g.
"eos.delta.jdbc.keep_versions", or "eos.delta.jdbc.url" to go through a proxy).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def wait_for(path: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout_s} s")
        time.sleep(0.1)


def signal(path: Path, line: str) -> None:
    """Writes `line` to `path` whole: the test sees the file only once it holds its line."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(line + "\n")
    partial.rename(path)


def main() -> int:
    from delta.tables import DeltaTable
    from py4j.protocol import Py4JJavaError
    from pyspark.sql import SparkSession

    from eos_ingest.storage.object_stores import S3Access, coordinator_conf

    mode, table = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.getOrCreate()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {
        **S3Access.from_env().hadoop_conf(),
        **coordinator_conf(os.environ["EOS_TEST_CONTROL_DB_URL"]),
        **json.loads(os.environ.get("EOS_TEST_JDBC_SETTINGS", "{}")),
    }
    for key, value in settings.items():
        hadoop.set(key, str(value))

    def commit(n: int) -> int:
        spark.createDataFrame([(n,)], "n INT").write.format("delta").mode("append").save(table)
        return int(DeltaTable.forPath(spark, table).history(1).first()["version"])

    if mode == "append":
        first, commits = int(sys.argv[3]), int(sys.argv[4])
        for n in range(first, first + commits):
            print(f"committed {commit(n)}", flush=True)
    elif mode == "stall":
        folder = Path(sys.argv[3])
        signal(folder / "ready", f"committed {commit(0)}")
        wait_for(folder / "go")
        started = time.monotonic()
        try:
            version = commit(1)
            outcome = f"committed {version} {time.monotonic() - started:.1f}"
        except Py4JJavaError as exc:
            chain, error = [], exc.java_exception
            while error is not None and len(chain) < 8:
                chain.append(str(error.toString()).replace("\n", " "))
                error = error.getCause()
            outcome = f"failed {time.monotonic() - started:.1f} {' <- '.join(chain)}"
        signal(folder / "tried", outcome)
        wait_for(folder / "again")
        print(f"committed {commit(2)}", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
