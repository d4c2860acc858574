"""Execute one planned batch: fence, read, parse, write, commit (DESIGN.md steps 2-7).

A crash anywhere before the commit leaves the batch planned; the next attempt re-reads the same
ranges and the Delta replace makes the output identical. A zombie attempt is fenced at commit.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eos_ingest import parser, quality, writer
from eos_ingest.config import PipelineConfig
from eos_ingest.control_store import ControlStore
from eos_ingest.reader import read_ranges

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Fault injection for the exactly-once tests: when set to a path, the attempt writes its pid
# there after the Delta writes and waits (up to 10 minutes) while the file exists, so a test can
# kill -9 it between write and commit, or let a second attempt overtake it.
PAUSE_BEFORE_COMMIT_ENV = "EOS_FAULT_PAUSE_BEFORE_COMMIT"


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


def execute_batch(
    spark: SparkSession, config: PipelineConfig, store: ControlStore, batch_id: int, fence: int
) -> BatchResult:
    """Run a planned batch to its commit under `fence` (from store.take_fence).

    Raises FencedError at commit if a newer attempt took the fence meanwhile.
    """
    from pyspark import StorageLevel

    started = time.monotonic()
    batch = store.get_batch(batch_id)
    log.info("batch %s: fence %s, %s ranges", batch_id, fence, len(batch.ranges))

    log.info("batch %s: phase %s", batch_id, "read")
    kafka_rows = read_ranges(spark, config.kafka_settings, batch.ranges)
    # Persisted so the count, the table write and the quarantine write read Kafka once.
    parsed = parser.parse(kafka_rows, config, batch_id).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        good, bad = parser.count_split(parsed)
        rows = parser.output_rows(parsed, config)
        log.info("batch %s: phase %s", batch_id, "gate")
        quality.gate(spark, config, batch, rows, bad)  # raises QualityGateError: nothing written
        log.info("batch %s: phase %s", batch_id, "write")
        version = writer.replace_ranges(
            spark,
            rows,
            str(config.output_path),
            batch.ranges,
            batch_id,
            config.output.partition_by,
        )
        quarantine_version = writer.replace_ranges(
            spark, parser.quarantine_rows(parsed), str(config.quarantine_path), batch.ranges, batch_id
        )
    finally:
        parsed.unpersist()

    log.info("batch %s: phase %s", batch_id, "written")
    _pause_if_asked()
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
        batch_id, fence, good + bad, good, bad, version, quarantine_version, time.monotonic() - started
    )
    log.info("batch %s committed: %s", batch_id, result)
    return result


def _pause_if_asked() -> None:
    marker = os.environ.get(PAUSE_BEFORE_COMMIT_ENV)
    if not marker:
        return
    path = Path(marker)
    path.write_text(str(os.getpid()))
    deadline = time.monotonic() + 600
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
