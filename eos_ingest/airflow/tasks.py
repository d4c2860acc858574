"""The bodies of the DAGs' Python tasks, and what every DAG of a pipeline shares (default
arguments, the doc panel, the side DAG on its own schedule, eos_ingest errors mapped to Airflow).

The service layer is imported inside the task bodies: it runs when a task runs, never while the
DAG file is parsed (it imports the control DB's drivers, the Kafka clients, the storage modules and
the quality gate's modules, which every parse would pay for; Spark and GX it loads only when used)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, get_current_context
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.errors import EosIngestError
from eos_ingest.redact import redact_text
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.table_names import QUARANTINE, TABLE, output_names

log = logging.getLogger(__name__)

DEFAULT_ARGS: dict[str, Any] = {"owner": "eos-ingest", "retries": 2, "retry_delay": timedelta(seconds=30)}


@contextmanager
def library_errors() -> Iterator[None]:
    """Map eos_ingest errors to Airflow: only retriable ones (broker or DB silent) are retried."""
    try:
        yield
    except EosIngestError as exc:
        if exc.retriable:
            raise
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def batches_of_run(config: PipelineConfig, batch_id: int) -> list[Any]:
    from eos_ingest.service.operations import open_store, run_batches  # noqa: PLC0415 out of DAG parsing

    return run_batches(open_store(config), config, batch_id)


def validate_batches(pipeline_file: str, batch_id: int) -> dict[str, Any]:
    """Audit the committed rows of the run's batches with Great Expectations; fail on a failed suite.

    Runs also when spark_ingest failed (VALIDATE_RULE): a catch-up whose later batch failed has
    committed batches that must still be audited; with nothing committed there is nothing to audit.
    """
    from eos_ingest.connections import aws as aws_conn  # noqa: PLC0415 out of DAG parsing
    from eos_ingest.connections.kafka import config_from_airflow  # noqa: PLC0415 out of DAG parsing
    from eos_ingest.service.operations import audit_batches  # noqa: PLC0415 out of DAG parsing

    with library_errors():
        # The audit counts the committed records with a Kafka consumer: the connection's settings.
        config, _ = config_from_airflow(load_pipeline(pipeline_file))
        # s3a tables: delta-rs reads them with the AWS_* variables of this task's process.
        aws_conn.apply(config.aws_conn_id, aws_conn.connection_from_airflow(config.aws_conn_id))
        committed = [b for b in batches_of_run(config, int(batch_id)) if b.status.value == "committed"]
        if not committed:
            raise AirflowSkipException(f"batch {batch_id} did not commit: nothing to audit")
        results = audit_batches(config, [b.batch_id for b in committed], audit_process=True)
    shown: dict[str, Any] = json.loads(json.dumps(results[0], default=str))
    if len(results) > 1:
        shown["batches"] = json.loads(json.dumps(results, default=str))
    get_current_context()["ti"].xcom_push(key="audit", value=shown)
    failed = [r for r in results if not r.get("success")]
    if failed:
        raise AirflowFailException(
            "; ".join(
                f"data quality failed for batch {r['batch_id']}: {r.get('failed_expectations')}; "
                f"report: {r.get('report_path')}"
                for r in failed
            )
        )
    return shown


def publish_batches(pipeline_file: str, batch_id: int, table: Asset) -> dict[str, Any]:
    """Log the run's batches and attach them to the table's Asset event (downstream DAGs see it)."""
    from eos_ingest.service.operations import batch_summary  # noqa: PLC0415 out of DAG parsing

    with library_errors():
        batches = batches_of_run(load_pipeline(pipeline_file), int(batch_id))
    batch = batches[0]
    if batch.status.value != "committed":
        raise AirflowFailException(f"batch {batch_id} is {batch.status.value}, not committed: {batch.error}")
    summary = {
        **batch_summary(batch),
        "table": table.uri,
        "dq_success": batch.dq_success,
        "dq_report_path": batch.dq_report_path,
        "airflow_run_id": batch.airflow_run_id,
    }
    extra = {
        k: summary[k] for k in ("batch_id", "kind", "records_written", "records_quarantined", "delta_version")
    }
    if len(batches) > 1:  # a catch-up: the totals of the run, and the table's version after its last batch
        summary["batches"] = [batch_summary(b) for b in batches]
        extra.update(
            batch_ids=[b.batch_id for b in batches],
            records_written=sum(b.records_written or 0 for b in batches),
            records_quarantined=sum(b.records_quarantined or 0 for b in batches),
            delta_version=batches[-1].delta_version,
        )
    get_current_context()["outlet_events"][table].extra = extra
    log.info("published batch %s: %s", batch_id, json.dumps(summary, default=str))
    return summary


def dag_doc(config: PipelineConfig, what: str) -> str:
    names = output_names(config)
    return (
        f"{what}\n\n| | |\n|---|---|\n| pipeline file | `{config.source}` |\n"
        f"| topics | {', '.join(config.topics)} |\n| table | `{names[TABLE].shown}` ({config.output.format}) |\n"
        f"| quarantine | `{names[QUARANTINE].shown}` |\n| Kafka connection | `{config.kafka_conn_id}` |\n"
        f"| schedule | `{config.schedule}` |\n\nSee docs/airflow.md."
    )


def run_maintain(pipeline_file: str) -> None:
    """Run ``eos-ingest maintain`` on the pipeline file, in a process of its own: its Spark
    session (local, as `verify`) starts and stops with it, not in the worker's process. The aws
    connection's access reaches it as AWS_* variables, never on the command line."""
    from eos_ingest.connections import aws as aws_conn  # noqa: PLC0415 out of DAG parsing

    with library_errors():
        config = load_pipeline(pipeline_file)
        env = spark_submit_env()
        aws_vars = aws_conn.connection_from_airflow(config.aws_conn_id)
        if aws_vars and config.aws_conn_id:
            env.update(aws_conn.joined(aws_vars, os.environ, config.aws_conn_id))
    argv = [sys.executable, "-m", "eos_ingest.cli", "maintain", "--config", pipeline_file]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    log.info("eos-ingest maintain: %s", done.stdout)
    if done.returncode != 0:
        message = f"eos-ingest maintain exited {done.returncode}: {redact_text(done.stderr[-2000:])}"
        # 2 is a refused input (a retention a planned batch still needs): a retry cannot help.
        if done.returncode == 2:
            raise AirflowFailException(message)
        raise RuntimeError(message)


def scheduled_dag(config: PipelineConfig, dag_id: str, schedule: str | None, kind: str, doc: str) -> DAG:
    """A pipeline's side DAG on its own schedule (maintenance, lag alerts): one run at a time, no
    catch-up of missed intervals; the caller adds its task inside `with`."""
    return DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        auto_register=False,  # exposed through the module globals only, once checked
        default_args=DEFAULT_ARGS,
        tags=["eos-ingest", kind, f"pipeline:{config.name}"],
        doc_md=dag_doc(config, doc),
    )
