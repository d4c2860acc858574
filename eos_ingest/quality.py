"""Great Expectations gate and audit of a batch (README, "How exactly-once works", steps 5 and audit).

- gate: inside the Spark job, on the batch's output frame before anything is written or
  committed; a failed critical expectation raises QualityGateError, so the batch fails.
- audit_batch: after the commit, on the committed rows of the batch's ranges in the Delta table;
  the result and its Data Docs page are stored on the batch.

Both run one GX checkpoint (the pipeline's suite, then UpdateDataDocsAction) in a file context
rooted at <state folder>/gx, whose config and default suite come from expectations/ in the repo:
see docs/quality.md. `python -m eos_ingest.quality --config pipelines/x.yaml --batch-id N` audits
a batch from a shell.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from eos_ingest import paths
from eos_ingest.config import PipelineConfig, load_pipeline
from eos_ingest.control_store import Batch, BatchStatus, ControlStore
from eos_ingest.errors import BatchStateError, EosIngestError, QualityGateError
from eos_ingest.quality_suite import (
    EXPECTED_ROWS,
    build_suite,
    default_suite_doc,
    quiet_gx,
    summarize,
    validated_columns,
    with_range_column,
)
from eos_ingest.verify import merge_ranges, read_committed_counts
from eos_ingest.writer import ranges_predicate

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["audit_batch", "data_docs_index", "gate", "gx_root", "start_recount", "warm_up"]

log = logging.getLogger(__name__)

GX_TEMPLATE = paths.REPO_ROOT / "expectations" / "great_expectations.yml"
DATASOURCE, ASSET, BATCH_DEFINITION = "eos_spark", "batch_rows", "whole_frame"  # declared in the yml
SITE = "local_site"
# SUMMARY keeps a few unexpected values per expectation: enough to name the offending rows,
# small enough to store on the batch row.
RESULT_FORMAT: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 5}

_contexts: dict[Path, AbstractDataContext] = {}


def gx_root() -> Path:
    """The GX context's root: <state folder>/gx (config copy, suites, results, Data Docs)."""
    return paths.state_dir() / "gx"


def data_docs_index() -> Path:
    """The Data Docs home page (it lists the latest validations of every pipeline)."""
    return gx_root() / "data_docs" / "index.html"


@contextmanager
def _gx_lock(root: Path) -> Iterator[None]:
    """One GX run at a time per state folder: the Data Docs index, suites and checkpoints are
    shared files that GX rewrites without locking, and several tasks may validate at once."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _context(root: Path) -> AbstractDataContext:
    """The file context at `root`, created from the repo's template; cached per process.

    Call under _gx_lock. The template is copied only when it changed (atomically), so the
    context never writes into the repository and a running validation never sees half a file.
    """
    config_file = root / "great_expectations.yml"
    template = GX_TEMPLATE.read_text(encoding="utf-8")
    changed = not config_file.exists() or config_file.read_text(encoding="utf-8") != template
    if changed:
        partial = root / f".great_expectations.yml.{os.getpid()}"
        partial.write_text(template, encoding="utf-8")
        os.replace(partial, config_file)
    if changed or root not in _contexts:
        with quiet_gx():
            import great_expectations as gx

            _contexts[root] = gx.get_context(mode="file", context_root_dir=str(root))
    return _contexts[root]


def _report_path(context: AbstractDataContext, result_id: Any) -> str:
    """Absolute path of the validation's Data Docs page, else of the Data Docs index."""
    for site in context.get_docs_sites_urls(resource_identifier=result_id, site_names=[SITE]):
        url = site.get("site_url")
        if url and url.startswith("file://"):
            page = Path(unquote(urlparse(url).path))
            if page.is_file():
                return str(page)
    return str(data_docs_index())


def _validate(
    config: PipelineConfig, batch_id: int, stage: str, frame: DataFrame, expected_rows: int
) -> tuple[ExpectationSuiteValidationResult, str, str]:
    """Run the pipeline's checkpoint on `frame`: (suite result, result identifier, report path)."""
    with quiet_gx():
        import great_expectations as gx
        from great_expectations.checkpoint import UpdateDataDocsAction
        from great_expectations.core.run_identifier import RunIdentifier

    suite = build_suite(config)  # outside the lock: a ConfigError needs no GX files
    root = gx_root()
    with _gx_lock(root), quiet_gx():
        context = _context(root)
        suite = context.suites.add_or_update(suite)
        data = context.data_sources.get(DATASOURCE).get_asset(ASSET).get_batch_definition(BATCH_DEFINITION)
        name = f"{config.name}.{stage}"
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=data, suite=suite)
        )
        checkpoint = context.checkpoints.add_or_update(
            gx.Checkpoint(
                name=name,
                validation_definitions=[definition],
                actions=[UpdateDataDocsAction(name="update_data_docs", site_names=[SITE])],
                result_format=RESULT_FORMAT,
            )
        )
        run_id = RunIdentifier(run_name=f"{config.name}-batch-{batch_id}-{stage}")
        outcome = checkpoint.run(
            batch_parameters={"dataframe": frame},
            expectation_parameters={EXPECTED_ROWS: expected_rows},
            run_id=run_id,
        )
        ((result_id, result),) = outcome.run_results.items()
        return result, str(result_id), _report_path(context, result_id)


