"""The sequence of one planned batch: fence -> identity check -> read -> parse (and stage the
table's files) -> gate (the quarantine's replace staged beside it) -> write (publish the table, then
the quarantine table) -> commit (docs/exactly-once.md, "How exactly-once works", steps 2-7).

run_fenced takes the fence and decides what a failure does to the batch; execute_batch runs the
steps under that fence. A crash anywhere before the commit leaves the batch planned; the next
attempt re-reads the same ranges and the Delta replace makes the output identical. A zombie
attempt is fenced at commit.
"""

from __future__ import annotations

import json
import logging
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eos_ingest.batch.reader import read_ranges
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import Batch, ControlStore
from eos_ingest.errors import (
    EosIngestError,
    FencedError,
    PartialWriteError,
    QualityGateError,
    SchemaEvolutionError,
)
from eos_ingest.fault_points import pause_if_asked
from eos_ingest.formats import parser, schema_evolution
from eos_ingest.kafka.offsets import fetch_identity
from eos_ingest.plan.data_loss import spark_data_loss
from eos_ingest.plan.identity import check_batch_identity
from eos_ingest.quality import gate as quality
from eos_ingest.quality.report import record_report
from eos_ingest.redact import redact_text, secrets_of
from eos_ingest.storage.table_format import Txn, staged_batch_rows, txn_app_id
from eos_ingest.storage.table_formats import output_format

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eos_ingest.storage.table_format import StagedWrite

log = logging.getLogger(__name__)

# Fault injection for the exactly-once tests: when set to a path, the attempt writes its pid
# there after the Delta writes and waits (up to 10 minutes) while the file exists, so a test can
# kill -9 it between write and commit, or let a second attempt overtake it.
PAUSE_BEFORE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_COMMIT"
# The same, after the gate and before the table's Delta commit: its files are staged, not committed.
PAUSE_BEFORE_TABLE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_TABLE_COMMIT"
# The same, after the table's publish and before the quarantine table's: one table holds the batch.
PAUSE_BEFORE_QUARANTINE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_QUARANTINE_COMMIT"
# The same, after the table's staged write (the batch's first read of Kafka) and before the
# quarantine's replace reads its rows (a second read, unless the parsed rows are cached by then).
PAUSE_BEFORE_QUARANTINE_READ_ENV = "EOS_FAULT_PAUSE_BEFORE_QUARANTINE_READ"
# For `make bench` only: "1" skips the GX gate, to measure what the gate costs. Never for real
# data: the batch then commits without its checks, and the job says so in a warning per batch.
GATE_OFF_ENV = "EOS_BENCH_GATE_OFF"


@dataclass(frozen=True)
class BatchResult:
    batch_id: int
    fence: int
    records_read: int
    records_written: int
    records_quarantined: int
    delta_version: int
    quarantine_delta_version: int
    seconds: float
    # Good records carrying fields no column reads, dropped (value.schema_evolution: ignore).
    records_with_unknown_fields: int = 0
    # Columns this batch added to the table (value.schema_evolution: add_columns).
    columns_added: tuple[str, ...] = ()


def run_fenced(spark: SparkSession, config: PipelineConfig, store: ControlStore, batch: Batch) -> BatchResult:
    """Take a new fence and execute a planned batch.

    A non-retriable error of ours (bad data for the gate, a write refused, ...) marks the batch
    failed with its text, under our fence only, so a zombie cannot fail a batch it lost; so does
    Spark's failOnDataLoss error (records deleted since the plan), as OffsetsLostError. Anything
    else (a broker restart mid-read, a killed executor) leaves it planned: a retry re-runs the
    same ranges and the replace makes the result identical.
    """
    batch_id = batch.batch_id
    fence = store.take_fence(batch_id)
    try:
        result = execute_batch(spark, config, store, batch, fence)
    except FencedError:
        raise  # the batch belongs to a newer attempt: leave it alone
    except EosIngestError as exc:
        # A schema change under `fail` waits for a person's fix, then a rerun: the batch stays planned.
        if not (exc.retriable or isinstance(exc, SchemaEvolutionError)):
            store.fail_batch(batch_id, fence, _error_text(config, exc))
        raise
    except Exception as exc:
        # Records deleted after the plan: a rerun would fail the same way, so fail the batch.
        lost = spark_data_loss(exc, config.name, batch_id, batch.ranges)
        if lost is None:
            raise
        store.fail_batch(batch_id, fence, _error_text(config, lost))
        raise lost from exc
    # The application id shows, in the job's output, that the batches of a catch-up shared one session.
    app_id = spark.sparkContext.applicationId
    print(json.dumps({"status": "committed", "spark_application_id": app_id, **result.__dict__}), flush=True)
    return result


