"""One attempt at a planned batch under its fence, its steps in the order they run (docs/design.md,
steps 3 to 7): check Kafka's ids, read, evolve the schema and parse, stage the table's replace,
gate it (the quarantine's replace staged beside the gate), publish the table, then the quarantine
table, then commit the offsets.

The table's stage, gate and publish run inside the table format's retry loop (commit_staged):
a publish that loses to a concurrent writer is staged and gated anew, so the loop calls this
object's stage_table and gate_table once per try; what the tries share is in the fields.
A crash anywhere before the commit leaves the batch planned; the next attempt re-reads the same
ranges and the replace makes the output identical. A zombie attempt is fenced at the commit.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pyspark import StorageLevel

from eos_ingest.batch.quarantine_replace import QuarantineReplace
from eos_ingest.batch.result import BatchResult
from eos_ingest.errors import EosIngestError, FencedError, PartialWriteError
from eos_ingest.fault_points import pause_if_asked
from eos_ingest.formats import parser, schema_evolution
from eos_ingest.kafka.offsets import fetch_identity
from eos_ingest.plan.identity import check_batch_identity
from eos_ingest.spark.kafka_source import read_ranges
from eos_ingest.storage.table_format import Replace, Txn, txn_app_id
from eos_ingest.storage.table_formats import output_format

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql.types import StructType

    from eos_ingest.batch.gate_step import GateStep
    from eos_ingest.config.pipeline import PipelineConfig
    from eos_ingest.control.store import Batch, ControlStore
    from eos_ingest.storage.table_format import StagedWrite

log = logging.getLogger(__name__)

# Fault points for the exactly-once tests (fault_points.pause_if_asked): when set to a path, the
# attempt writes its pid there and waits (up to 10 minutes) while the file exists, so a test can
# kill -9 it there or let a second attempt overtake it. After both publishes, before the commit:
PAUSE_BEFORE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_COMMIT"
# After the gate, before the table's publish: its files are staged, not committed. (The
# quarantine's fault points: batch/quarantine_replace.py.)
PAUSE_BEFORE_TABLE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_TABLE_COMMIT"


class BatchAttempt:
    """A planned batch run once to its commit under `fence` (from store.take_fence).

    `store` is the batch's one control store: the fence checks, the gate's report and the commit
    go through it. run() raises FencedError when a newer attempt took the fence meanwhile.
    """

    def __init__(
        self,
        spark: SparkSession,
        config: PipelineConfig,
        store: ControlStore,
        batch: Batch,
        fence: int,
        gate: GateStep,
    ) -> None:
        self.spark = spark
        self.config = config
        self.store = store
        self.batch = batch
        self.fence = fence
        self.gate = gate
        self.batch_id = batch.batch_id
        self.started = time.monotonic()
        self.table_format = output_format(config)
        self.table_path, self.quarantine_path = config.output_tables  # Delta's paths, or Iceberg's names
        self.table_txn = self._txn("table")
        self.quarantine_txn = self._txn("quarantine")
        self.count: Future[int] | None = None  # the gate's independent count, begun before the read
        # Set by read and evolve_and_parse: the Kafka rows, the batch's reader schema, its parsed
        # frame and output rows.
        self.kafka_rows: DataFrame
        self.evolution: schema_evolution.Evolution
        self.batch_config: PipelineConfig
        self.parsed: DataFrame
        self.rows: DataFrame  # the table's rows (a skipped write's gate reads them)
        self.observation: Observation | None = None  # the counts observed by this try's staged write
        self.splits: list[parser.Split] = []  # the counts of each try that reached its gate
        # The quarantine's replace: staged beside the first gate, published right after the table's.
        self.quarantine: QuarantineReplace | None = None

    def run(self) -> BatchResult:
        """Every step, in order; the batch's result once its commit went through."""
        log.info("batch %s: fence %s, %s ranges", self.batch_id, self.fence, len(self.batch.ranges))
        self.check_identity()
        self.count = self.gate.start_count(self.config, self.batch)  # beside the read
        self.read()
        self.evolve_and_parse()
        try:
            table_version = self.publish_table()
            quarantine_version = self.publish_quarantine()
        finally:
            self.release()
        return self.commit(table_version, quarantine_version)

    def check_identity(self) -> None:
        """TopicRecreatedError / ClusterMismatchError if Kafka's ids are not those the batch was
        planned on: checked before the read and again before the commit, so a recreation in
        between is caught."""
        topics = sorted({r.topic for r in self.batch.ranges})
        current = fetch_identity(self.config.kafka_settings, topics)
        recorded = self.store.recorded_identities(self.batch.pipeline)
        pairs = list(zip(self.batch.ranges, self.batch.range_topic_ids, strict=True))
        check_batch_identity(self.batch_id, self.batch.pipeline, pairs, recorded, current)

    def read(self) -> None:
        """The batch's Kafka rows: lazy, read by the table's staged write (and by schema evolution)."""
        log.info("batch %s: phase %s", self.batch_id, "read")
        headers = self.config.metadata.headers != "none"
        self.kafka_rows = read_ranges(
            self.spark,
            self.config.kafka_settings,
            self.batch.ranges,
            headers=headers,
            timeout_s=self.config.kafka_timeout_seconds,
        )

    def evolve_and_parse(self) -> None:
        """The batch's reader schema under value.schema_evolution (raises before any write under
        `fail`), then the parse: lazy, run by the table's staged write."""
        self.evolution = schema_evolution.evolve(self.spark, self.kafka_rows, self.config, self._table_schema)
        self.batch_config = self.evolution.config
        self.parsed = parser.parse(self.kafka_rows, self.batch_config, self.batch_id, self.evolution.avro)
        self.rows = parser.output_rows(self.parsed, self.batch_config)

    def check_fence(self) -> None:
        """FencedError once a newer attempt took the batch: before each stage and each publish."""
        self.store.check_fence(self.batch_id, self.fence)

    def stage_table(self) -> StagedWrite:
        """One Spark pass reads, parses, counts (observed) and writes the table's files; they are
        published only after the gate (storage/table_format.py), so no reader sees them before."""
        observed, self.observation = parser.observe_split(self.parsed, self.batch_id)
        replace = Replace(
            parser.output_rows(observed, self.batch_config),
            self.table_path,
            self.batch.ranges,
            self.batch_id,
            self.config.output.partition_by,
            txn=self.table_txn,
            merge_schema=self.evolution.merge_schema,
        )
        return self.table_format.stage(self.spark, replace)

    def count_split(self, staged: StagedWrite) -> parser.Split:
        """This try's counts: observed by its staged write, else (a write the table format skipped,
        an observation that never arrived) counted in one more pass, cached."""
        split = None
        if not staged.skipped and self.observation is not None:
            split = parser.observed_split(self.observation)
        if split is None or split.quarantined or split.unknown_fields or split.type_changed:
            # What is still to read from the batch (its counts when the write was skipped, the
            # quarantine's rows, the names of dropped fields) comes from one more pass, cached.
            self.parsed.persist(StorageLevel.MEMORY_AND_DISK)
        if split is None:
            split = parser.count_split(self.parsed)
        if self.splits and split != self.splits[0]:
            # A try after a lost conflict reads the ranges again: a compacted topic, say, may
            # give fewer records than the first try's gate and quarantine had. Start over.
            raise PartialWriteError(
                f"batch {self.batch_id}: the ranges read differently when the table's replace was "
                f"staged again after a concurrent writer won ({self.splits[0]} then {split}); nothing "
                "of this try is committed and the batch stays planned: a rerun reads and checks them anew"
            )
        self.splits.append(split)
        return split

    def gate_table(self, staged: StagedWrite) -> None:
        """The gate on this try's staged files, the quarantine's replace staged beside it; raises
        to publish nothing (QualityGateError: the staged files are deleted)."""
        split = self.count_split(staged)
        schema_evolution.check_parsed(self.parsed, split, self.batch_config, self.batch_id)
        if self.quarantine is None and split.quarantined:
            # Staged beside the gate (its second read of Kafka while GX runs in Python), published
            # only after the table's publish: neither table is replaced unless both got this far.
            self.quarantine = self._quarantine_replace(split.quarantined)
        log.info("batch %s: phase %s", self.batch_id, "gate")
        self.gate.check(
            self.spark, self.store, self.config, self.batch, staged, self.rows, split.quarantined, self.count
        )
        if self.quarantine is None:
            # Nothing to quarantine: the empty replace reads no Kafka and is staged once the gate
            # passed (Spark writes one empty file for it, which a failed first batch would leave
            # in a new quarantine table's folder).
            self.quarantine = self._quarantine_replace(0)
        try:
            self.quarantine.wait()  # staged and counted, or its error: then neither table is published
        except Exception:
            # A failed stage is dropped, not kept: after a lost race (its branch cut, say) the next
            # try stages the quarantine anew rather than raising this try's error again.
            self.quarantine.release()
            self.quarantine = None
            raise
        log.info("batch %s: phase %s", self.batch_id, "write")

    def publish_table(self) -> int:
        """Stage, gate and publish the table's replace; the version holding the batch. Every try
        that publishes is one whose staged files passed the gate (a lost race stages and gates
        anew), and whose quarantine replace is staged and counted: the first try's."""
        return self.table_format.commit_staged(
            self.stage_table,
            self.table_path,
            self.batch_id,
            txn=self.table_txn,
            check=self.gate_table,
            before_write=self.check_fence,  # a zombie stages nothing
            before_commit=self._pause_before_table_commit,
        ).version

    def publish_quarantine(self) -> int:
        """The quarantine's staged replace published, right after the table's: the table holds the
        batch now, so whatever fails here leaves the batch planned (PartialWriteError)."""
        assert self.quarantine is not None  # the gate of the try that published started it
        try:
            return self.quarantine.publish(self.check_fence)
        except Exception as exc:
            if isinstance(exc, FencedError) or (isinstance(exc, EosIngestError) and exc.retriable):
                raise
            raise PartialWriteError(
                f"batch {self.batch_id}: the table {self.table_path} was written but the quarantine "
                f"table {self.quarantine_path} was not ({exc}); the batch stays planned and a rerun "
                "replaces the ranges in both (fix the quarantine table first if the cause persists)"
            ) from exc

    def release(self) -> None:
        """After the publishes, whatever their outcome: the quarantine's stage has ended before
        the batch's fate is decided, an unpublished one is aborted, the cached rows are freed."""
        if self.quarantine is not None:
            self.quarantine.release()
        self.parsed.unpersist()

    def commit(self, table_version: int, quarantine_version: int) -> BatchResult:
        """Kafka's ids checked once more, then the control DB's fenced commit of the batch."""
        split = self.splits[-1]
        good, bad = split.good, split.quarantined
        log.info("batch %s: phase %s", self.batch_id, "written")
        pause_if_asked(PAUSE_BEFORE_COMMIT_ENV)
        self.check_identity()
        log.info("batch %s: phase %s", self.batch_id, "commit")
        self.store.commit_batch(
            self.batch_id,
            self.fence,
            records_read=good + bad,
            records_written=good,
            records_quarantined=bad,
            delta_version=table_version,
            quarantine_delta_version=quarantine_version,
        )
        result = BatchResult(
            self.batch_id,
            self.fence,
            good + bad,
            good,
            bad,
            table_version,
            quarantine_version,
            time.monotonic() - self.started,
            split.unknown_fields,
            tuple(n for n, _ in self.evolution.added),
        )
        log.info("batch %s committed: %s", self.batch_id, result)
        return result

    def _quarantine_replace(self, quarantined: int) -> QuarantineReplace:
        """The quarantine's replace of the batch's `quarantined` rows, staging from now on."""
        return QuarantineReplace(
            self.spark, self.table_format, self.quarantine_path, self.batch, self.quarantine_txn,
            self.parsed, self.batch_config, quarantined,
        )  # fmt: skip

    def _pause_before_table_commit(self) -> None:
        pause_if_asked(PAUSE_BEFORE_TABLE_COMMIT_ENV)

    def _table_schema(self) -> StructType | None:
        return self.table_format.table_schema(self.spark, self.table_path)

    def _txn(self, table: str) -> Txn:
        """The idempotent-write identity of this attempt's write to `table`: a write by an older
        fence (a zombie) after a newer one is skipped by the table format itself."""
        batch = self.batch
        app_id = txn_app_id(self.config.name, batch.batch_id, batch.created_at.isoformat(), table)
        return Txn(app_id, self.fence, planned_at=batch.created_at)
