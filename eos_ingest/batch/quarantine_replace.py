"""The quarantine table's replace of one batch attempt (docs/design.md, step 6).

Staged in a thread of its own beside the gate (its Spark job beside GX's Python) and published
right after the table's publish, never before it nor beside it (issue 48): a table publish that
fails for good fails the batch with neither table replaced, and anything between the two
publishes leaves the batch planned for a rerun that replaces both. What it would publish is
counted against the gate's count before either publish.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from eos_ingest.errors import PartialWriteError
from eos_ingest.fault_points import pause_if_asked
from eos_ingest.formats import parser
from eos_ingest.jvm import java_session, jvm_of
from eos_ingest.storage.table_format import Replace, staged_batch_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eos_ingest.config.pipeline import PipelineConfig
    from eos_ingest.control.store import Batch
    from eos_ingest.storage.table_format import StagedWrite, TableFormat, Txn

# Fault points for the exactly-once tests (fault_points.pause_if_asked). After the table's staged
# write (the batch's first read of Kafka), before the quarantine's replace reads its rows (a
# second read, unless the parsed rows are cached by then):
PAUSE_BEFORE_QUARANTINE_READ_ENV = "EOS_FAULT_PAUSE_BEFORE_QUARANTINE_READ"
# After the table's publish, before the quarantine table's: one table holds the batch.
PAUSE_BEFORE_QUARANTINE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_QUARANTINE_COMMIT"


class QuarantineReplace:
    """The replace of `batch`'s ranges in the quarantine table at `path` by the rows of `parsed`
    that did not parse, `expected` of them (the gate's count); staged from construction on."""

    def __init__(
        self,
        spark: SparkSession,
        table_format: TableFormat,
        path: str,
        batch: Batch,
        txn: Txn,
        parsed: DataFrame,
        config: PipelineConfig,
        expected: int,
    ) -> None:
        self.spark = spark
        self.table_format = table_format
        self.path = path
        self.batch = batch
        self.txn = txn
        self.parsed = parsed
        self.config = config
        self.expected = expected
        self.restage = False  # a publish that lost a race stages anew
        self.pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="eos-quarantine", initializer=_activate, initargs=(spark,)
        )
        self.staged = self.pool.submit(self.stage)

    def stage(self) -> StagedWrite:
        """Write the replace, uncommitted, and count its rows. They are a second read of the batch
        (`parsed` is cached by the gate when it has quarantined values): a compacted topic's cleaner
        may have run since the gate's count; a difference fails the try, retriably."""
        pause_if_asked(PAUSE_BEFORE_QUARANTINE_READ_ENV)
        bad, batch_id = self.expected, self.batch.batch_id
        rows = parser.quarantine_rows(self.parsed, self.config)
        if not bad:
            # An empty replace: limit(0) plans as an empty relation, so Kafka is not read again,
            # and no Python worker starts (createDataFrame([]) is a Python RDD: ~1 s per job).
            rows = rows.limit(0)
        staged = self.table_format.stage(
            self.spark, Replace(rows, self.path, self.batch.ranges, batch_id, txn=self.txn)
        )
        written = 0 if staged.skipped or not bad else staged_batch_rows(staged, rows.schema, batch_id)
        if written != bad and not staged.skipped:
            staged.abort()
            raise PartialWriteError(
                f"batch {batch_id}: the quarantine table {self.path} would get {written} rows where "
                f"the gate counted {bad} quarantined records: the ranges read differently the second "
                "time (a compacted topic's cleaner ran, say); the quarantine's replace is not "
                "published and the batch stays planned: a rerun reads and checks them anew"
            )
        return staged

    def wait(self) -> None:
        """Until it is staged and counted; its error, if it failed (then neither table is published)."""
        self.staged.result()

    def publish(self, check_fence: Callable[[], None]) -> int:
        """Publish the staged replace (a try that loses to a concurrent writer stages anew);
        the quarantine table's version holding the batch."""
        return self.table_format.commit_staged(
            self._to_publish,
            self.path,
            self.batch.batch_id,
            txn=self.txn,
            before_write=check_fence,
            before_commit=self._pause_before_commit,
        ).version

    def release(self) -> None:
        """Its stage ended (before the batch's fate is decided) and, unpublished, aborted: its
        files or branch go (a no-op once its publish was tried)."""
        self.pool.shutdown(wait=True)
        if self.staged.exception() is None:
            self.staged.result().abort()

    def _to_publish(self) -> StagedWrite:
        """The replace staged beside the gate for the first try; a fresh stage after a lost race."""
        if self.restage:
            return self.stage()
        self.restage = True
        return self.staged.result()

    def _pause_before_commit(self) -> None:
        pause_if_asked(PAUSE_BEFORE_QUARANTINE_COMMIT_ENV)


def _activate(spark: SparkSession) -> None:
    """Make `spark` the active session of this thread's JVM thread, which a new Python thread lacks:
    Delta's snapshot loading falls back to the active session when its prefetch of a checkpoint
    fails (DELTA_SPARK_SESSION_NOT_SET, seen in the quarantine's stage beside a writer that
    commits to the table five times a second: test_write_conflicts.py)."""
    jvm_of(spark).org.apache.spark.sql.SparkSession.setActiveSession(java_session(spark))