def execute_batch(
    spark: SparkSession, config: PipelineConfig, store: ControlStore, batch: Batch, fence: int
) -> BatchResult:
    """Run a planned batch to its commit under `fence` (from store.take_fence).

    `store` is the batch's one control store: the fence checks, the gate's report and the commit
    go through it. Raises FencedError at commit if a newer attempt took the fence meanwhile.
    """
    from pyspark import StorageLevel

    started = time.monotonic()
    batch_id = batch.batch_id
    log.info("batch %s: fence %s, %s ranges", batch_id, fence, len(batch.ranges))

    # The batch's ranges must be read from the topic incarnation (and cluster) they were planned
    # on: checked before the read and again before the commit, so a recreation in between is caught.
    _check_identity(config, store, batch)
    gate_off = os.environ.get(GATE_OFF_ENV) == "1"
    # The gate's independent count (a plain Kafka consumer) and GX's warm-up run beside the read.
    recount = None if gate_off else quality.start_recount(config, batch)
    log.info("batch %s: phase %s", batch_id, "read")
    kafka_rows = read_ranges(
        spark, config.kafka_settings, batch.ranges, headers=config.metadata.headers != "none"
    )
    # The batch's reader schema under value.schema_evolution (raises before any write under fail).
    table_format = output_format(config)
    table_path, quarantine_path = config.output_tables  # Delta's paths, or Iceberg's table names
    evolution = schema_evolution.evolve(
        spark, kafka_rows, config, lambda: table_format.table_schema(spark, table_path)
    )
    batch_config = evolution.config
    parsed = parser.parse(kafka_rows, batch_config, batch_id, evolution.avro)
    table_txn = _txn(config, batch, fence, "table")
    quarantine_txn = _txn(config, batch, fence, "quarantine")
    rows = parser.output_rows(parsed, batch_config)  # the table's rows (a skipped write's gate reads them)
    observation: list[Any] = []  # the counts observed by the try's staged write
    splits: list[parser.Split] = []  # the counts of each try that reached its gate
    # The quarantine's replace, staged beside the first gate and published right after the table's.
    quarantine_stage: Future[StagedWrite] | None = None
    pool = ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="eos-quarantine", initializer=_activate, initargs=(spark,)
    )

    def check_fence() -> None:
        store.check_fence(batch_id, fence)

    def stage_table() -> StagedWrite:
        # One Spark pass reads, parses, counts (observed) and writes the table's files; they are
        # committed only after the gate (storage/table_format.py), so no reader sees them before.
        observed, observed_by = parser.observe_split(parsed, batch_id)
        observation[:] = [observed_by]
        return table_format.stage(
            spark,
            parser.output_rows(observed, batch_config),
            table_path,
            batch.ranges,
            batch_id,
            config.output.partition_by,
            txn=table_txn,
            merge_schema=evolution.merge_schema,
        )

    def gate_table(staged: StagedWrite) -> None:
        nonlocal quarantine_stage
        split = None if staged.skipped else parser.observed_split(observation[0])
        if split is None or split.quarantined or split.unknown_fields or split.type_changed:
            # What is still to read from the batch (its counts when Delta skipped the write,
            # the quarantine's rows, the names of dropped fields) comes from one more pass, cached.
            parsed.persist(StorageLevel.MEMORY_AND_DISK)
        if split is None:
            split = parser.count_split(parsed)
        if splits and split != splits[0]:
            # A try after a lost conflict reads the ranges again: a compacted topic, say, may
            # give fewer records than the first try's gate and quarantine had. Start over.
            raise PartialWriteError(
                f"batch {batch_id}: the ranges read differently when the table's replace was staged "
                f"again after a concurrent writer won ({splits[0]} then {split}); nothing of this try "
                "is committed and the batch stays planned: a rerun reads and checks them anew"
            )
        splits.append(split)
        schema_evolution.check_parsed(parsed, split, batch_config, batch_id)
        if quarantine_stage is None and split.quarantined:
            # Staged beside the gate (its second read of Kafka while GX runs in Python), published
            # only after the table's publish: neither table is replaced unless both got this far.
            quarantine_stage = pool.submit(stage_quarantine)
        log.info("batch %s: phase %s", batch_id, "gate")
        if recount is None:
            log.warning(
                "batch %s: the quality gate is OFF (%s=1, for benchmarks only)", batch_id, GATE_OFF_ENV
            )
        else:  # raises QualityGateError: nothing committed, the staged files are deleted
            # The gate checks what the commit will publish: the staged files themselves, less the
            # rows of other batches that Delta's row-level rewrite of a replaced file carries over.
            checked = (
                rows if staged.skipped else staged.read_back(rows.schema).where(f"batch_id = {batch_id}")
            )
            try:
                quality.gate(
                    spark, config, batch, checked, split.quarantined, recount=recount,
                    staged=None if staged.skipped else staged,
                )  # fmt: skip
            except QualityGateError as failed:
                if failed.report is not None:
                    record_report(store, batch_id, failed.report, raise_errors=False)
                raise
        if quarantine_stage is None:
            # Nothing to quarantine: the empty replace reads no Kafka and is staged once the gate
            # passed (Spark writes one empty file for it, which a failed first batch would leave
            # in a new quarantine table's folder).
            quarantine_stage = pool.submit(stage_quarantine)
        quarantine_stage.result()  # staged and counted, or its error: then neither table is published
        log.info("batch %s: phase %s", batch_id, "write")

    def stage_quarantine() -> StagedWrite:
        # The quarantine's rows are a second read of the batch (`parsed` is cached from here on, not
        # before): a compacted topic's cleaner may have run since the gate's count. What would be
        # published is counted against it; a difference fails the try, retriably.
        pause_if_asked(PAUSE_BEFORE_QUARANTINE_READ_ENV)
        bad = splits[0].quarantined
        quarantine = parser.quarantine_rows(parsed, batch_config)
        if not bad:
            # An empty replace: limit(0) plans as an empty relation, so Kafka is not read again,
            # and no Python worker starts (createDataFrame([]) is a Python RDD: ~1 s per job).
            quarantine = quarantine.limit(0)
        staged = table_format.stage(
            spark, quarantine, quarantine_path, batch.ranges, batch_id, txn=quarantine_txn
        )
        written = 0 if staged.skipped or not bad else staged_batch_rows(staged, quarantine.schema, batch_id)
        if written != bad and not staged.skipped:
            staged.abort()
            raise PartialWriteError(
                f"batch {batch_id}: the quarantine table {quarantine_path} would get {written} rows where "
                f"the gate counted {bad} quarantined records: the ranges read differently the second "
                "time (a compacted topic's cleaner ran, say); the quarantine's replace is not "
                "published and the batch stays planned: a rerun reads and checks them anew"
            )
        return staged

    def publish_quarantine(staged: StagedWrite) -> int:
        # Right after the table's publish; a try that loses to a concurrent writer stages anew.
        first = [staged]
        return table_format.commit_staged(
            lambda: first.pop() if first else stage_quarantine(),
            quarantine_path,
            batch_id,
            txn=quarantine_txn,
            before_write=check_fence,
            before_commit=lambda: pause_if_asked(PAUSE_BEFORE_QUARANTINE_COMMIT_ENV),
        ).version

    try:
        # Every try that commits is one whose staged files passed the gate (a lost conflict stages
        # and gates anew), and whose quarantine replace is staged and counted: the first try's.
        version = table_format.commit_staged(
            stage_table,
            table_path,
            batch_id,
            txn=table_txn,
            check=gate_table,
            before_write=check_fence,  # a zombie stages nothing
            before_commit=lambda: pause_if_asked(PAUSE_BEFORE_TABLE_COMMIT_ENV),
        ).version
        assert quarantine_stage is not None  # the gate of the try that committed started it
        try:  # the table holds the batch now: whatever fails next must leave it planned
            quarantine_version = publish_quarantine(quarantine_stage.result())
        except Exception as exc:
            if isinstance(exc, FencedError) or (isinstance(exc, EosIngestError) and exc.retriable):
                raise
            raise PartialWriteError(
                f"batch {batch_id}: the table {table_path} was written but the quarantine "
                f"table {quarantine_path} was not ({exc}); the batch stays planned and a rerun "
                "replaces the ranges in both (fix the quarantine table first if the cause persists)"
            ) from exc
    finally:
        pool.shutdown(wait=True)  # the quarantine's stage ends before the batch's fate is decided
        if quarantine_stage is not None and quarantine_stage.exception() is None:
            quarantine_stage.result().abort()  # unpublished: its files or branch go (a no-op once tried)
        parsed.unpersist()
    split = splits[-1]
    good, bad = split.good, split.quarantined

    log.info("batch %s: phase %s", batch_id, "written")
    pause_if_asked(PAUSE_BEFORE_COMMIT_ENV)
    _check_identity(config, store, batch)
    log.info("batch %s: phase %s", batch_id, "commit")
    store.commit_batch(
        batch_id,
        fence,
        records_read=good + bad,
        records_written=good,
        records_quarantined=bad,
        delta_version=version,
        quarantine_delta_version=quarantine_version,
    )
    result = BatchResult(
        batch_id,
        fence,
        good + bad,
        good,
        bad,
        version,
        quarantine_version,
        time.monotonic() - started,
        split.unknown_fields,
        tuple(n for n, _ in evolution.added),
    )
    log.info("batch %s committed: %s", batch_id, result)
    return result


