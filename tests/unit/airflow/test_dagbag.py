"""The DAG folder as Airflow parses it, and the Kafka connection's way to the Spark job.

The DAG factory is read through Airflow's own DagBag, as the dag-processor reads it: import
errors, DAG ids for every pipeline file, run limits, the backfill trigger form and the Asset.
"""

from __future__ import annotations

import ast
import copy
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eos_ingest import paths
from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.spark.submit import DRIVER_MEMORY
from tests.helpers.dag_bag import DAGS, PIPELINES, dag_bag


def repo_pipelines() -> list[PipelineConfig]:
    return [load_pipeline(p) for p in sorted(PIPELINES.glob("*.yaml"))]


@pytest.fixture(scope="module")
def bag() -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield dag_bag(PIPELINES, monkeypatch)


def test_the_dag_folder_imports_without_errors(bag: Any) -> None:
    assert bag.import_errors == {}


def test_every_pipeline_has_an_ingest_and_a_backfill_dag(bag: Any) -> None:
    names = [c.name for c in repo_pipelines()]

    assert names, "pipelines/ holds at least the demo"
    assert sorted(bag.dag_ids) == sorted(
        [f"eos_ingest__{n}" for n in names] + [f"eos_backfill__{n}" for n in names]
    )


def test_the_ingest_dag_runs_one_at_a_time_on_the_pipeline_schedule(bag: Any) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    for config in repo_pipelines():
        dag = bag.dags[f"eos_ingest__{config.name}"]
        assert dag.max_active_runs == 1 and dag.catchup is False
        assert dag.schedule == config.schedule
        assert [t.task_id for t in dag.topological_sort()] == ["plan", "spark_ingest", "validate", "publish"]
        assert type(dag.get_task("plan")).__name__ == "_ShortCircuitDecoratedOperator"
        spark = dag.get_task("spark_ingest")
        assert isinstance(spark, SparkSubmitOperator)
        assert spark._conn_id == "spark_default"
        assert spark.application == str(paths.JOB_SCRIPT)
        assert spark._driver_memory == DRIVER_MEMORY  # as `eos-ingest run` submits it
        assert spark.application_args == [
            "--config-file", config.source.name, "--batch-id", "{{ ti.xcom_pull(task_ids='plan') }}",
            "--until-caught-up", "{{ params.until_caught_up }}",
        ]  # fmt: skip
        # One batch per run unless the trigger asks for the backlog (one Spark session, batch by batch).
        assert dag.params["until_caught_up"] is False
        assert spark.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
        assert "delta-spark" in spark.jars and "spark-sql-kafka" in spark.jars
        assert spark.retries >= 1
        # Nothing Kafka-related is a template field: it would be rendered and shown in the UI.
        assert not spark.env_vars


