"""The Airflow DAG ids of a pipeline, in one place: the DAGs (eos_ingest/airflow/dags.py) are
created under them and the Ingestion page (eos_ingest/airflow/page_access.py) asks Airflow's auth manager
about them."""

from __future__ import annotations

from eos_ingest.config.pipeline_name import BACKFILL_PREFIX  # the config's name limit counts on it

INGEST_PREFIX = "eos_ingest__"
MAINTAIN_PREFIX = "eos_maintain__"  # no longer than BACKFILL_PREFIX (config/pipeline_name's name limit)
ALERTS_PREFIX = "eos_alerts__"  # no longer than BACKFILL_PREFIX either


def ingest_dag_id(pipeline: str) -> str:
    """The scheduled ingest DAG: plan -> spark_ingest -> validate -> publish."""
    return INGEST_PREFIX + pipeline


def backfill_dag_id(pipeline: str) -> str:
    """The manual backfill DAG."""
    return BACKFILL_PREFIX + pipeline


def maintain_dag_id(pipeline: str) -> str:
    """The table maintenance DAG (OPTIMIZE + VACUUM), made when the pipeline has `maintenance:`."""
    return MAINTAIN_PREFIX + pipeline


def alerts_dag_id(pipeline: str) -> str:
    """The lag alerts DAG (check_lag), made when the pipeline has `alerts:`."""
    return ALERTS_PREFIX + pipeline


def pipeline_dag_ids(pipeline: str) -> tuple[str, str]:
    """Both DAGs of a pipeline, the ingest DAG first."""
    return ingest_dag_id(pipeline), backfill_dag_id(pipeline)
