"""The ingest DAG over SASL_SSL, its settings from an Airflow connection of the Kafka provider's type.

`airflow standalone` (scripts/airflow.sh) runs the ingest DAG of `tls.yaml`, a file without a
`kafka:` section: everything comes from the connection `kafka_tls` (AIRFLOW_CONN_KAFKA_TLS), whose
extra holds security.protocol, sasl.mechanism, sasl.username, sasl.password and ssl.ca.location
of the session broker's SASL_SSL listener. The file's built-in default points where nothing
listens, so a committed batch proves the planner, the Spark job and the audit all read over TLS.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from eos_ingest.control_schema import BatchStatus
from eos_ingest.control_store import ControlStore
from tests.e2e.airflow_stack import running_airflow
from tests.fixtures.kafka import SaslSslListener
from tests.kafka_helpers import TxProducer

pytestmark = pytest.mark.e2e

RUN_TIMEOUT_S = 900
DAG = "eos_ingest__tls"


def test_the_ingest_dag_reads_over_sasl_ssl_through_a_kafka_connection(
    tmp_path: Path, kafka_bootstrap: str, kafka_sasl_ssl: SaslSslListener
) -> None:
    topic = f"tls_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=60)
    TxProducer(kafka_bootstrap).transaction(topic, [{"id": i} for i in range(20)], commit=True)
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    control_db = f"sqlite:///{tmp_path / 'control.db'}"
    doc = {
        "name": "tls",
        "topics": [topic],
        "kafka_conn_id": "kafka_tls",
        "value": {"format": "json", "schema": "id BIGINT"},
        "output": {"path": str(tmp_path / "tables" / "tls")},
        "control_db_url": control_db,
        "schedule": None,
    }
    (pipelines / "tls.yaml").write_text(yaml.safe_dump(doc))
    extra = kafka_sasl_ssl.settings("eos-umlaut")  # a password with ä, ö, a quote and a backslash
    env = {
        "AIRFLOW_CONN_KAFKA_TLS": json.dumps({"conn_type": "kafka", "extra": extra}),
        "EOS_KAFKA_BOOTSTRAP": "127.0.0.1:9",  # the file's default: nothing listens there
    }
    with running_airflow(tmp_path, pipelines, env) as (api, _):
        api.wait_for_dag(DAG)
        run_id = api.run(DAG)
        state = api.wait_for_run(DAG, run_id, RUN_TIMEOUT_S)
        assert state == "success", api.task_states(DAG, run_id)
        ran = [task for task, s in api.task_states(DAG, run_id).items() if s == "success"]
        logs = "\n".join(api.task_log(DAG, run_id, task) for task in ran)
        assert extra["sasl.password"] not in logs

    store = ControlStore(control_db)
    try:
        batches = store.list_batches("tls", limit=5)
    finally:
        store.close()
    committed = [b for b in batches if b.status == BatchStatus.COMMITTED]
    assert sum(b.records_read or 0 for b in committed) == 20, batches
