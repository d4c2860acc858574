"""The audit of a committed batch (step 8): a GX checkpoint over its committed rows in the table.

Run by the ingest DAG's validate task and by `eos-ingest audit`, in a Spark session of its own
unless one is given. The count it checks comes from a plain read_committed consumer, as the gate's.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eos_ingest.config import PipelineConfig
from eos_ingest.control_store import Batch, BatchStatus, ControlStore
from eos_ingest.errors import BatchStateError
from eos_ingest.gx_context import validate
from eos_ingest.quality import cached_frame, start_recount
from eos_ingest.quality_report import build_report, record_report
from eos_ingest.writer import ranges_predicate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


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
        frame = cached_frame(config, rows, batch)
        try:
            output_rows = frame.count()
            result, result_id, report_path = validate(
                config, batch_id, "audit", frame, expected - quarantined
            )
        finally:
            frame.unpersist()
    finally:
        if own_session:
            spark.stop()
    counts = {"rows": output_rows, "quarantined_rows": quarantined, "read_committed_records": expected}
    report = build_report(
        config, batch_id, "audit", result, result_id, report_path, counts, time.monotonic() - started
    )
    record_report(config, batch_id, report, raise_errors=True)
    level = logging.INFO if report["success"] else logging.ERROR
    log.log(level, "batch %s audit: %s", batch_id, json.dumps(report, default=str))
    return report
