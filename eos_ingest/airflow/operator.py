"""The spark_ingest task: spark-submit of the batch job, safe to retry."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException
from airflow.sdk.log import mask_secret

from eos_ingest.airflow.spark_provider_import import import_spark_submit
from eos_ingest.airflow.tasks import library_errors
from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.extras import needs_extra
from eos_ingest.spark.session import DELTA_CONF, local_jars, spark_submit_env
from eos_ingest.spark.submit import DRIVER_MEMORY, JOB_SCRIPT, job_conf, shipped
from eos_ingest.storage.object_stores import uses_object_store

# An official Airflow image has no Spark provider: the DAG folder's import error names the extra.
with needs_extra("airflow", "the ingest DAG's batch task (a SparkSubmitOperator)"):
    # Without OpenLineage's listener when OpenLineage is off: ~0.75 s of CPU per parse of the DAG file.
    import_spark_submit()
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

log = logging.getLogger(__name__)

_EXIT_CODE = re.compile(r"Error code is: (\d+)")
_FENCED_EXIT = 3  # the job (eos_ingest.errors.exit_code): a newer attempt owns the batch


def _spark_master(conn_id: str, pipeline: str) -> str:
    """The master SparkSubmitHook will use, read from the connection the same way it does. A
    connection that does not exist is refused: the hook would fall back to YARN, and spark-submit
    would then fail with a YARN error that names neither the connection nor the pipeline."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        other = "" if conn_id == "spark_default" else ", or leave spark_conn_id out for spark_default"
        raise AirflowFailException(
            f"the Airflow connection {conn_id!r} (spark_conn_id of pipeline {pipeline!r}) does not "
            "exist; create it (Admin -> Connections, type spark, host = the Spark master, e.g. "
            f"local[*] or spark://host:7077){other}"
        ) from None
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
            **{"driver_memory": DRIVER_MEMORY, **kwargs},  # the CLI's, not spark-submit's 1g
        )
        self.pipeline_file = pipeline_file
        # The config this run resolved (its Kafka connection joined), for the OpenLineage events.
        self.run_config: PipelineConfig | None = None

    def execute(self, context: Any) -> None:
        # When the task runs, not at DAG parsing: the Airflow connections' readers, the service layer
        # (control DB, Kafka clients) and the formats' table readers (pyarrow).
        from eos_ingest.connections import aws as aws_conn  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.connections import iceberg_rest as iceberg_rest_conn  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.connections import kafka as airflow_conn  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.connections import registry as registry_conn  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.service.operations import job_records, open_store  # noqa: PLC0415 out of DAG parsing
        from eos_ingest.storage.table_formats import uses_iceberg  # noqa: PLC0415 out of DAG parsing

        args = list(self.application_args or [])
        batch_id = int(args[args.index("--batch-id") + 1])
        catching_up = "--until-caught-up" in args and args[args.index("--until-caught-up") + 1] == "True"
        with library_errors():
            config, conn_settings = airflow_conn.config_from_airflow(load_pipeline(self.pipeline_file))
            self.run_config = config
            store = open_store(config)
            batch = store.get_batch(batch_id)
        if batch.status.value == "committed" and not catching_up:
            self.log.info("batch %s was committed by an earlier attempt: nothing to run", batch_id)
            return
        if batch.status.value not in ("planned", "committed"):
            raise AirflowFailException(f"batch {batch_id} is {batch.status.value}: {batch.error}")
        master = _spark_master(self._conn_id, config.name)
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
        with library_errors():
            registry_env = registry_conn.env_from_airflow(config)
        if registry_env and master.startswith(("yarn", "k8s")):
            raise AirflowFailException(
                "the Schema Registry connection would reach spark-submit's command line on master "
                f"{master}; give the driver its AIRFLOW_CONN_<ID> variable in the cluster instead"
            )
        env.update(registry_env)  # the job reads it as Airflow would (registry_conn.with_connection)
        with library_errors():
            rest_env = iceberg_rest_conn.env_from_airflow(config)
        if rest_env and master.startswith(("yarn", "k8s")):
            raise AirflowFailException(
                f"the Iceberg REST catalog's connection {config.output.catalog.conn_id!r} would reach "
                f"spark-submit's command line on master {master}; give the driver its "
                "AIRFLOW_CONN_<ID> variable in the cluster instead"
            )
        env.update(rest_env)  # the job's catalog reads it (storage/iceberg/rest_auth.py)
        with library_errors():
            aws_vars = aws_conn.connection_from_airflow(config.aws_conn_id)
        if aws_vars and config.aws_conn_id:
            if master.startswith(("yarn", "k8s")) and aws_conn.SECRET_VARIABLES[0] in aws_vars:
                raise AirflowFailException(
                    f"aws connection {config.aws_conn_id!r} holds a secret key, and on master {master} "
                    "it would reach spark-submit's command line; give the cluster its own S3 access "
                    "(instance roles, a Kubernetes secret as the driver's AWS_* variables) instead"
                )
            # The job takes its S3 access from these variables (object_storage.S3Access.from_env).
            with library_errors():
                env.update(aws_conn.joined(aws_vars, os.environ, config.aws_conn_id))
        s3a = uses_object_store(config)
        iceberg = uses_iceberg(config)
        if s3a or iceberg:
            self.jars = ",".join(local_jars(object_storage=s3a, iceberg=iceberg))
        else:
            self.jars = self.jars or ",".join(local_jars())
        files = shipped(Path(self.pipeline_file))
        self.py_files, self.files = files["py_files"], files["files"]
        records = job_records(batch, config.max_records_per_partition, until_caught_up=catching_up)
        self.conf = {**job_conf(master, object_storage=s3a, job_records=records), **(self.conf or {})}
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
        from eos_ingest.airflow.lineage import operator_lineage  # noqa: PLC0415 out of DAG parsing: the listener's

        return operator_lineage(self.pipeline_file, None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from eos_ingest.airflow.lineage import operator_lineage  # noqa: PLC0415 out of DAG parsing: the listener's

        return operator_lineage(self.pipeline_file, self.run_config)

    def _explain_failure(self, store: Any, batch_id: int, exc: Exception, *, catching_up: bool) -> None:
        """Decide from the control store, the source of truth, whether a retry can help."""
        from eos_ingest.service.operations import unfinished_catch_up_batch  # noqa: PLC0415 out of DAG parsing

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
