"""Airflow DAG factory: two DAGs per pipeline file in the pipelines folder (three with `maintenance:`).

The pipelines folder is $EOS_PIPELINES_DIR, else ``pipelines/`` beside the DAGs folder
(config.default_pipelines_dir). A DAG file only calls this module (dags/eos_pipelines.py):

    from eos_ingest.airflow.dags import pipeline_dags
    globals().update(pipeline_dags(__file__))

- ``eos_ingest__<name>``: on the pipeline's schedule, plan -> spark_ingest -> validate -> publish.
- ``eos_backfill__<name>``: manual only; a trigger form asks for a topic, partitions, an offset
  range or a time window, and a reason; record_backfill -> spark_ingest -> validate -> publish.
- ``eosrun_maintain__<name>``: only for a pipeline file with a ``maintenance:`` block, on its
  schedule; one task running ``eos-ingest maintain`` (OPTIMIZE + VACUUM, docs/maintenance.md).
- ``eos_alerts__<name>``: only with an ``alerts:`` block; one task failing (and notifying) when the
  lag passes a limit (eos_ingest/airflow/alerts.py, docs/alerts.md).

Wiring only: the spark_ingest operator is in operator.py, the Python tasks' bodies in tasks.py, and
every decision in the service layer (plan_batch, backfill, quality), tested without Airflow. A pipeline file that does not load is skipped here and reported, with
its file name, by report_broken_pipeline_files (the import error of dags/eos_pipeline_files.py), so
it never hides the others (nor does a DAG that Airflow would refuse: see _pipeline_dags).
Nothing here touches Kafka, a database or a connection while the file is parsed.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, Param, get_current_context, task

from eos_ingest.airflow.alerts import alerts_dag, failure_callback
from eos_ingest.airflow.dag_ids import backfill_dag_id, ingest_dag_id, maintain_dag_id
from eos_ingest.airflow.operator import BatchSparkSubmitOperator
from eos_ingest.airflow.tasks import (
    DEFAULT_ARGS,
    dag_doc,
    library_errors,
    publish_batches,
    run_maintain,
    scheduled_dag,
    validate_batches,
)
from eos_ingest.config.pipeline import PipelineConfig, default_pipelines_dir, load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.redact import redact_text
from eos_ingest.storage.table_names import TABLE, output_names

log = logging.getLogger(__name__)

# validate runs once its upstreams are done, even if spark_ingest failed, as long as the batch id
# task succeeded: the committed batches of a catch-up are audited though a later batch failed.
VALIDATE_RULE = "all_done_min_one_success"


def _tail(config: PipelineConfig, batch_task: str, batch_id: Any, until_caught_up: str | None = None) -> None:
    """spark_ingest -> validate -> publish for the batch id returned by `batch_task`."""
    pipeline_file = str(config.source)
    table = Asset(uri=output_names(config)[TABLE].uri)
    spark = BatchSparkSubmitOperator(
        task_id="spark_ingest",
        pipeline_file=pipeline_file,
        batch_task=batch_task,
        until_caught_up=until_caught_up,
        conn_id=config.spark_conn_id,
        retries=2,
        retry_delay=timedelta(minutes=1),
        execution_timeout=timedelta(hours=4),
    )
    validate = task(task_id="validate", retries=1, trigger_rule=VALIDATE_RULE)(validate_batches)(
        pipeline_file, batch_id
    )
    publish = task(task_id="publish", retries=1, outlets=[table])(publish_batches)(
        pipeline_file, batch_id, table
    )
    # publish also waits on spark_ingest itself: validate may run after spark_ingest failed, and
    # the run (whose state its leaves decide) must then fail, not succeed.
    batch_id >> spark >> validate >> publish
    spark >> publish


def ingest_dag(config: PipelineConfig) -> DAG:
    """``eos_ingest__<name>``: plan -> spark_ingest -> validate -> publish on the config's schedule."""
    pipeline_file = str(config.source)

    def plan() -> int | None:
        """Plan the next batch (or return the planned one unchanged); None skips the rest."""
        # When the task runs, not at DAG parsing: the Airflow connection's reader, the service layer.
        from eos_ingest.connections.kafka import config_from_airflow  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.service.operations import open_store, plan_batch  # noqa: PLC0415 out of DAG parsing

        with library_errors():
            merged, _ = config_from_airflow(load_pipeline(pipeline_file))
            run_id = get_current_context()["run_id"]
            batch, created = plan_batch(merged, open_store(merged), airflow_run_id=run_id)
        if batch is None:
            log.info("pipeline %s: nothing new below the last stable offsets; skipping", merged.name)
            return None
        log.info("%s batch %s: %s", "planned" if created else "resuming", batch.batch_id, batch.ranges)
        return batch.batch_id

    with DAG(
        dag_id=ingest_dag_id(config.name),
        schedule=config.schedule,
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        auto_register=False,  # exposed through the module globals only, once checked
        default_args=DEFAULT_ARGS,
        tags=["eos-ingest", f"pipeline:{config.name}"],
        doc_md=dag_doc(
            config,
            f"Exactly-once ingest of pipeline **{config.name}**: Kafka -> {config.output.format.capitalize()}.",
        ),
        params={
            "until_caught_up": Param(
                False,
                type="boolean",
                title="Until caught up",
                description="Run batch after batch in one Spark session until every partition has "
                "committed up to the last stable offsets of the start; each batch commits on its own.",
            )
        },
    ) as dag:
        batch_id = task.short_circuit(task_id="plan", retries=3)(plan)()
        _tail(config, "plan", batch_id, until_caught_up="{{ params.until_caught_up }}")
    return dag