def test_the_backfill_dag_is_manual_with_a_documented_trigger_form(bag: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    config = load_pipeline(PIPELINES / "demo.yaml")
    dag = bag.dags["eos_backfill__demo"]
    assert dag.schedule is None and dag.max_active_runs == 1
    assert [t.task_id for t in dag.topological_sort()] == [
        "record_backfill", "spark_ingest", "validate", "publish",
    ]  # fmt: skip
    schema = {k: dag.params.get_param(k).schema for k in dag.params}
    described = {k: dag.params.get_param(k).description for k in dag.params}
    expected = ["topic", "partitions", "start_offset", "end_offset", "start_time", "end_time", "reason"]
    assert sorted(schema) == sorted(expected)
    assert all(schema[k].get("title") for k in expected), schema
    assert all(described[k] for k in expected), described
    assert schema["topic"]["enum"] == list(config.topics)
    assert schema["partitions"]["type"] == "array" and schema["partitions"]["items"]["type"] == "integer"
    assert schema["start_time"]["format"] == "date-time"
    assert schema["reason"]["minLength"] == 1
    # Required: no default, so a trigger without them is refused before a run exists.
    values = dag.params.dump()
    assert values["reason"] is None and values["partitions"] is None
    trigger = copy.deepcopy(dag.params)
    trigger.update({"partitions": [0], "start_offset": 0, "end_offset": 5})
    with pytest.raises(ParamValidationError, match="reason"):
        trigger.validate()
    trigger["reason"] = "replay"
    assert trigger.validate()["topic"] == config.topics[0]


def test_publish_emits_the_table_asset(bag: Any) -> None:
    from airflow.sdk import Asset

    for config in repo_pipelines():
        table = Asset(uri=config.output_path.as_uri())
        for dag_id in (f"eos_ingest__{config.name}", f"eos_backfill__{config.name}"):
            assert bag.dags[dag_id].get_task("publish").outlets == [table]
        assert table.uri.startswith("file:///")


def test_a_broken_pipeline_file_is_an_import_error_naming_it_and_hides_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(PIPELINES / "demo.yaml", tmp_path / "demo.yaml")
    (tmp_path / "broken.yaml").write_text("name: broken\ntopics: [t]\nvalue: {format: json}\n")
    (tmp_path / "typo.yaml").write_text("name: typo\ntopics: [t]\nschedul: '@daily'\n")

    bag = dag_bag(tmp_path, monkeypatch)

    assert sorted(bag.dag_ids) == ["eos_backfill__demo", "eos_ingest__demo"]
    assert len(bag.import_errors) == 1
    (where, message), *_ = bag.import_errors.items()
    assert where.endswith("eos_pipeline_files.py")
    assert "2 pipeline file(s)" in message
    assert "broken.yaml: value.schema = None is not valid" in message
    assert "typo.yaml: schedul = '@daily' is not valid; unknown key (did you mean 'schedule'?)" in message


def test_without_eos_pipelines_dir_the_pipelines_folder_beside_the_dags_folder_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Airflow image: the repo's thin DAG files copied into some DAGs folder, pipelines/ beside
    it, the factory from the installed package; not the checkout's pipelines/."""
    from airflow.dag_processing.dagbag import DagBag

    dags, pipelines = tmp_path / "dags", tmp_path / "pipelines"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    pipelines.mkdir()
    (pipelines / "orders.yaml").write_text("name: orders\ntopics: [orders]\nvalue: {format: raw}\n")
    (pipelines / "typo.yaml").write_text("name: typo\ntopics: [t]\nschedul: '@daily'\n")
    monkeypatch.delenv("EOS_PIPELINES_DIR", raising=False)

    bag = DagBag(dag_folder=str(dags))

    assert sorted(bag.dag_ids) == ["eos_backfill__orders", "eos_ingest__orders"]
    assert [Path(where).name for where in bag.import_errors] == ["eos_pipeline_files.py"]
    assert "typo.yaml: schedul = '@daily' is not valid" in next(iter(bag.import_errors.values()))
    # The DAG files are thin: every line of code is in the installed factory.
    for file in dags.glob("*.py"):
        statements = ast.parse(file.read_text()).body  # a docstring, an import, a call
        assert len(statements) <= 3, (file.name, [ast.unparse(s) for s in statements])


def test_a_schedule_airflow_refuses_is_reported_with_its_file_and_hides_no_other_dag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(PIPELINES / "demo.yaml", tmp_path / "demo.yaml")
    (tmp_path / "nightly.yaml").write_text(
        "name: nightly\ntopics: [t]\nvalue: {format: raw}\nschedule: '99 99 * * *'\n"
    )

    bag = dag_bag(tmp_path, monkeypatch)

    assert sorted(bag.dag_ids) == ["eos_backfill__demo", "eos_ingest__demo"]
    # Airflow marks every DAG of a file that has an import error stale (no runs): a bad schedule
    # must be charged to eos_pipeline_files.py, which has no DAG, never to eos_pipelines.py.
    assert [Path(where).name for where in bag.import_errors] == ["eos_pipeline_files.py"]
    message = next(iter(bag.import_errors.values()))
    assert "nightly.yaml: schedule = '99 99 * * *' is not valid" in message
    assert "use a 5-field cron 'minute hour day-of-month month day-of-week'" in message


def test_a_pipeline_whose_dag_airflow_refuses_after_it_loads_gets_no_dag_and_hides_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The factory's own guard behind the config check: a rule the config does not know (here a
    schedule slipped past it) costs that pipeline its DAGs, never an import error of the factory."""
    from eos_ingest.airflow import dags as airflow_dags
    from eos_ingest.config.pipeline import load_pipeline as load

    shutil.copy(PIPELINES / "demo.yaml", tmp_path / "demo.yaml")
    (tmp_path / "nightly.yaml").write_text("name: nightly\ntopics: [t]\nvalue: {format: raw}\n")

    def load_past_the_check(path: str | Path) -> PipelineConfig:
        config = load(path)
        return config.model_copy(update={"schedule": "99 99 * * *"}) if config.name == "nightly" else config

    monkeypatch.setattr(airflow_dags, "load_pipeline", load_past_the_check)  # the installed factory's
    with caplog.at_level(logging.ERROR):
        bag = dag_bag(tmp_path, monkeypatch)

    assert sorted(bag.dag_ids) == ["eos_backfill__demo", "eos_ingest__demo"]
    assert bag.import_errors == {}
    assert "nightly.yaml: no DAG, Airflow refuses it" in caplog.text


# -- the Kafka connection on its way to the Spark job ----------------------------------------------


def test_connection_settings_join_the_file_and_secrets_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    from eos_ingest.connections.kafka import config_from_airflow, secret_values, shown_settings

    config = load_pipeline(PIPELINES / "demo.yaml")
    extra = {
        "bootstrap.servers": config.kafka["bootstrap.servers"],  # the same cluster as the file's
        "sasl.password": "canary-pw-123",
        "enable.idempotence": True,
    }
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "kafka", "extra": extra}))

    merged, from_conn = config_from_airflow(config)

    assert from_conn == {"bootstrap.servers": config.kafka["bootstrap.servers"],
                         "sasl.password": "canary-pw-123", "enable.idempotence": "true"}  # fmt: skip
    assert merged.kafka == {**config.kafka, **from_conn}
    assert secret_values(merged.kafka) == ["canary-pw-123"]
    assert shown_settings(merged.kafka)["sasl.password"] == "***"


def test_a_connection_naming_another_cluster_than_the_file_is_refused_in_airflow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from eos_ingest.connections.kafka import config_from_airflow
    from eos_ingest.errors import ConfigError

    extra = {"bootstrap.servers": "broker:9093"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "kafka", "extra": extra}))
    config = load_pipeline(PIPELINES / "demo.yaml")  # names its own bootstrap.servers

    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers is .* in the file but 'broker:9093' in "
                       r"Airflow connection 'kafka_default'.*one cluster"):  # fmt: skip
        config_from_airflow(config)


def test_a_missing_connection_leaves_the_file_settings_and_a_wrong_type_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from eos_ingest.connections.kafka import config_from_airflow
    from eos_ingest.errors import ConfigError

    config = load_pipeline(PIPELINES / "demo.yaml")
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_DEFAULT", raising=False)
    assert config_from_airflow(config) == (config, None)

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "spark", "host": "local"}))
    with pytest.raises(ConfigError, match=r"conn_type 'spark'; eos-ingest needs .* 'kafka'"):
        config_from_airflow(config)


def test_the_job_joins_the_settings_env_with_the_file_and_never_echoes_a_bad_value() -> None:
    from eos_ingest.connections.kafka import encode_settings, settings_from_extra, with_kafka_overrides
    from eos_ingest.errors import ConfigError

    config = load_pipeline(PIPELINES / "demo.yaml")
    merged = with_kafka_overrides(config, encode_settings({"sasl.password": "pw"}))
    assert merged.kafka == {**config.kafka, "sasl.password": "pw"}
    assert with_kafka_overrides(config, None) is config and with_kafka_overrides(config, "") is config

    with pytest.raises(ConfigError) as bad:
        with_kafka_overrides(config, '{"sasl.password": "leaky-secret"')
    assert "leaky-secret" not in str(bad.value)
    with pytest.raises(ConfigError, match="JSON object of strings"):
        with_kafka_overrides(config, '{"retries": 3}')
    with pytest.raises(ConfigError, match="'oauth_cb' is a Python callback"):
        settings_from_extra({"oauth_cb": "pkg.cb"}, "kafka_default")
    with pytest.raises(ConfigError, match="has a dict value"):
        settings_from_extra({"bootstrap.servers": {"a": 1}}, "kafka_default")


# -- the aws connection of an s3a pipeline on its way to the Spark job and the audit ----------------

AWS_CONN = {
    "conn_type": "aws",
    "login": "AKIALAKEKEY",
    "password": "lake-secret-canary",
    "extra": {"endpoint_url": "http://127.0.0.1:9555", "region_name": "eu-west-1"},
}


def execute_ingest_task(dag: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Execute `dag`'s spark_ingest for batch 7 of lake.yaml, planned (a stand-in control store's
    answer), up to spark-submit, and return what SparkSubmitOperator got: env, conf and jars."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from eos_ingest.service import operations

    task = copy.copy(dag.get_task("spark_ingest"))
    task.application_args = ["--config-file", "lake.yaml", "--batch-id", "7", "--until-caught-up", "False"]

    class Planned:  # the control store's answer for batch 7
        status = kind = type("Value", (), {"value": "planned"})()
        ranges: tuple[()] = ()

    store = type("Store", (), {"get_batch": lambda self, batch_id: Planned()})()
    monkeypatch.setattr(operations, "open_store", lambda config: store)
    submitted: dict[str, Any] = {}

    def spark_submit(self: SparkSubmitOperator, context: Any) -> None:
        submitted.update(env=dict(self.env_vars or {}), conf=dict(self.conf or {}), jars=self.jars)

    monkeypatch.setattr(SparkSubmitOperator, "execute", spark_submit)
    task.execute(context={})
    return submitted


def test_the_ingest_dag_gives_the_job_the_aws_connections_endpoint_and_keys_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark_ingest of an s3a pipeline with aws_conn_id: Airflow's own connection lookup (an aws
    connection read as a Connection object, without the Amazon provider installed) gives the
    spark-submit environment the AWS_* variables, the command line gets the coordinator's class
    and no secret. Only spark-submit itself is replaced."""

    from eos_ingest.connections import aws as aws_conn
    from eos_ingest.storage.object_stores import LOG_STORE_CLASS, S3Access

    doc = {
        "name": "lake", "topics": ["orders"], "value": {"format": "raw"}, "schedule": None,
        "kafka": {"bootstrap.servers": "127.0.0.1:9"}, "kafka_conn_id": None, "aws_conn_id": "lake_s3",
        "spark_conn_id": "spark_lake",
        "output": {"path": "s3a://lake/tables/orders"},
        "control_db_url": "postgresql+psycopg://eos@127.0.0.1:9/eos",  # never reached: the store is faked
    }  # fmt: skip
    (tmp_path / "lake.yaml").write_text(json.dumps(doc))
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_S3", json.dumps(AWS_CONN))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LAKE", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    dag = dag_bag(tmp_path, monkeypatch).dags["eos_ingest__lake"]
    assert dag.get_task("spark_ingest")._conn_id == "spark_lake"  # the pipeline's spark_conn_id
    submitted = execute_ingest_task(dag, monkeypatch)

    env = submitted["env"]
    assert {k: env[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")} == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9555", "AWS_ACCESS_KEY_ID": "AKIALAKEKEY",
        "AWS_SECRET_ACCESS_KEY": "lake-secret-canary", "AWS_REGION": "eu-west-1",
    }  # fmt: skip
    # What the job then makes of them: hadoop-aws's settings for that endpoint.
    assert S3Access.from_env(env).hadoop_conf()["fs.s3a.endpoint"] == "http://127.0.0.1:9555"
    assert submitted["conf"]["spark.delta.logStore.s3a.impl"] == LOG_STORE_CLASS
    assert "hadoop-aws" in submitted["jars"]
    assert "lake-secret-canary" not in json.dumps(submitted["conf"]) + submitted["jars"]

    # The validate task's way: the same variables joined into its own process for delta-rs.
    audit_env: dict[str, str] = {}
    aws_conn.apply("lake_s3", aws_conn.connection_from_airflow("lake_s3"), audit_env)
    assert audit_env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9555"
    assert audit_env["AWS_SECRET_ACCESS_KEY"] == "lake-secret-canary"


@pytest.mark.parametrize("spark_conn_id", ["spark_lakee", "spark_default"])
def test_a_spark_connection_that_does_not_exist_fails_the_task_naming_it_and_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_conn_id: str
) -> None:
    """Without the check, SparkSubmitHook falls back to master yarn and spark-submit fails with a
    YARN error that names neither the connection nor the pipeline."""
    from airflow.sdk.exceptions import AirflowFailException

    doc = {
        "name": "lake", "topics": ["orders"], "value": {"format": "raw"}, "schedule": None,
        "kafka": {"bootstrap.servers": "127.0.0.1:9"}, "kafka_conn_id": None, "spark_conn_id": spark_conn_id,
        "control_db_url": "postgresql+psycopg://eos@127.0.0.1:9/eos",  # never reached: the store is faked
    }  # fmt: skip
    (tmp_path / "lake.yaml").write_text(json.dumps(doc))
    monkeypatch.delenv(f"AIRFLOW_CONN_{spark_conn_id.upper()}", raising=False)
    dag = dag_bag(tmp_path, monkeypatch).dags["eos_ingest__lake"]

    with pytest.raises(AirflowFailException) as failed:
        execute_ingest_task(dag, monkeypatch)

    message = str(failed.value)
    assert (
        f"the Airflow connection '{spark_conn_id}' (spark_conn_id of pipeline 'lake') does not exist"
        in message
    )
    assert "create it (Admin -> Connections, type spark, host = the Spark master" in message
    assert ("leave spark_conn_id out for spark_default" in message) == (spark_conn_id != "spark_default")