def committed_record_count(config: PipelineConfig, batch: Batch) -> int:
    """Records Kafka holds in the batch's ranges, counted by a plain read_committed consumer.

    Independent of the Spark read on purpose, and not end - start: transaction markers and
    aborted records leave gaps in the offsets. Counts per partition: memory does not grow with
    the records.
    """
    return sum(read_committed_counts(config.kafka_settings, merge_ranges(batch.ranges)).values())


_background: ThreadPoolExecutor | None = None


def start_recount(config: PipelineConfig, batch: Batch, spark: SparkSession | None = None) -> Future[int]:
    """committed_record_count in a background thread; hand the future to gate().

    Call it before the Spark read so the recount overlaps it: the consumer releases the GIL while
    it waits for and fetches messages, and it shares nothing with Spark's read. It also warms GX
    up in another thread (warm_up), so the gate does not pay for GX's import and first run.
    """
    global _background
    if _background is None:
        _background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="eos-gate")
    _background.submit(warm_up, config, batch, spark)
    return _background.submit(committed_record_count, config, batch)


def warm_up(config: PipelineConfig, batch: Batch | None = None, spark: SparkSession | None = None) -> bool:
    """Import GX, open the cached context, build the pipeline's suite and, given a session and a
    batch, validate the default suite on a one-row frame of the batch's first range (nothing is
    stored): GX's imports and the JVM's first compilation of its queries cost ~15 s once per
    process. Never raises (the gate repeats each step and reports its errors): False if a step failed."""
    try:
        build_suite(config)
        root = gx_root()
        with _gx_lock(root), quiet_gx():
            context = _context(root)
            first = next((r for r in batch.ranges if r.end > r.start), None) if batch else None
            if spark is None or first is None:
                return True
            import great_expectations as gx
            from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
            from great_expectations.validator.v1_validator import Validator

            schema = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT"
            one_row = spark.createDataFrame([(first.topic, first.partition, first.start)], schema)
            doc = default_suite_doc()
            suite = gx.ExpectationSuite(
                name=f"{config.name}.warm_up",
                expectations=[ExpectationConfiguration(**e).to_domain_obj() for e in doc["expectations"]],
            )
            data = (
                context.data_sources.get(DATASOURCE).get_asset(ASSET).get_batch_definition(BATCH_DEFINITION)
            )
            frame = with_range_column(one_row, [first])
            Validator(data, RESULT_FORMAT, {"dataframe": frame}).validate_expectation_suite(
                suite, expectation_parameters={EXPECTED_ROWS: 1}
            )
            return True
    except Exception:  # the gate repeats each step and reports its error
        log.debug("GX warm-up failed; the gate will report the error", exc_info=True)
        return False


def _cached_frame(config: PipelineConfig, rows: DataFrame, batch: Batch) -> DataFrame:
    """`rows` narrowed to the columns the suite reads, plus the range column, cached: GX runs
    several Spark jobs over the frame, which then read a few columns from memory, not the source."""
    from pyspark import StorageLevel

    narrow = rows.select(*validated_columns(config, rows.columns))
    return with_range_column(narrow, batch.ranges).persist(StorageLevel.MEMORY_AND_DISK)


def _report(
    config: PipelineConfig,
    batch_id: int,
    stage: str,
    result: ExpectationSuiteValidationResult,
    result_id: str,
    report_path: str,
    counts: dict[str, int],
    seconds: float,
) -> dict[str, Any]:
    summary = summarize(result)
    return {
        "batch_id": batch_id,
        "pipeline": config.name,
        "stage": stage,
        "success": not summary["critical_failures"],
        "statistics": {**summary["statistics"], **counts},
        "report_path": report_path,
        "failed_expectations": summary["failed_expectations"],
        "critical_failures": summary["critical_failures"],
        "warnings": summary["warnings"],
        "validation_result_id": result_id,
        "seconds": round(seconds, 2),
    }