def backfill_params(config: PipelineConfig) -> dict[str, Param]:
    """The trigger form of the backfill DAG (JSON schema; parse_request checks the rest)."""
    either = "Give start_offset and end_offset, or start_time and end_time, not both."
    return {
        "topic": Param(config.topics[0], type="string", enum=list(config.topics), title="Topic",
                       description="The Kafka topic to backfill (one of the pipeline's topics)."),
        # A JSON editor, not a multi-select: Airflow 3.3's form makes one only from a list of
        # `examples` known when the file is parsed, and the partitions are Kafka's (docs/ui.md).
        "partitions": Param(type="array", items={"type": "integer", "minimum": 0}, minItems=1,
                            title="Partitions", description="Partition numbers, e.g. [0, 1]."),
        "start_offset": Param(None, type=["null", "integer"], minimum=0, title="Start offset",
                              description=f"First offset to re-ingest (inclusive). {either}"),
        "end_offset": Param(None, type=["null", "integer"], minimum=0, title="End offset",
                            description="Offset to stop at (exclusive); at most the committed offset."),
        # format date-time: Airflow 3.3's form picks it in the user's time zone (the UI's setting,
        # the browser's by default) and sends it in UTC (ISO-8601 with Z), as parse_time reads it.
        "start_time": Param(None, type=["null", "string"], format="date-time", title="Start time",
                            description=f"In your time zone; the run gets it in UTC (inclusive). {either}"),
        "end_time": Param(None, type=["null", "string"], format="date-time", title="End time",
                          description="In your time zone; the run gets it in UTC (exclusive). "
                          "Translated to offsets per partition."),
        "reason": Param(type="string", minLength=1, title="Reason",
                        description="Why this backfill is needed; kept on the batch. Required."),
    }  # fmt: skip


def backfill_dag(config: PipelineConfig) -> DAG:
    """``eos_backfill__<name>``: manual; check and record a backfill batch, then run it."""
    pipeline_file = str(config.source)

    def record_backfill() -> int:
        """Refuse an invalid request before any work, else record the batch and return its id."""
        # When the task runs, not at DAG parsing: the Airflow connection's reader, the service layer.
        from eos_ingest.connections.kafka import config_from_airflow  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.service.backfill import PARAM_KEYS  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.service.operations import open_store, record_backfill  # noqa: PLC0415 out of DAG parsing

        context = get_current_context()
        params = {k: context["params"].get(k) for k in PARAM_KEYS}
        with library_errors():
            merged, _ = config_from_airflow(load_pipeline(pipeline_file))
            batch, request = record_backfill(
                merged, open_store(merged), params, airflow_run_id=context["run_id"]
            )
        log.info("backfill batch %s: %s", batch.batch_id, request.describe())
        return batch.batch_id

    with DAG(
        dag_id=backfill_dag_id(config.name),
        schedule=None,
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        auto_register=False,  # exposed through the module globals only, once checked
        default_args=DEFAULT_ARGS,
        params=backfill_params(config),
        tags=["eos-ingest", "backfill", f"pipeline:{config.name}"],
        doc_md=dag_doc(config, f"Backfill of pipeline **{config.name}**: re-ingest a committed range."),
    ) as dag:
        batch_id = task(task_id="record_backfill", retries=2)(record_backfill)()
        _tail(config, "record_backfill", batch_id)
    return dag


