"""Airflow DAG factory: two DAGs per pipeline file in the pipelines folder (three with `maintenance:`).

The pipelines folder is $EOS_PIPELINES_DIR, else ``pipelines/`` beside the DAGs folder
(config.default_pipelines_dir). A DAG file only calls this module (dags/eos_pipelines.py):

    from eos_ingest.airflow.dags import pipeline_dags
    globals().update(pipeline_dags(__file__))

- ``eos_ingest__<name>``: on the pipeline's schedule, plan -> spark_ingest -> validate -> publish.
- ``eos_backfill__<name>``: manual only; a trigger form asks for a topic, partitions, an offset
  range or a time window, and a reason; record_backfill -> spark_ingest -> validate -> publish.
- ``eos_maintain__<name>``: only for a pipeline file with a ``maintenance:`` block, on its
  schedule; one task running ``eos-ingest maintain`` (OPTIMIZE + VACUUM, docs/maintenance.md).
- ``eos_alerts__<name>``: only with an ``alerts:`` block; one task failing (and notifying) when the
  lag passes a limit (eos_ingest/airflow/alerts.py, docs/alerts.md).

Wiring only: every decision lives in eos_ingest (plan_batch, backfill, quality, airflow_conn) and
is tested without Airflow. A pipeline file that does not load is skipped here and reported, with
its file name, by report_broken_pipeline_files (the import error of dags/eos_pipeline_files.py), so
it never hides the others (nor does a DAG that Airflow would refuse: see _pipeline_dags).
Nothing here touches Kafka, a database or a connection while the file is parsed.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, BaseHook, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException, AirflowSkipException

from eos_ingest.airflow.dag_ids import backfill_dag_id, ingest_dag_id, maintain_dag_id
from eos_ingest.config.pipeline import PipelineConfig, default_pipelines_dir, load_pipeline
from eos_ingest.errors import ConfigError, EosIngestError
from eos_ingest.redact import redact_text
from eos_ingest.spark.session import DELTA_CONF
from eos_ingest.spark.submit import JOB_SCRIPT
from eos_ingest.storage.object_stores import table_uri

log = logging.getLogger(__name__)

DEFAULT_ARGS: dict[str, Any] = {"owner": "eos-ingest", "retries": 2, "retry_delay": timedelta(seconds=30)}
_EXIT_CODE = re.compile(r"Error code is: (\d+)")
_FENCED_EXIT = 3  # the job (eos_ingest.errors.exit_code): a newer attempt owns the batch
# validate runs once its upstreams are done, even if spark_ingest failed, as long as the batch id
# task succeeded: the committed batches of a catch-up are audited though a later batch failed.
VALIDATE_RULE = "all_done_min_one_success"


@contextmanager
def _library_errors() -> Iterator[None]:
    """Map eos_ingest errors to Airflow: only retriable ones (broker or DB silent) are retried."""
    try:
        yield
    except EosIngestError as exc:
        if exc.retriable:
            raise
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def _spark_master(conn_id: str) -> str:
    """The master SparkSubmitHook will use, read from the connection the same way it does."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return "yarn"  # SparkSubmitHook's default without a connection
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = conn.host
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master


class BatchSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of the job (submit.JOB_SCRIPT) for the batch id that `batch_task` returned.

    Safe to retry: a batch an earlier attempt already committed is not run again; a failed or
    abandoned one fails without retry; a planned one (after exit 75, a crash or a lost worker) is
    retried with the same ranges. The Kafka connection's settings go to the job in the
    environment (EOS_KAFKA_SETTINGS_JSON), set at execute time: after the templates are rendered
    and stored, so they never show in the UI, and never on the command line.
    """

    def __init__(
        self, *, pipeline_file: str, batch_task: str, until_caught_up: str | None = None, **kwargs: Any
    ) -> None:
        from eos_ingest.spark.session import local_jars

        xcom = f"{{{{ ti.xcom_pull(task_ids='{batch_task}') }}}}"
        # A template rendering to True or False (the ingest DAG's param): the job then runs the
        # next batches too, in the same Spark session, until caught up.
        catch_up = ["--until-caught-up", until_caught_up] if until_caught_up else []
        try:
            jars: str | None = ",".join(local_jars())
        except FileNotFoundError:
            jars = None  # resolved again in execute, where a missing jar fails the task clearly
        super().__init__(
            application=str(JOB_SCRIPT),
            # The pipeline YAML goes with --files and the job reads it by name (submit.shipped): on
            # a cluster the driver or the executors may run where the submitter's path does not exist.
            application_args=["--config-file", Path(pipeline_file).name, "--batch-id", xcom, *catch_up],
            # WARN: Spark's INFO lines would bury the job's own log lines in the task log.
            conf={**DELTA_CONF, "spark.log.level": "WARN"},
            jars=jars,
            name=f"eos-ingest-{Path(pipeline_file).stem}",
            **kwargs,
        )
        self.pipeline_file = pipeline_file
        # The config this run resolved (its Kafka connection joined), for the OpenLineage events.
        self.run_config: PipelineConfig | None = None

    def execute(self, context: Any) -> None:
        from airflow.sdk.log import mask_secret

        from eos_ingest.connections import aws as aws_conn
        from eos_ingest.connections import kafka as airflow_conn
        from eos_ingest.connections import registry as registry_conn
        from eos_ingest.service.operations import open_store
        from eos_ingest.spark.session import local_jars, spark_submit_env
        from eos_ingest.spark.submit import job_conf, shipped
        from eos_ingest.storage.object_stores import uses_object_store

        args = list(self.application_args or [])
        batch_id = int(args[args.index("--batch-id") + 1])
        catching_up = "--until-caught-up" in args and args[args.index("--until-caught-up") + 1] == "True"
        with _library_errors():
            config, conn_settings = airflow_conn.config_from_airflow(load_pipeline(self.pipeline_file))
            self.run_config = config
            store = open_store(config)
            batch = store.get_batch(batch_id)
        if batch.status.value == "committed" and not catching_up:
            self.log.info("batch %s was committed by an earlier attempt: nothing to run", batch_id)
            return
        if batch.status.value not in ("planned", "committed"):
            raise AirflowFailException(f"batch {batch_id} is {batch.status.value}: {batch.error}")
        master = _spark_master(self._conn_id)
        # Client mode on a standalone master, as on local: the driver runs here, with this side's
        # interpreter and state folder (spark_submit_env). YARN and Kubernetes bring their own.
        local = master.startswith(("local", "spark://"))
        env = {**(spark_submit_env(base={}) if local else {}), **(self.env_vars or {})}
        if conn_settings:
            if master.startswith(("yarn", "k8s")) and airflow_conn.secret_values(conn_settings):
                # SparkSubmitHook turns env_vars into --conf spark.*Env.* arguments on these masters.
                raise AirflowFailException(
                    f"Kafka connection {config.kafka_conn_id!r} holds secrets, and on master {master} "
                    "they would reach spark-submit's command line; keep the secrets in the cluster "
                    "(e.g. a Kubernetes secret as the driver's EOS_KAFKA_SETTINGS_JSON) instead"
                )
            env[airflow_conn.KAFKA_SETTINGS_ENV] = airflow_conn.encode_settings(conn_settings)
            mask_secret(env[airflow_conn.KAFKA_SETTINGS_ENV])
        with _library_errors():
            registry_env = registry_conn.env_from_airflow(config)
        if registry_env and master.startswith(("yarn", "k8s")):
            raise AirflowFailException(
                "the Schema Registry connection would reach spark-submit's command line on master "
                f"{master}; give the driver its AIRFLOW_CONN_<ID> variable in the cluster instead"
            )
        env.update(registry_env)  # the job reads it as Airflow would (registry_conn.with_connection)
        with _library_errors():
            aws_vars = aws_conn.connection_from_airflow(config.aws_conn_id)
        if aws_vars and config.aws_conn_id:
            if master.startswith(("yarn", "k8s")) and aws_conn.SECRET_VARIABLES[0] in aws_vars:
                raise AirflowFailException(
                    f"aws connection {config.aws_conn_id!r} holds a secret key, and on master {master} "
                    "it would reach spark-submit's command line; give the cluster its own S3 access "
                    "(instance roles, a Kubernetes secret as the driver's AWS_* variables) instead"
                )
            # The job takes its S3 access from these variables (object_storage.S3Access.from_env).
            with _library_errors():
                env.update(aws_conn.joined(aws_vars, os.environ, config.aws_conn_id))
        s3a = uses_object_store(config)
        self.jars = ",".join(local_jars(object_storage=True)) if s3a else self.jars or ",".join(local_jars())
        files = shipped(Path(self.pipeline_file))
        self.py_files, self.files = files["py_files"], files["files"]
        self.conf = {**job_conf(master, object_storage=s3a), **(self.conf or {})}
        rendered_env, self.env_vars = self.env_vars, env
        self.log.info("batch %s (%s): %s", batch_id, batch.kind.value, [f"{r}" for r in batch.ranges])
        try:
            super().execute(context)
        except Exception as exc:
            self._explain_failure(store, batch_id, exc, catching_up=catching_up)
        finally:
            self.env_vars = rendered_env

    # Asked for by the OpenLineage provider's listener when it is installed (docs/lineage.md): the
    # topics in, the table and its quarantine out. Never called, nor imported, without it.
    def get_openlineage_facets_on_start(self) -> Any:
        from eos_ingest.airflow.lineage import operator_lineage

        return operator_lineage(self.pipeline_file, None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from eos_ingest.airflow.lineage import operator_lineage

        return operator_lineage(self.pipeline_file, self.run_config)

    def _explain_failure(self, store: Any, batch_id: int, exc: Exception, *, catching_up: bool) -> None:
        """Decide from the control store, the source of truth, whether a retry can help."""
        from eos_ingest.service.operations import unfinished_catch_up_batch

        batch = store.get_batch(batch_id)
        found = _EXIT_CODE.search(str(exc))
        code = int(found.group(1)) if found else None
        if batch.status.value == "committed" and catching_up:
            # The run's first batches committed (validate still audits them), but a later one did
            # not: the task fails so that the run shows it, and a retry resumes a planned one.
            batch = unfinished_catch_up_batch(store, batch_id) or batch
            batch_id = batch.batch_id
        if batch.status.value == "committed":
            self.log.warning("spark-submit failed (%s) after batch %s committed: keeping it", code, batch_id)
            return
        if code == _FENCED_EXIT:
            raise AirflowFailException(
                f"batch {batch_id}: this attempt was fenced, another attempt owns the batch; "
                "nothing was committed by this one"
            ) from exc
        if batch.status.value != "planned":
            raise AirflowFailException(f"batch {batch_id} is {batch.status.value}: {batch.error}") from exc
        raise exc  # still planned (exit 75, a crash): a retry re-runs the same ranges


def _run_batches(config: PipelineConfig, batch_id: int) -> list[Any]:
    from eos_ingest.service.operations import open_store, run_batches

    return run_batches(open_store(config), config, batch_id)


def _validate(pipeline_file: str, batch_id: int) -> dict[str, Any]:
    """Audit the committed rows of the run's batches with Great Expectations; fail on a failed suite.

    Runs also when spark_ingest failed (VALIDATE_RULE): a catch-up whose later batch failed has
    committed batches that must still be audited; with nothing committed there is nothing to audit.
    """
    from eos_ingest.connections import aws as aws_conn
    from eos_ingest.connections.kafka import config_from_airflow
    from eos_ingest.service.operations import audit_batches

    with _library_errors():
        # The audit counts the committed records with a Kafka consumer: the connection's settings.
        config, _ = config_from_airflow(load_pipeline(pipeline_file))
        # s3a tables: delta-rs reads them with the AWS_* variables of this task's process.
        aws_conn.apply(config.aws_conn_id, aws_conn.connection_from_airflow(config.aws_conn_id))
        committed = [b for b in _run_batches(config, int(batch_id)) if b.status.value == "committed"]
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


def _publish(pipeline_file: str, batch_id: int, table: Asset) -> dict[str, Any]:
    """Log the run's batches and attach them to the table's Asset event (downstream DAGs see it)."""
    from eos_ingest.service.operations import batch_summary

    with _library_errors():
        batches = _run_batches(load_pipeline(pipeline_file), int(batch_id))
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


def _doc(config: PipelineConfig, what: str) -> str:
    return (
        f"{what}\n\n| | |\n|---|---|\n| pipeline file | `{config.source}` |\n"
        f"| topics | {', '.join(config.topics)} |\n| table | `{config.output_path}` |\n"
        f"| quarantine | `{config.quarantine_path}` |\n| Kafka connection | `{config.kafka_conn_id}` |\n"
        f"| schedule | `{config.schedule}` |\n\nSee docs/airflow.md."
    )


def _tail(config: PipelineConfig, batch_task: str, batch_id: Any, until_caught_up: str | None = None) -> None:
    """spark_ingest -> validate -> publish for the batch id returned by `batch_task`."""
    pipeline_file = str(config.source)
    table = Asset(uri=table_uri(config.output_path))
    spark = BatchSparkSubmitOperator(
        task_id="spark_ingest",
        pipeline_file=pipeline_file,
        batch_task=batch_task,
        until_caught_up=until_caught_up,
        conn_id="spark_default",
        retries=2,
        retry_delay=timedelta(minutes=1),
        execution_timeout=timedelta(hours=4),
    )
    validate = task(task_id="validate", retries=1, trigger_rule=VALIDATE_RULE)(_validate)(
        pipeline_file, batch_id
    )
    publish = task(task_id="publish", retries=1, outlets=[table])(_publish)(pipeline_file, batch_id, table)
    # publish also waits on spark_ingest itself: validate may run after spark_ingest failed, and
    # the run (whose state its leaves decide) must then fail, not succeed.
    batch_id >> spark >> validate >> publish
    spark >> publish


def ingest_dag(config: PipelineConfig) -> DAG:
    """``eos_ingest__<name>``: plan -> spark_ingest -> validate -> publish on the config's schedule."""
    pipeline_file = str(config.source)

    def plan() -> int | None:
        """Plan the next batch (or return the planned one unchanged); None skips the rest."""
        from eos_ingest.connections.kafka import config_from_airflow
        from eos_ingest.service.operations import open_store, plan_batch

        with _library_errors():
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
        doc_md=_doc(config, f"Exactly-once ingest of pipeline **{config.name}**: Kafka -> Delta."),
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
        from eos_ingest.connections.kafka import config_from_airflow
        from eos_ingest.service.backfill import PARAM_KEYS
        from eos_ingest.service.operations import open_store, record_backfill

        context = get_current_context()
        params = {k: context["params"].get(k) for k in PARAM_KEYS}
        with _library_errors():
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
        doc_md=_doc(config, f"Backfill of pipeline **{config.name}**: re-ingest a committed range."),
    ) as dag:
        batch_id = task(task_id="record_backfill", retries=2)(record_backfill)()
        _tail(config, "record_backfill", batch_id)
    return dag


def _maintain(pipeline_file: str) -> None:
    """Run ``eos-ingest maintain`` on the pipeline file, in a process of its own: its Spark
    session (local, as `verify`) starts and stops with it, not in the worker's process. The aws
    connection's access reaches it as AWS_* variables, never on the command line."""
    import subprocess
    import sys

    from eos_ingest.connections import aws as aws_conn
    from eos_ingest.spark.session import spark_submit_env

    with _library_errors():
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
        doc_md=_doc(config, doc),
    )


def maintain_dag(config: PipelineConfig) -> DAG:
    """``eos_maintain__<name>``: OPTIMIZE + VACUUM of the tables on `maintenance.schedule`."""
    assert config.maintenance is not None
    doc = f"Table maintenance of pipeline **{config.name}**: OPTIMIZE + VACUUM."
    with scheduled_dag(
        config, maintain_dag_id(config.name), config.maintenance.schedule, "maintenance", doc
    ) as dag:
        task(task_id="maintain", execution_timeout=timedelta(hours=4))(_maintain)(str(config.source))
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
        from eos_ingest.airflow.alerts import alerts_dag

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
                from eos_ingest.airflow.alerts import failure_callback

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