def test_the_ingest_task_gives_the_job_the_iceberg_rest_catalogs_connection_in_its_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark_ingest of an Iceberg pipeline on a REST catalog (output.catalog.conn_id), through the
    DagBag: the DAG file parses without the connection (its doc, Asset and lineage names need no
    secret), and at run time the connection from Airflow's store reaches the job as
    AIRFLOW_CONN_<ID> in its environment, from which the job's catalog takes its OAuth2
    credential; nothing of it is on the command line."""
    from airflow.models.connection import Connection

    from eos_ingest.config.pipeline import load_pipeline
    from eos_ingest.storage.iceberg.catalog import IcebergCatalog

    catalog = {"type": "rest", "uri": "https://catalog.example/api", "conn_id": "lake_rest"}
    doc = {
        "name": "lake", "topics": ["orders"], "value": {"format": "raw"}, "schedule": None,
        "kafka": {"bootstrap.servers": "127.0.0.1:9"}, "kafka_conn_id": None,
        "output": {"format": "iceberg", "table": "lake.orders", "catalog": catalog},
        "control_db_url": "postgresql+psycopg://eos@127.0.0.1:9/eos",  # never reached: the store is faked
    }  # fmt: skip
    (tmp_path / "lake.yaml").write_text(json.dumps(doc))
    connections = {
        "lake_rest": Connection(
            conn_id="lake_rest", conn_type="http", login="client-7", password="rest-secret-canary"
        ),
        "spark_default": Connection(conn_id="spark_default", conn_type="spark", host="local[1]"),
    }  # Airflow's store, as the task sees it (the worker's environment has no AIRFLOW_CONN_LAKE_REST)
    monkeypatch.delenv("AIRFLOW_CONN_LAKE_REST", raising=False)
    bag = dag_bag(tmp_path, monkeypatch)
    assert bag.import_errors == {} and "eos_ingest__lake" in bag.dags, bag.import_errors
    assert "eos_lake.lake.orders" in (bag.dags["eos_ingest__lake"].doc_md or "")
    monkeypatch.setattr("airflow.sdk.BaseHook.get_connection", lambda conn_id: connections[conn_id])
    submitted = execute_ingest_task(bag.dags["eos_ingest__lake"], monkeypatch)

    env = submitted["env"]
    job_catalog = IcebergCatalog.of(load_pipeline(tmp_path / "lake.yaml"), env)
    assert job_catalog.spark_conf()["spark.sql.catalog.eos_lake.credential"] == "client-7:rest-secret-canary"
    assert "iceberg-spark-runtime" in submitted["jars"]
    assert "rest-secret-canary" not in json.dumps(submitted["conf"]) + submitted["jars"]


# -- table maintenance ---------------------------------------------------------------------------


def with_orders(folder: Path, maintenance: str) -> Path:
    """The demo and an orders pipeline with the given `maintenance:` block in `folder`."""
    shutil.copy(PIPELINES / "demo.yaml", folder / "demo.yaml")
    (folder / "orders.yaml").write_text(
        f"name: orders\ntopics: [orders]\nvalue: {{format: raw}}\nmaintenance: {maintenance}\n"
    )
    return folder


def test_a_maintenance_block_adds_a_maintain_dag_on_its_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_orders(tmp_path, "{schedule: '30 3 * * *', retention_hours: 200}")
    (tmp_path / "clicks.yaml").write_text(
        "name: clicks\ntopics: [c]\nvalue: {format: raw}\nmaintenance: {}\n"
    )

    bag = dag_bag(tmp_path, monkeypatch)

    assert bag.import_errors == {}
    assert sorted(d for d in bag.dag_ids if d.startswith("eos_maintain__")) == [
        "eos_maintain__clicks", "eos_maintain__orders",
    ]  # fmt: skip
    orders = bag.dags["eos_maintain__orders"]
    assert orders.schedule == "30 3 * * *"
    assert orders.max_active_runs == 1 and orders.catchup is False
    assert [t.task_id for t in orders.tasks] == ["maintain"]
    assert bag.dags["eos_maintain__clicks"].schedule == "@daily"  # the block's default
    assert "eos_maintain__demo" not in bag.dag_ids  # demo.yaml documents the block, commented


def test_a_bad_maintenance_block_is_refused_with_its_file_key_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_orders(tmp_path, "{schedule: 'daily', retention_hours: -1, keep: 3}")

    bag = dag_bag(tmp_path, monkeypatch)

    assert sorted(bag.dag_ids) == ["eos_backfill__demo", "eos_ingest__demo"]
    message = next(iter(bag.import_errors.values()))
    assert "orders.yaml: maintenance.schedule = 'daily' is not valid; use a 5-field cron" in message
    assert "orders.yaml: maintenance.retention_hours = -1 is not valid; use a number of hours >= 0" in message
    assert "orders.yaml: maintenance.keep = 3 is not valid; unknown key" in message


# -- lag alerts ----------------------------------------------------------------------------------

NOTIFIERS = """
from airflow.sdk import BaseNotifier

