"""The ingest DAG on a Spark standalone cluster: `spark_default` points at the master that
stack/spark.sh started, and the batch's tasks run in the worker's executors, with the library
shipped as a zip (--py-files) and the pipeline file by value (--files). Control DB on PostgreSQL.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eos_ingest.control.store import ControlStore
from tests.fixtures.pipelines import verify_pipeline
from tests.fixtures.spark_cluster import assert_ran_on_cluster
from tests.kafka_helpers import TxProducer

pytestmark = pytest.mark.e2e

RUN_TIMEOUT_S = 900


@pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
def test_the_ingest_dag_runs_its_batch_on_the_standalone_cluster_exactly_once(
    spark, spark_cluster, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path
) -> None:
    from tests.e2e.airflow_stack import running_airflow

    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "d", "amount": 2.0} for i in range(120)], commit=True)
    producer.transaction(
        topic, [{"id": 900 + i, "name": "x", "amount": 0.0} for i in range(25)], commit=False
    )
    config = make_pipeline([topic], control_db_url, name="dag_on_cluster", kafka_conn_id=None)
    host, port = spark_cluster.master.rsplit(":", 1)
    spark_default = json.dumps({"conn_type": "spark", "host": host, "port": int(port)})
    root = tmp_path / "airflow-cluster"
    root.mkdir()
    with running_airflow(root, Path(config.source).parent, {"AIRFLOW_CONN_SPARK_DEFAULT": spark_default}) as (
        api,
        _,
    ):
        dag_id = "eos_ingest__dag_on_cluster"
        api.wait_for_dag(dag_id)
        run_id = api.run(dag_id)
        state = api.wait_for_run(dag_id, run_id, RUN_TIMEOUT_S)
        states = api.task_states(dag_id, run_id)
        log = api.task_log(dag_id, run_id, "spark_ingest")
        assert state == "success", f"{states}\n{log[-5000:]}"

    store = ControlStore(config.control_db_url)
    (batch,) = store.list_batches("dag_on_cluster")
    assert (batch.status.value, batch.records_written, batch.dq_success) == ("committed", 120, True)

    # The job's own line names its Spark application (the task log is JSON lines: the job's JSON
    # line shows with escaped quotes).
    found = re.search(r'spark_application_id\\?": \\?"([^"\\]+)', log)
    assert found, log[-5000:]
    assert_ran_on_cluster(spark_cluster, found.group(1), "eos-ingest-dag_on_cluster", "dag_on_cluster.yaml")

    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 120 and report.duplicates == 0, report.to_dict()
