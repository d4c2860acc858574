"""The ingest DAG over SASL_SSL, its settings from an Airflow connection of the Kafka provider's type.

`airflow standalone` (scripts/airflow.sh) runs the ingest DAG of `tls.yaml`, a file without a
`kafka:` section: everything comes from the connection `kafka_tls` (AIRFLOW_CONN_KAFKA_TLS), whose
extra holds security.protocol, sasl.mechanism, sasl.username, sasl.password and ssl.ca.location
of the session broker's SASL_SSL listener. The file's built-in default points where nothing
listens, so a committed batch proves the planner, the Spark job and the audit all read over TLS.
"""

from __future__ import annotations

import pytest

from eos_ingest.control.schema import BatchStatus
from eos_ingest.control.store import ControlStore
from tests.e2e.conftest import RUN_TIMEOUT_S, Stack
from tests.fixtures.kafka import SaslSslListener

pytestmark = pytest.mark.e2e

DAG = "eos_ingest__tls"


def test_the_ingest_dag_reads_over_sasl_ssl_through_a_kafka_connection(
    stack: Stack, kafka_sasl_ssl: SaslSslListener
) -> None:
    """On the e2e package's one Airflow (tests/e2e/conftest.py: pipeline tls, 20 committed records
    on a topic of its own, connection kafka_tls); its run was triggered at the stack's start."""
    api, extra = stack.api, stack.tls
    assert extra is not None and extra["sasl.password"] == kafka_sasl_ssl.users["eos-umlaut"]
    run_id = stack.early_runs[DAG]
    state = api.wait_for_run(DAG, run_id, RUN_TIMEOUT_S)
    assert state == "success", api.task_states(DAG, run_id)
    ran = [task for task, s in api.task_states(DAG, run_id).items() if s == "success"]
    logs = "\n".join(api.task_log(DAG, run_id, task) for task in ran)
    assert extra["sasl.password"] not in logs

    store = ControlStore(f"sqlite:///{stack.root / 'control-tls.db'}")
    try:
        batches = store.list_batches("tls", limit=5)
    finally:
        store.close()
    committed = [b for b in batches if b.status == BatchStatus.COMMITTED]
    assert sum(b.records_read or 0 for b in committed) == 20, batches
