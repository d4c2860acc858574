"""OpenLineage from the ingest and backfill DAGs, through the real provider (docs/lineage.md).

The spark_ingest task of each DAG, as the DAG factory builds it, goes through the provider's own
ExtractorManager (what its listener calls on task start, success and failure), and the result is
emitted as real START/COMPLETE events by the provider's adapter into the OpenLineage client's
file transport, then read back. tests/integration/airflow/test_lineage_dag_run.py does the same through
a real DAG run and the provider's listener.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from eos_ingest import paths
from eos_ingest.airflow.lineage import kafka_namespace, table_dataset
from eos_ingest.config.pipeline import PipelineConfig, load_pipeline

# Airflow reads its config when first imported: a throw-away AIRFLOW_HOME, never ~/airflow; one
# per pytest-xdist worker, as each writes its airflow.cfg there.
os.environ.setdefault(
    "AIRFLOW_HOME",
    str(paths.state_dir() / f"airflow-unit-tests-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"),
)


def _pipeline(tmp_path: Path, **overrides: Any) -> PipelineConfig:
    doc: dict[str, Any] = {
        "name": "lin",
        "topics": ["orders", "refunds"],
        "kafka": {"bootstrap.servers": "broker-a:9093,broker-b:9093"},
        "kafka_conn_id": None,
        "value": {"format": "json", "schema": "id BIGINT"},
        "output": {"path": str(tmp_path / "tables" / "lin")},
        "control_db_url": f"sqlite:///{tmp_path / 'control.db'}",
        "schedule": None,
        **overrides,
    }
    doc = {k: v for k, v in doc.items() if v is not None or k in ("kafka_conn_id", "schedule")}
    path = tmp_path / "lin.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_pipeline(path)


def _spark_tasks(config: PipelineConfig) -> list[Any]:
    from eos_ingest.airflow.dags import backfill_dag, ingest_dag

    return [dag.get_task("spark_ingest") for dag in (ingest_dag(config), backfill_dag(config))]


def _extract(task: Any, state: str) -> Any:
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.state import TaskInstanceState

    dag_run = SimpleNamespace(run_id="manual__lineage")  # the manager only names it in its log lines
    return ExtractorManager().extract_metadata(dag_run, task, TaskInstanceState(state), task_instance=None)


def _names(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def test_names_follow_openlineage_naming() -> None:
    assert kafka_namespace("broker-a:9093, broker-b:9093") == "kafka://broker-a:9093"
    assert kafka_namespace("SASL_SSL://broker:9094") == "kafka://broker:9094"
    assert table_dataset(Path("/data/tables/t")) == ("file", "/data/tables/t")
    assert table_dataset("s3a://lake/tables/t") == ("s3://lake", "tables/t")


@pytest.mark.parametrize("state", ["running", "success", "failed"])
def test_spark_ingest_reports_the_topics_in_and_both_tables_out(tmp_path: Path, state: str) -> None:
    config = _pipeline(tmp_path)
    for task in _spark_tasks(config):
        lineage = _extract(task, state)

        assert _names(lineage.inputs) == [
            ("kafka://broker-a:9093", "orders"),
            ("kafka://broker-a:9093", "refunds"),
        ], task.dag_id
        assert _names(lineage.outputs) == [
            ("file", str(tmp_path / "tables" / "lin")),
            ("file", str(tmp_path / "tables" / "lin_quarantine")),
        ], task.dag_id


def test_start_names_the_topics_from_the_file_without_asking_for_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener runs the START extraction in a forked process, where a connection lookup can
    hang past its timeout and lose the event: the file's brokers, which a connection must agree
    with, are enough. A connection that would fail the lookup proves it is not asked."""
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "http", "host": "x"}))
    config = _pipeline(tmp_path, kafka_conn_id="kafka_default")

    lineage = _extract(_spark_tasks(config)[0], "running")

    assert {d.namespace for d in lineage.inputs} == {"kafka://broker-a:9093"}


def test_brokers_only_in_the_connection_name_the_topics_once_the_run_resolved_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eos_ingest.connections.kafka import config_from_airflow

    conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": "conn-broker:9095"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_LINEAGE", json.dumps(conn))
    config = _pipeline(tmp_path, kafka_conn_id="kafka_lineage", kafka=None)  # no kafka: in the file
    task = _spark_tasks(config)[0]

    start = _extract(task, "running")
    task.run_config, _ = config_from_airflow(config)  # what execute does first, before spark-submit
    complete = _extract(task, "success")

    assert start.inputs == [] and len(start.outputs) == 2  # not the file's default broker
    assert {d.namespace for d in complete.inputs} == {"kafka://conn-broker:9095"}
    assert len(complete.outputs) == 2