calls = []


def notify(context):
    calls.append(context)


class FileNotifier(BaseNotifier):
    def notify(self, context):
        calls.append(context)
"""


def with_alerts(folder: Path, alerts: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo and an orders pipeline with the given `alerts:` block; a notifiers module importable."""
    shutil.copy(PIPELINES / "demo.yaml", folder / "demo.yaml")
    (folder / "orders.yaml").write_text(
        f"name: orders\ntopics: [orders]\nvalue: {{format: raw}}\nalerts: {alerts}\n"
    )
    (folder / "eos_test_notifiers.py").write_text(NOTIFIERS)
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.mark.parametrize("callback", ["eos_test_notifiers.notify", "eos_test_notifiers.FileNotifier"])
def test_an_alerts_block_adds_an_alerts_dag_on_its_schedule_with_the_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, callback: str
) -> None:
    from airflow.sdk import BaseNotifier

    alerts = f"{{max_lag_records: 1000, schedule: '*/5 * * * *', on_failure_callback: {callback}}}"
    bag = dag_bag(with_alerts(tmp_path, alerts, monkeypatch), monkeypatch)

    assert bag.import_errors == {}
    assert [d for d in bag.dag_ids if d.startswith("eos_alerts__")] == ["eos_alerts__orders"]
    dag = bag.dags["eos_alerts__orders"]
    assert dag.schedule == "*/5 * * * *" and dag.max_active_runs == 1 and dag.catchup is False
    (check,) = dag.tasks
    assert check.task_id == "check_lag"
    callbacks = check.on_failure_callback
    (wired,) = callbacks if isinstance(callbacks, list) else [callbacks]
    if callback.endswith("FileNotifier"):
        assert isinstance(wired, BaseNotifier)  # the class, instantiated
    else:
        assert wired.__name__ == "notify"
    assert "eos_alerts__demo" not in bag.dag_ids  # demo.yaml documents the block, commented


def test_a_callback_that_does_not_import_costs_the_alerts_dag_only_and_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = with_alerts(
        tmp_path, "{max_lag_seconds: 60, on_failure_callback: eos_test_notifiers.nope}", monkeypatch
    )

    bag = dag_bag(folder, monkeypatch)

    assert "eos_ingest__orders" in bag.dag_ids and "eos_backfill__orders" in bag.dag_ids
    assert "eos_alerts__orders" not in bag.dag_ids
    message = next(iter(bag.import_errors.values()))
    assert "orders.yaml: alerts.on_failure_callback = 'eos_test_notifiers.nope' is not valid" in message
    assert "AttributeError" in message and "fix the path" in message
