"""The ingest DAG on a Spark standalone cluster, on the Airflow the e2e tests share: the pipeline's
`spark_conn_id` names a connection (made through the REST API, as in Admin -> Connections) whose
master is the one stack/spark.sh started, while the stack's other pipelines stay on spark_default
(local). The batch's tasks run in the worker's executors, with the library shipped as a zip
(--py-files) and the pipeline file by value (--files). Control DB on PostgreSQL.
"""

from __future__ import annotations

import re

import pytest

from eos_ingest.control.store import ControlStore
from tests.e2e.conftest import RUN_TIMEOUT_S, Stack
from tests.fixtures.pipelines import verify_pipeline, write_pipeline
from tests.fixtures.spark_cluster import assert_ran_on_cluster
from tests.kafka_helpers import TxProducer

pytestmark = pytest.mark.e2e

NAME = "dag_on_cluster"


@pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
def test_the_ingest_dag_runs_its_batch_on_the_cluster_its_spark_connection_names_exactly_once(
    stack: Stack, spark, spark_cluster, kafka_bootstrap, make_topic, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "d", "amount": 2.0} for i in range(120)], commit=True)
    producer.transaction(
        topic, [{"id": 900 + i, "name": "x", "amount": 0.0} for i in range(25)], commit=False
    )
    host, port = spark_cluster.master.rsplit(":", 1)
    api = stack.api
    api.add_connection(
        {"connection_id": "spark_cluster", "conn_type": "spark", "host": host, "port": int(port)}
    )
    # In the stack's pipelines folder (root/pipelines), so its DAG file picks the pipeline up.
    config = write_pipeline(
        stack.root,
        kafka_bootstrap,
        [topic],
        control_db_url,
        NAME,
        kafka_conn_id=None,
        spark_conn_id="spark_cluster",
    )
    try:
        dag_id = f"eos_ingest__{NAME}"
        api.wait_for_dag(dag_id)
        run_id = api.run(dag_id)
        state = api.wait_for_run(dag_id, run_id, RUN_TIMEOUT_S)
        states = api.task_states(dag_id, run_id)
        log = api.task_log(dag_id, run_id, "spark_ingest")
        assert state == "success", f"{states}\n{log[-5000:]}"
    finally:  # the other e2e tests see the stack's own pipelines only
        config.source.unlink()
        api.delete_connection("spark_cluster")

    store = ControlStore(config.control_db_url)
    (batch,) = store.list_batches(NAME)
    assert (batch.status.value, batch.records_written, batch.dq_success) == ("committed", 120, True)

    # The job's own line names its Spark application (the task log is JSON lines: the job's JSON
    # line shows with escaped quotes); the master lists it, so it ran there, not on spark_default.
    found = re.search(r'spark_application_id\\?": \\?"([^"\\]+)', log)
    assert found, log[-5000:]
    assert_ran_on_cluster(spark_cluster, found.group(1), f"eos-ingest-{NAME}", f"{NAME}.yaml")

    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 120 and report.duplicates == 0, report.to_dict()
