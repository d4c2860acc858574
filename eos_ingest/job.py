"""The body of the spark-submit job, kept in the package so it is tested like the rest."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from eos_ingest.airflow_conn import KAFKA_SETTINGS_ENV, with_kafka_overrides
from eos_ingest.config import PipelineConfig, load_pipeline
from eos_ingest.control_store import Batch, BatchStatus, ControlStore
from eos_ingest.data_loss import spark_data_loss
from eos_ingest.errors import EosIngestError, FencedError
from eos_ingest.ingest import BatchResult, execute_batch
from eos_ingest.operations import catch_up_target, caught_up, plan_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def run_job(config_path: Path, batch_id: int, *, until_caught_up: bool = False) -> list[BatchResult]:
    """Execute a planned batch; with until_caught_up, then plan and execute the next ones.

    One Spark session serves every batch of the run, but each batch is still planned, fenced,
    gated, written and committed on its own, so a kill loses at most the batch in flight. The run
    ends when every partition has committed up to the last stable offsets read when the run
    starts (records produced later are the next run's), or when a plan finds nothing new.
    """
    from pyspark.sql import SparkSession

    # Kafka settings of the Airflow connection come in the environment, never on the command line.
    config = with_kafka_overrides(load_pipeline(config_path), os.environ.get(KAFKA_SETTINGS_ENV))
    store = ControlStore(config.control_db_url)
    store.ensure_schema()
    first = store.get_pipeline_batch(config.name, batch_id)  # never write another pipeline's ranges
    spark = SparkSession.builder.appName(f"eos-ingest {config.name} batch {batch_id}").getOrCreate()
    try:
        target = catch_up_target(config) if until_caught_up else {}
        # A catch-up retried after its first batch committed goes on with the next ones.
        resumed = until_caught_up and first.status is not BatchStatus.PLANNED
        results = [] if resumed else [run_one(spark, config, store, first)]
        if until_caught_up:
            while not caught_up(store.committed_offsets(config.name), target):
                log.info("pipeline %s: phase %s", config.name, "plan")
                batch, created = plan_batch(config, store, airflow_run_id=first.airflow_run_id)
                if batch is None:
                    break
                log.info("%s batch %s", "planned" if created else "resuming", batch.batch_id)
                results.append(run_one(spark, config, store, batch))
    finally:
        spark.stop()
    return results


def run_one(spark: SparkSession, config: PipelineConfig, store: ControlStore, batch: Batch) -> BatchResult:
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
        result = execute_batch(spark, config, store, batch_id, fence)
    except FencedError:
        raise  # the batch belongs to a newer attempt: leave it alone
    except EosIngestError as exc:
        if not exc.retriable:
            store.fail_batch(batch_id, fence, f"{type(exc).__name__}: {exc}")
        raise
    except Exception as exc:
        # Records deleted after the plan: a rerun would fail the same way, so fail the batch.
        lost = spark_data_loss(exc, config.name, batch_id, batch.ranges)
        if lost is None:
            raise
        store.fail_batch(batch_id, fence, f"{type(lost).__name__}: {lost}")
        raise lost from exc
    # The application id shows, in the job's output, that the batches of a catch-up shared one session.
    app_id = spark.sparkContext.applicationId
    print(json.dumps({"status": "committed", "spark_application_id": app_id, **result.__dict__}), flush=True)
    return result
