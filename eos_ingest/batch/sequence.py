"""The sequence of one planned batch: fence -> identity check -> read -> parse (and stage the
table's files) -> gate (the quarantine's replace staged beside it) -> write (publish the table, then
the quarantine table) -> commit (docs/exactly-once.md, "How exactly-once works", steps 2-7).

run_fenced takes the fence and decides what a failure does to the batch; the attempt under that
fence (batch/attempt.py, execute_batch) runs the steps. A crash anywhere before the commit leaves
the batch planned; the next attempt re-reads the same ranges and the replace makes the output
identical. A zombie attempt is fenced at commit.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from eos_ingest import paths
from eos_ingest.batch.attempt import BatchAttempt
from eos_ingest.batch.gate_step import GateStep, QualityGate
from eos_ingest.batch.result import BatchResult
from eos_ingest.errors import (
    CatalogAccessError,
    DiskFullError,
    EosIngestError,
    FencedError,
    SchemaEvolutionError,
)
from eos_ingest.plan.data_loss import spark_data_loss
from eos_ingest.redact import redact_text, secrets_of
from eos_ingest.spark.kafka_source import spark_kafka_timeout
from eos_ingest.storage.full_disks import disk_full_error, is_disk_full

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eos_ingest.config.pipeline import PipelineConfig
    from eos_ingest.control.store import Batch, ControlStore

log = logging.getLogger(__name__)


def run_fenced(
    spark: SparkSession,
    config: PipelineConfig,
    store: ControlStore,
    batch: Batch,
    gate: GateStep | None = None,
) -> BatchResult:
    """Take a new fence and execute a planned batch (`gate`: QualityGate unless given).

    A non-retriable error of ours (bad data for the gate, a write refused, ...) marks the batch
    failed with its text, under our fence only, so a zombie cannot fail a batch it lost; so does
    Spark's failOnDataLoss error (records deleted since the plan), as OffsetsLostError. Anything
    else (a broker restart mid-read, a killed executor) leaves it planned: a retry re-runs the
    same ranges and the replace makes the result identical.
    """
    batch_id = batch.batch_id
    fence = store.take_fence(batch_id)
    try:
        result = execute_batch(spark, config, store, batch, fence, gate)
    except FencedError:
        raise  # the batch belongs to a newer attempt: leave it alone
    except EosIngestError as exc:
        if is_disk_full(exc) and not isinstance(exc, DiskFullError):
            # A publish whose commit met a full disk (an unknown outcome, retriable): named as such.
            raise disk_full_error(exc, batch_id, _written_folders(config)) or exc from exc
        # A schema change under `fail`, or a catalog that refuses the pipeline's access, waits for
        # a person's fix, then a rerun: the batch stays planned.
        if not (exc.retriable or isinstance(exc, SchemaEvolutionError | CatalogAccessError)):
            store.fail_batch(batch_id, fence, _error_text(config, exc))
        raise
    except Exception as exc:
        # A broker that did not answer the read in time: retriable, the batch stays planned.
        unanswered = spark_kafka_timeout(
            exc, config.kafka_settings.get("bootstrap.servers", "?"), batch_id, config.kafka_timeout_seconds
        )
        if unanswered is not None:
            raise unanswered from exc
        # A full disk while Spark staged the files or the gate wrote its results: named, the batch
        # stays planned for the rerun.
        full = disk_full_error(exc, batch_id, _written_folders(config))
        if full is not None:
            raise full from exc
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
    spark: SparkSession,
    config: PipelineConfig,
    store: ControlStore,
    batch: Batch,
    fence: int,
    gate: GateStep | None = None,
) -> BatchResult:
    """Run a planned batch to its commit under `fence` (from store.take_fence): one BatchAttempt.

    Raises FencedError at commit if a newer attempt took the fence meanwhile.
    """
    return BatchAttempt(spark, config, store, batch, fence, gate or QualityGate()).run()


def _written_folders(config: PipelineConfig) -> tuple[str, ...]:
    """Where the batch writes files: Delta's two table folders, or an Iceberg table's warehouse
    (output_tables names Iceberg's tables, not folders), and the state folder, where the gate's
    GX context writes its results and Data Docs. A full disk names the fullest of them."""
    tables = (str(config.output.path),) if config.output.format == "iceberg" else config.output_tables
    return (*tables, str(paths.state_dir()))


def _error_text(config: PipelineConfig, exc: Exception) -> str:
    """The error as stored on the batch row (and shown by the UI): the config's secret values
    masked, besides what the control store redacts by pattern."""
    secrets = secrets_of(config.kafka) + secrets_of({"url": config.control_db_url})
    return redact_text(f"{type(exc).__name__}: {exc}", secrets)