def maintain_dag(config: PipelineConfig) -> DAG:
    """``eosrun_maintain__<name>``: OPTIMIZE + VACUUM of the tables on `maintenance.schedule`."""
    assert config.maintenance is not None
    doc = f"Table maintenance of pipeline **{config.name}**: OPTIMIZE + VACUUM."
    with scheduled_dag(
        config, maintain_dag_id(config.name), config.maintenance.schedule, "maintenance", doc
    ) as dag:
        task(task_id="maintain", execution_timeout=timedelta(hours=4))(run_maintain)(str(config.source))
    return dag


def _pipeline_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yaml")) if folder.is_dir() else []


def _pipeline_dags(file: Path) -> list[DAG]:
    """The DAGs of one pipeline file (ingest, backfill, maintain if asked), or none when the file does not load or Airflow refuses one.

    Airflow marks every DAG of a file that has an import error stale (never run), so one pipeline
    must never raise here: load errors are reported by report_broken_pipeline_files, and the DAGs
    are checked as DagBag checks them (`validate`: the schedule, ...) before the module exposes them.
    """
    try:
        config = load_pipeline(file)
    except Exception:  # reported with its file name by report_broken_pipeline_files
        return []
    try:
        dags = [ingest_dag(config), backfill_dag(config)]
        if config.maintenance is not None:
            dags.append(maintain_dag(config))
        for dag in dags:
            dag.validate()
    except Exception:
        log.exception("pipeline file %s: no DAG, Airflow refuses it; the other pipelines are fine", file)
        return []
    if config.alerts is not None:
        # Apart: a callback that does not import costs the alerts DAG only (reported by
        # broken_pipeline_files), never the ingest.
        try:
            alerts = alerts_dag(config)
            alerts.validate()
            dags.append(alerts)
        except Exception:
            log.exception("pipeline file %s: no alerts DAG; its other DAGs are fine", file)
    return dags


def pipeline_dags(dag_file: str | Path) -> dict[str, DAG]:
    """Every pipeline's DAGs by id, for the calling DAG file's globals (the DAGs are not
    auto-registered: Airflow finds them as module globals). `dag_file` is that file's __file__:
    its folder is the DAGs folder, beside which ``pipelines/`` is looked for."""
    folder = default_pipelines_dir(Path(dag_file).absolute().parent)
    return {dag.dag_id: dag for file in _pipeline_files(folder) for dag in _pipeline_dags(file)}


def broken_pipeline_files(folder: Path) -> list[str]:
    """One line per pipeline file of `folder` that does not load: the file and why."""
    if not folder.is_dir():
        return [f"{folder}: the pipelines folder does not exist; create it or set EOS_PIPELINES_DIR"]
    broken = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            config = load_pipeline(path)
            if config.alerts is not None:
                failure_callback(config)
        except Exception as exc:  # an unexpected error must name its file too
            broken.append(
                str(exc)
                if isinstance(exc, ConfigError)
                else redact_text(f"{path}: {type(exc).__name__}: {exc}")
            )
    return broken


def report_broken_pipeline_files(dag_file: str | Path) -> None:
    """Raise ConfigError listing the pipeline files that do not load: called by a DAG file that
    defines no DAG, so Airflow shows the list as that file's import error, and nothing else."""
    broken = broken_pipeline_files(default_pipelines_dir(Path(dag_file).absolute().parent))
    if broken:
        raise ConfigError(
            f"{len(broken)} pipeline file(s) have no DAG until fixed (the other pipelines are fine):\n"
            + "\n".join(f"- {line}" for line in broken)
        )