def gate(
    spark: SparkSession,
    config: PipelineConfig,
    batch: Batch,
    output_rows: DataFrame,
    quarantined: int,
    recount: Future[int] | None = None,
) -> dict[str, Any]:
    """Step 5: validate the batch's output rows before anything is written or committed.

    `quarantined` is the number of rows going to the quarantine table; rows + quarantined must
    equal the read_committed count of the batch's ranges. Returns the report (also logged, and
    stored as a GX validation result with a Data Docs page); raises QualityGateError naming the
    failed critical expectations, and then records the report on the batch row.

    `recount` is start_recount(config, batch), started before the Spark read; without it the
    count is made here, after the Spark work.
    """
    del spark  # the frame carries its session; the parameter keeps gate and audit alike
    started = time.monotonic()
    expected = committed_record_count(config, batch) if recount is None else recount.result()
    frame = _cached_frame(config, output_rows, batch)
    try:
        result, result_id, report_path = _validate(
            config, batch.batch_id, "gate", frame, expected - quarantined
        )
    finally:
        frame.unpersist()
    counts = {"read_committed_records": expected, "quarantined_rows": quarantined}
    report = _report(
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
    _record(config, batch.batch_id, report, raise_errors=False)
    raise QualityGateError(message)


def _record(config: PipelineConfig, batch_id: int, report: dict[str, Any], *, raise_errors: bool) -> None:
    store = ControlStore(config.control_db_url)
    try:
        store.record_quality(
            batch_id,
            success=bool(report["success"]),
            result_json=json.dumps(report, default=str),
            report_path=report["report_path"],
        )
    except EosIngestError:
        if raise_errors:
            raise
        # The gate's own error is the one to report; a control DB hiccup must not mask it.
        log.exception("batch %s: could not store the gate result on the batch", batch_id)
    finally:
        store.close()


def _committed_rows(spark: SparkSession, path: Path, batch: Batch) -> DataFrame | None:
    """Rows of the batch's ranges, plus any row carrying its batch id outside them (which the
    range expectation then reports); None if the table does not exist."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not DeltaTable.isDeltaTable(spark, str(path)):
        return None
    rows = spark.read.format("delta").load(str(path))
    return rows.where(F.expr(ranges_predicate(batch.ranges)) | (F.col("batch_id") == batch.batch_id))


def audit_batch(config: PipelineConfig, batch_id: int, spark: SparkSession | None = None) -> dict[str, Any]:
    """Step 8: GX checkpoint over the committed rows of a committed batch's ranges.

    Uniqueness over those rows covers duplicates anywhere in the table for those ranges; the
    count check adds the quarantine table's rows. Updates Data Docs, stores the result on the batch
    row (ControlStore.record_quality) and returns {"batch_id", "success", "statistics",
    "report_path", "failed_expectations", ...}. Without `spark`, a local[2] session is built
    and stopped afterwards.
    """
    started = time.monotonic()
    store = ControlStore(config.control_db_url)
    try:
        batch = store.get_batch(batch_id)
    finally:
        store.close()
    if batch.pipeline != config.name:
        raise BatchStateError(f"batch {batch_id} belongs to pipeline {batch.pipeline!r}, not {config.name!r}")
    if batch.status is not BatchStatus.COMMITTED:
        raise BatchStateError(
            f"batch {batch_id} is {batch.status.value}: only a committed batch can be audited"
            + (f" (error: {batch.error})" if batch.error else "")
        )
    own_session = False
    if spark is None:
        from pyspark.sql import SparkSession

        from eos_ingest.spark_session import build_session

        # getOrCreate would hand back a session this process already runs: never stop that one.
        own_session = SparkSession.getActiveSession() is None
        spark = build_session("eos-ingest audit", master="local[2]")
    try:
        recount = start_recount(config, batch, spark)  # overlaps the Delta reads below
        rows = _committed_rows(spark, config.output_path, batch)
        if rows is None:
            raise BatchStateError(
                f"batch {batch_id} is committed but the output table {config.output_path} does not exist"
            )
        quarantine = _committed_rows(spark, config.quarantine_path, batch)
        quarantined = 0 if quarantine is None else quarantine.count()
        expected = recount.result()
        frame = _cached_frame(config, rows, batch)
        try:
            output_rows = frame.count()
            result, result_id, report_path = _validate(
                config, batch_id, "audit", frame, expected - quarantined
            )
        finally:
            frame.unpersist()
    finally:
        if own_session:
            spark.stop()
    counts = {"rows": output_rows, "quarantined_rows": quarantined, "read_committed_records": expected}
    report = _report(
        config, batch_id, "audit", result, result_id, report_path, counts, time.monotonic() - started
    )
    _record(config, batch_id, report, raise_errors=True)
    level = logging.INFO if report["success"] else logging.ERROR
    log.log(level, "batch %s audit: %s", batch_id, json.dumps(report, default=str))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eos_ingest.quality --config pipelines/x.yaml --batch-id N`: audit, print JSON."""
    parser = argparse.ArgumentParser(prog="python -m eos_ingest.quality", description=main.__doc__)
    parser.add_argument("--config", required=True, type=Path, help="the pipeline's YAML file")
    parser.add_argument("--batch-id", required=True, type=int, help="a committed batch of that pipeline")
    args = parser.parse_args(argv)
    try:
        report = audit_batch(load_pipeline(args.config), args.batch_id)
    except EosIngestError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, default=str))
    return 0 if report["success"] else 1


if __name__ == "__main__":
    sys.exit(main())