def test_spark_submit_gets_no_openlineage_properties_by_default(tmp_path: Path) -> None:
    """The Spark provider can add spark.openlineage.* to spark-submit (parent job, transport with
    its credentials on the command line): off unless [openlineage] spark_inject_* says so."""
    for task in _spark_tasks(_pipeline(tmp_path)):
        assert task._openlineage_inject_parent_job_info is False
        assert task._openlineage_inject_transport_info is False
        assert not [k for k in task.conf if k.startswith("spark.openlineage.")]


def test_s3a_tables_are_named_by_bucket_and_key(tmp_path: Path) -> None:
    config = _pipeline(
        tmp_path,
        output={"path": "s3a://lake/tables/lin"},
        control_db_url="postgresql+psycopg://eos@db.example/eos",  # never opened here
    )

    lineage = _extract(_spark_tasks(config)[0], "success")

    assert _names(lineage.outputs) == [("s3://lake", "tables/lin"), ("s3://lake", "tables/lin_quarantine")]


@pytest.mark.parametrize("warehouse", ["local", "s3a"])
def test_iceberg_tables_are_named_by_their_location_in_the_warehouse_and_so_is_the_asset(
    tmp_path: Path, warehouse: str
) -> None:
    """As OpenLineage's Spark integration names an Iceberg table: by its location, which the JDBC
    catalog makes <warehouse>/<namespace>/<table> (tests/integration/storage/iceberg/test_reader.py
    checks it against a real table)."""
    from airflow.sdk import Asset

    from eos_ingest.airflow.dags import ingest_dag

    path = str(tmp_path / "wh") if warehouse == "local" else "s3a://lake/wh"
    config = _pipeline(
        tmp_path,
        output={"format": "iceberg", "path": path, "table": "lake.events"},
        control_db_url="postgresql+psycopg://eos@db.example/eos",  # never opened here
    )

    lineage = _extract(_spark_tasks(config)[0], "success")

    if warehouse == "local":
        expected = [("file", f"{path}/lake/events"), ("file", f"{path}/lake/events_quarantine")]
        uri = Path(f"{path}/lake/events").as_uri()
    else:
        expected = [("s3://lake", "wh/lake/events"), ("s3://lake", "wh/lake/events_quarantine")]
        uri = "s3a://lake/wh/lake/events"
    assert _names(lineage.outputs) == expected
    assert ingest_dag(config).get_task("publish").outlets == [Asset(uri=uri)]


def test_the_provider_emits_start_and_complete_events_with_them(tmp_path: Path) -> None:
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.file import FileConfig, FileTransport

    events_file = tmp_path / "events.jsonl"
    transport = FileTransport(FileConfig(log_file_path=str(events_file), append=True))
    adapter = OpenLineageAdapter(client=OpenLineageClient(transport=transport))
    task = _spark_tasks(_pipeline(tmp_path))[0]
    common = {
        "run_id": "01890000-0000-7000-8000-000000000001",
        "job_name": f"{task.dag_id}.{task.task_id}",
        "job_description": None,
        "nominal_start_time": None,
        "nominal_end_time": None,
        "owners": ["eos-ingest"],
        "tags": [],
    }
    adapter.start_task(event_time="2026-01-01T00:00:00+00:00", task=_extract(task, "running"), **common)
    adapter.complete_task(end_time="2026-01-01T00:01:00+00:00", task=_extract(task, "success"), **common)

    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        assert event["job"]["name"] == "eos_ingest__lin.spark_ingest"
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
            ("kafka://broker-a:9093", "orders"),
            ("kafka://broker-a:9093", "refunds"),
        ]
        assert [d["name"] for d in event["outputs"]] == [
            str(tmp_path / "tables" / "lin"),
            str(tmp_path / "tables" / "lin_quarantine"),
        ]


def _module_level_imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    found = set()
    for node in tree.body:  # module level only: imports inside functions run when called
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_dags_import_neither_the_provider_nor_the_lineage_module_when_parsed() -> None:
    """The provider is optional (the package's `lineage` extra): only its listener, when it is
    installed, calls the operator's methods, which import eos_ingest.airflow.lineage, which imports it."""
    package = paths.REPO_ROOT / "eos_ingest"
    assert "eos_ingest.airflow.lineage" not in _module_level_imports(package / "airflow" / "dags.py")
    lineage_imports = _module_level_imports(package / "airflow" / "lineage.py")
    assert not [m for m in lineage_imports if "openlineage" in m], lineage_imports
