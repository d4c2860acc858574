"""The body of the spark-submit job, kept in the package so it is tested like the rest."""

from __future__ import annotations

import json
import os
from pathlib import Path

from eos_ingest.airflow_conn import KAFKA_SETTINGS_ENV, with_kafka_overrides
from eos_ingest.config import load_pipeline
from eos_ingest.control_store import ControlStore
from eos_ingest.data_loss import spark_data_loss
from eos_ingest.errors import EosIngestError, FencedError
from eos_ingest.ingest import BatchResult, execute_batch


def run_job(config_path: Path, batch_id: int) -> BatchResult:
    """Take a new fence and execute a planned batch.

    A non-retriable error of ours (bad data for the gate, a write refused, ...) marks the batch
    failed with its text, under our fence only, so a zombie cannot fail a batch it lost; so does
    Spark's failOnDataLoss error (records deleted since the plan), as OffsetsLostError. Anything
    else (a broker restart mid-read, a killed executor) leaves it planned: a retry re-runs the
    same ranges and the replace makes the result identical. A batch of another pipeline is
    refused (BatchStateError) before the fence is taken.
    """
    from pyspark.sql import SparkSession

    # Kafka settings of the Airflow connection come in the environment, never on the command line.
    config = with_kafka_overrides(load_pipeline(config_path), os.environ.get(KAFKA_SETTINGS_ENV))
    store = ControlStore(config.control_db_url)
    store.ensure_schema()
    batch = store.get_pipeline_batch(config.name, batch_id)  # never write another pipeline's ranges
    fence = store.take_fence(batch_id)
    spark = SparkSession.builder.appName(f"eos-ingest {config.name} batch {batch_id}").getOrCreate()
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
    finally:
        spark.stop()
    print(json.dumps({"status": "committed", **result.__dict__}))
    return result
