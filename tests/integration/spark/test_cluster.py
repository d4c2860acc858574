"""`eos-ingest run --master spark://…` on a real Spark standalone cluster (stack/spark.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.pipelines import verify_pipeline
from tests.fixtures.spark_cluster import assert_ran_on_cluster
from tests.kafka_helpers import TxProducer

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_run_on_a_standalone_cluster_runs_the_batch_in_the_workers_executors_exactly_once(
    spark, spark_cluster, kafka_bootstrap, make_topic, make_pipeline, tmp_path, monkeypatch
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "c", "amount": 1.5} for i in range(200)], commit=True)
    producer.transaction(
        topic, [{"id": 900 + i, "name": "x", "amount": 0.0} for i in range(30)], commit=False
    )
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
