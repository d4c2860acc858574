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

import os
import sys
import time
from pathlib import Path

from delta_log_commit import manual_update, s3a_session, stage_row, start_transaction


def main() -> int:
    table, writer, rounds, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    spark = s3a_session(os.environ["EOS_RACE_CONTROL_DB_URL"])
    schema = "writer STRING, round INT"
    if writer == "a":  # one writer creates the table, so that both race on appends only
        spark.createDataFrame([], schema).write.format("delta").mode("append").save(table)
    operation = manual_update(spark)

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
        seq = stage_row(spark, table, f"staging/{writer}-{r}", (writer, r), schema)
        instant = meet(f"round{r}", "" if version is None else str(version))
        # Both writers got the same version in the previous round: a commit was overwritten. Both
        # read the same two files, so both stop here, and the caller finds the loss in the table.
        seen = {p.read_text() for p in barrier.glob(f"round{r}-*")}
        if version is not None and seen == {str(version)}:
            print(f"collided {writer} {r - 1} version {version}", flush=True)
            break
        time.sleep(max(0.0, instant - time.time()))
        version = start_transaction(spark, table).commit(seq, operation)
        print(f"committed {writer} {r} version {version}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
