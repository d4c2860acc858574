"""The quality gate (step 5): Great Expectations on a batch's output rows inside the Spark job,
before anything is written or committed; a failed critical expectation fails the batch.

The rows + quarantined rows must equal the records Kafka holds in the batch's ranges, counted by a
plain read_committed consumer (start_recount: independent of Spark's read, and beside it). The
GX context and checkpoint: quality/context.py; the report: quality/report.py; the audit after the
commit: quality/audit.py. See docs/quality.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import Batch
from eos_ingest.errors import QualityGateError
from eos_ingest.plan.ranges import merge_ranges
from eos_ingest.quality import context as gx_context
from eos_ingest.quality.context import (
    ASSET,
    BATCH_DEFINITION,
    RESULT_FORMAT,
    validate,
)
from eos_ingest.quality.gx_import import import_gx, quiet_gx
from eos_ingest.quality.report import build_report
from eos_ingest.quality.rows import arrow_frame, with_range_column
from eos_ingest.quality.suite import (
    EXPECTED_ROWS,
    build_suite,
    default_suite_doc,
    named_columns,
    validated_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eos_ingest.storage.table_format import StagedWrite

__all__ = ["cached_frame", "committed_record_count", "gate", "preload_gx", "start_recount", "warm_up"]

log = logging.getLogger(__name__)


def committed_record_count(config: PipelineConfig, batch: Batch) -> int:
    """Records Kafka holds in the batch's ranges, counted by a plain read_committed consumer.

    Independent of the Spark read on purpose, and not end - start: transaction markers and
    aborted records leave gaps in the offsets. Counts per partition: memory does not grow with
    the records.
    """
    # Imported here: kafka-python's import (~70 ms) is wasted on an audit that does not recount.
    from eos_ingest.kafka.committed_counts import read_committed_counts  # noqa: PLC0415 kafka-python: not in an audit that does not recount

    return sum(read_committed_counts(config.kafka_settings, merge_ranges(batch.ranges)).values())


_background: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _background
    if _background is None:
        # Three: the preload, the warm-up (which waits on the preload's import) and the recount,
        # which must not queue behind them.
        _background = ThreadPoolExecutor(max_workers=3, thread_name_prefix="eos-gate")
    return _background


def preload_gx(hide: Iterable[str] = ()) -> Future[bool]:
    """Import GX in a background thread; call it before the Spark session starts.

    GX's import costs ~3 s of CPU. Started here it overlaps the session's start, which keeps one
    core of two busy; started with the read (start_recount) it competed with Spark's tasks for
    both, and a small batch paid it in full. `hide`: as quality/gx_import.import_gx."""
    return _executor().submit(_import_gx, tuple(hide))


def _import_gx(hide: tuple[str, ...] = ()) -> bool:
    try:
        import_gx(hide)
    except Exception:  # the gate imports it again and reports the error
        log.debug("GX import failed; the gate will report the error", exc_info=True)
        return False
    return True


def start_recount(config: PipelineConfig, batch: Batch) -> Future[int]:
    """committed_record_count in a background thread; hand the future to gate().

    Call it before the Spark read so the recount overlaps it: the consumer releases the GIL while
    it waits for and fetches messages, and it shares nothing with Spark's read. It also warms GX
    up in another thread (warm_up), so the gate does not pay for GX's import and first run.
    """
    background = _executor()
    background.submit(warm_up, config, batch)
    return background.submit(committed_record_count, config, batch)


def warm_up(config: PipelineConfig, batch: Batch | None = None) -> bool:
    """Import GX, open the cached context, build the pipeline's suite and, given a batch, validate
    the default suite on a one-row pandas frame of its first range (nothing is stored): GX's
    imports and first run cost seconds once per process. Never raises (the gate repeats each step
    and reports its errors): False if a step failed."""
    try:
        build_suite(config)
        # Through the module: tests point gx_context.gx_root at their own folder.
        root = gx_context.gx_root()
        with gx_context.gx_lock(root), quiet_gx():  # the config file only; nothing is stored
            context = gx_context.open_context(root)
        first = next((r for r in batch.ranges if r.end > r.start), None) if batch else None
        if first is None:
            return True
        with quiet_gx():
            import great_expectations as gx  # noqa: PLC0415 GX after gx_import.import_gx
            from great_expectations.expectations.expectation_configuration import ExpectationConfiguration  # noqa: PLC0415 GX after gx_import.import_gx
            from great_expectations.validator.v1_validator import Validator  # noqa: PLC0415 GX after gx_import.import_gx

            identity = {
                "kafka_topic": [first.topic],
                "kafka_partition": [first.partition],
                "kafka_offset": [first.start],
            }
            frame = arrow_frame(pa.table(identity), [first])
            doc = default_suite_doc()
            suite = gx.ExpectationSuite(
                name=f"{config.name}.warm_up",
                expectations=[ExpectationConfiguration(**e).to_domain_obj() for e in doc["expectations"]],
            )
            data = (
                context.data_sources.get(gx_context.PANDAS_DATASOURCE)
                .get_asset(ASSET)
                .get_batch_definition(BATCH_DEFINITION)
            )
            Validator(data, RESULT_FORMAT, {"dataframe": frame}).validate_expectation_suite(
                suite, expectation_parameters={EXPECTED_ROWS: 1}
            )
            return True
    except Exception:  # the gate repeats each step and reports its error
        log.debug("GX warm-up failed; the gate will report the error", exc_info=True)
        return False


def cached_frame(config: PipelineConfig, rows: DataFrame, batch: Batch) -> DataFrame:
    """`rows` narrowed to the columns the suite reads, plus the range column, cached: GX runs
    several Spark jobs over the frame, which then read a few columns from memory, not the source."""
    from pyspark import StorageLevel  # noqa: PLC0415 JVM-free: the audit imports this module

    narrow = rows.select(*validated_columns(config, rows.columns))
    return with_range_column(narrow, batch.ranges).persist(StorageLevel.MEMORY_AND_DISK)


def gate(
    spark: SparkSession,
    config: PipelineConfig,
    batch: Batch,
    output_rows: DataFrame,
    quarantined: int,
    recount: Future[int] | None = None,
    staged: StagedWrite | None = None,
) -> dict[str, Any]:
    """Step 5: validate the batch's output rows before anything is written or committed.

    `quarantined` is the number of rows going to the quarantine table; rows + quarantined must
    equal the read_committed count of the batch's ranges. Returns the report (also logged, and
    stored as a GX validation result with a Data Docs page); raises QualityGateError naming the
    failed critical expectations and carrying the report, which the batch records on its row.

    `recount` is start_recount(config, batch), started before the Spark read; without it the
    count is made here, after the Spark work. `staged`, the write whose files `output_rows` reads
    back: pyarrow then reads the suite's columns from those files where it can (read_arrow).
    """
    del spark  # the frame carries its session; the parameter keeps gate and audit alike
    started = time.monotonic()
    expected = committed_record_count(config, batch) if recount is None else recount.result()
    columns = named_columns(config, output_rows.columns)
    if columns is not None:
        # The columns the suite reads, collected as Arrow: GX's checks then run in pandas, in
        # a fraction of a second, instead of a dozen Spark jobs (the same engine as the audit's).
        # A suite that may read any column stays on Spark: the rows are not collected whole.
        narrow = output_rows.select(*columns)
        table = None if staged is None else staged.read_arrow(narrow.schema, batch.batch_id)
        frame = arrow_frame(narrow.toArrow() if table is None else table, batch.ranges)
        result, result_id, report_path = validate(
            config, batch.batch_id, "gate", frame, expected - quarantined
        )
    else:
        cached = cached_frame(config, output_rows, batch)
        try:
            result, result_id, report_path = validate(
                config, batch.batch_id, "gate", cached, expected - quarantined
            )
        finally:
            cached.unpersist()
    counts = {"read_committed_records": expected, "quarantined_rows": quarantined}
    report = build_report(
        config, batch.batch_id, "gate", result, result_id, report_path, counts, time.monotonic() - started
    )
    if report["warnings"]:
        log.warning("batch %s gate warnings: %s", batch.batch_id, "; ".join(report["warnings"]))
    if report["success"]:
        log.info(
            "batch %s gate passed in %.1f s: %s",
            batch.batch_id,
            report["seconds"],
            json.dumps(report["statistics"]),
        )
        return report
    message = (
        f"batch {batch.batch_id} of pipeline {config.name!r} failed its quality gate: "
        + "; ".join(report["critical_failures"])
        + f" (read_committed records in the planned ranges: {expected}, quarantined: {quarantined};"
        f" report: {report_path})"
    )
    log.error("%s", message)
    raise QualityGateError(message, report)
