"""A Spark standalone cluster (stack/spark.sh, one start for both tests: they are in the shared e2e
unit of tests/scheduling.py), used two ways:

- `eos-ingest run --master spark://…` (SQLite control DB, through ${VAR} in the pipeline file);
- the ingest DAG, on the Airflow the e2e tests share: the pipeline's `spark_conn_id` names a
  connection (made through the REST API, as in Admin -> Connections) whose master is the cluster's,
  while the stack's other pipelines stay on spark_default (local). Control DB on PostgreSQL.

Either way the batch's tasks run in the worker's executors, with the library shipped as a zip
(--py-files) and the pipeline file by value (--files).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from eos_ingest.control.store import ControlStore
from tests.e2e.conftest import RUN_TIMEOUT_S, Stack
from tests.fixtures.pipelines import verify_pipeline, write_pipeline
from tests.fixtures.spark_cluster import assert_ran_on_cluster
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.e2e

NAME = "dag_on_cluster"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def produce(kafka_bootstrap: str, topic: str, committed: int, aborted: int) -> None:
    """`committed` records in a committed transaction, then `aborted` in an aborted one."""
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(
        topic, [{"id": i, "name": "c", "amount": 1.5} for i in range(committed)], commit=True
    )
    producer.transaction(
        topic, [{"id": 900 + i, "name": "x", "amount": 0.0} for i in range(aborted)], commit=False
    )


def test_run_on_a_standalone_cluster_runs_the_batch_in_the_workers_executors_exactly_once(
    spark, spark_cluster, kafka_bootstrap, make_topic, make_pipeline, tmp_path, monkeypatch
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap, topic, 200, 30)
    # The control DB path comes through ${VAR}, expanded by the job on the driver as before.
    monkeypatch.setenv("EOS_CLUSTER_TEST_DB", str(tmp_path / "control.db"))
    config = make_pipeline([topic], "sqlite:///${EOS_CLUSTER_TEST_DB}", name="on_cluster")
    env = dict(os.environ)
    # Nothing of the checkout on the job's path but what spark-submit ships: the worker's
    # executors get the package only through --py-files.
    env.pop("PYTHONPATH", None)

    done = subprocess.run(
        [sys.executable, "-m", "eos_ingest.cli", "run", "--config", str(config.source),
         "--master", spark_cluster.master],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    assert json.loads(done.stdout)["status"] == "committed"
    committed = [json.loads(x) for x in done.stderr.splitlines() if x.startswith('{"status": "committed"')]
    # Its tasks ran in the worker's executors, which fetched what spark-submit shipped.
    app_id = committed[0]["spark_application_id"]
    assert_ran_on_cluster(spark_cluster, app_id, "eos-ingest on_cluster batch 1", "on_cluster.yaml")

    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 200, report


@pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
def test_the_ingest_dag_runs_its_batch_on_the_cluster_its_spark_connection_names_exactly_once(
    stack: Stack, spark, spark_cluster, kafka_bootstrap, make_topic, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap, topic, 120, 25)
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
        api.reparse("eos_ingest__e2e")  # the DAG file of every pipeline: its new DAG shows in seconds
        api.wait_for_dag(dag_id)
        run_id = api.run(dag_id)
        state = api.wait_for_run(dag_id, run_id, RUN_TIMEOUT_S)
        states = api.task_states(dag_id, run_id)
        log = api.task_log(dag_id, run_id, "spark_ingest")
        assert state == "success", f"{states}\n{log[-5000:]}"
    finally:  # the other e2e tests see the stack's own pipelines only
        config.source.unlink()
        api.delete_connection("spark_cluster")
        api.reparse("eos_ingest__e2e")

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
