"""A real ingest DAG run emits OpenLineage events through the provider's listener (docs/lineage.md).

`dag.test()` runs plan and spark_ingest (a real spark-submit of the job on a real broker's topic,
writing a Delta table) in a process of its own, with the OpenLineage transport configured as a
user would: Airflow's [openlineage] section, here the file transport. validate and publish are
marked successful instead of run (GX and the Asset are tested elsewhere). The events of
spark_ingest are then read back from the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eos_ingest import paths
from eos_ingest.config.pipeline import PipelineConfig
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
RUN_DAG = """
import sys
from airflow.dag_processing.dagbag import DagBag

dag = DagBag().dags[sys.argv[1]]
run = dag.test(mark_success_pattern="^(validate|publish)$")
print("run state:", run.state)
"""


def _airflow_env(tmp_path: Path, config: PipelineConfig, events: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(paths.REPO_ROOT / "dags"),
        EOS_PIPELINES_DIR=str(config.source.parent),
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",  # spark-submit from the venv's pyspark
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[1]"}),
        # As scripts/airflow.sh sets it: the pipeline's kafka_conn_id (kafka_default), agreeing
        # with the file. The listener must not look it up in its forked process (eos_ingest.airflow.lineage).
        AIRFLOW_CONN_KAFKA_DEFAULT=json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": config.kafka["bootstrap.servers"]}}
        ),
        # What a user sets to turn OpenLineage on (docs/lineage.md): a transport.
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(events), "append": True}
        ),
        AIRFLOW__OPENLINEAGE__NAMESPACE="eos-test",
    )
    return env


def test_an_ingest_run_emits_start_and_complete_with_the_topic_and_both_tables(
    tmp_path: Path,
    kafka_bootstrap: str,
    topic: str,
    make_pipeline: Callable[..., PipelineConfig],
) -> None:
    producer = TxProducer(kafka_bootstrap)
    producer.begin()
    producer.send(topic, [{"id": i, "name": "x", "amount": 1.0} for i in range(20)])
    producer.send(topic, [b"not json"])  # so the quarantine table is written too
    producer.commit()
    config = make_pipeline([topic], f"sqlite:///{tmp_path / 'control.db'}", name="lin")
    events_file = tmp_path / "openlineage.jsonl"
    env = _airflow_env(tmp_path, config, events_file)

    migrate = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    run = subprocess.run(
        [sys.executable, "-c", RUN_DAG, "eos_ingest__lin"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0 and "run state: success" in run.stdout, (run.stdout + run.stderr)[-5000:]

    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    spark = [e for e in events if e["job"]["name"] == "eos_ingest__lin.spark_ingest"]
    assert [e["eventType"] for e in spark] == ["START", "COMPLETE"], [
        (e["job"]["name"], e["eventType"]) for e in events
    ]
    for event in spark:
        assert event["job"]["namespace"] == "eos-test"
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
            (f"kafka://{kafka_bootstrap}", topic)
        ]
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [
            ("file", str(config.output_path)),
            ("file", str(config.quarantine_path)),
        ]
    # The job did write both tables: the event names what exists.
    assert (Path(config.output_path) / "_delta_log").is_dir()
    assert (Path(config.quarantine_path) / "_delta_log").is_dir()
