"""The audit of a committed batch (step 8): a GX checkpoint over its committed rows in the table.

Run by the ingest DAG's validate task and by `eos-ingest audit`. It reads the table through the
format's reader (storage/table_reader.py: delta-rs for Delta, pyiceberg for Iceberg), not Spark: no
JVM to start (the audit costs seconds, not a second Spark application), and the rows are read by
other code than the code that wrote them. GX validates them as a pandas frame with the same suite
as the gate.

The count it checks them against is the read_committed count of the batch's ranges that the
gate's plain consumer made before the commit: the gate refuses a batch whose rows + quarantined
rows differ from it, so a committed batch's records_read is that count. `recount=True` counts
Kafka again instead (as `eos-ingest verify` always does).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import Batch, BatchStatus, ControlStore
from eos_ingest.errors import BatchStateError
from eos_ingest.quality.context import validate
from eos_ingest.quality.gate import committed_record_count, preload_gx
from eos_ingest.quality.report import build_report, record_report
from eos_ingest.quality.rows import arrow_frame
from eos_ingest.quality.suite import validated_columns
from eos_ingest.storage.table_formats import output_reader
from eos_ingest.storage.table_names import QUARANTINE, TABLE
from eos_ingest.storage.table_reader import TableReader

log = logging.getLogger(__name__)


def _committed_count(reader: TableReader, which: str, batch: Batch) -> int:
    table = reader.open(which)
    return 0 if table is None else table.batch_rows(batch, ["batch_id"]).num_rows


def _committed_batch(config: PipelineConfig, store: ControlStore, batch_id: int) -> Batch:
    batch = store.get_batch(batch_id)
    if batch.pipeline != config.name:
        raise BatchStateError(f"batch {batch_id} belongs to pipeline {batch.pipeline!r}, not {config.name!r}")
    if batch.status is not BatchStatus.COMMITTED:
        raise BatchStateError(
            f"batch {batch_id} is {batch.status.value}: only a committed batch can be audited"
            + (f" (error: {batch.error})" if batch.error else "")
        )
    return batch


def audit_batch(config: PipelineConfig, batch_id: int, *, recount: bool = False) -> dict[str, Any]:
    """Step 8: GX checkpoint over the committed rows of a committed batch's ranges.

    Uniqueness over those rows covers duplicates anywhere in the table for those ranges; the
    count check adds the quarantine table's rows. Updates Data Docs, stores the result on the batch
    row (ControlStore.record_quality) and returns {"batch_id", "success", "statistics",
    "report_path", "failed_expectations", ...}.
    """
    started = time.monotonic()
    # GX's import (~2 s of CPU, most of a fresh process's audit) overlaps the reads below, which
    # wait on the control DB and on the reader's (delta-rs's, pyarrow's) own threads.
    preload_gx()
    store = ControlStore(config.control_db_url)  # the audit's one store: reads the batch, records the report
    try:
        return _audit(config, store, batch_id, recount, started)
    finally:
        store.close()


def _audit(
    config: PipelineConfig, store: ControlStore, batch_id: int, recount: bool, started: float
) -> dict[str, Any]:
    batch = _committed_batch(config, store, batch_id)
    reader = output_reader(config)
    published = reader.open(TABLE)
    if published is None:
        raise BatchStateError(
            f"batch {batch_id} is committed but the output table {reader.name(TABLE).shown} does not exist"
        )
    rows = published.batch_rows(batch, validated_columns(config, published.column_names()))
    frame = arrow_frame(rows, batch.ranges)
    quarantined = _committed_count(reader, QUARANTINE, batch)
    if recount or batch.records_read is None:
        expected, source = committed_record_count(config, batch), "recounted from Kafka"
    else:
        expected, source = int(batch.records_read), "counted by the gate's consumer before the commit"
    result, result_id, report_path = validate(config, batch_id, "audit", frame, expected - quarantined)
    counts = {"rows": len(frame), "quarantined_rows": quarantined, "read_committed_records": expected}
    report = build_report(
        config, batch_id, "audit", result, result_id, report_path, counts, time.monotonic() - started
    )
    report["read_committed_records_source"] = source
    record_report(store, batch_id, report, raise_errors=True)
    level = logging.INFO if report["success"] else logging.ERROR
    log.log(level, "batch %s audit: %s", batch_id, json.dumps(report, default=str))
    return report