def _activate(spark: SparkSession) -> None:
    """Make `spark` the active session of this thread's JVM thread, which a new Python thread lacks:
    Delta's snapshot loading falls back to the active session when its prefetch of a checkpoint
    fails (DELTA_SPARK_SESSION_NOT_SET, seen in the quarantine's stage beside a writer that
    commits to the table five times a second: test_write_conflicts.py)."""
    jvm = spark._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def _check_identity(config: PipelineConfig, store: ControlStore, batch: Batch) -> None:
    """TopicRecreatedError / ClusterMismatchError if Kafka's ids are not those the batch was planned on."""
    topics = sorted({r.topic for r in batch.ranges})
    current = fetch_identity(config.kafka_settings, topics)
    recorded = store.recorded_identities(batch.pipeline)
    pairs = list(zip(batch.ranges, batch.range_topic_ids, strict=True))
    check_batch_identity(batch.batch_id, batch.pipeline, pairs, recorded, current)


def _txn(config: PipelineConfig, batch: Batch, fence: int, table: str) -> Txn:
    """The idempotent-write identity of this attempt's write to `table`: a write by an older
    fence (a zombie) after a newer one is skipped by the table format itself."""
    app_id = txn_app_id(config.name, batch.batch_id, batch.created_at.isoformat(), table)
    return Txn(app_id, fence, planned_at=batch.created_at)


def _error_text(config: PipelineConfig, exc: Exception) -> str:
    """The error as stored on the batch row (and shown by the UI): the config's secret values
    masked, besides what the control store redacts by pattern."""
    secrets = secrets_of(config.kafka) + secrets_of({"url": config.control_db_url})
    return redact_text(f"{type(exc).__name__}: {exc}", secrets)
