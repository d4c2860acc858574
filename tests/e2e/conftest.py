"""The one `airflow standalone` of the e2e tests (scripts/airflow.sh), shared by the REST API tests
(test_airflow_e2e.py, test_spark_cluster.py), the browser tests (test_airflow_ui_browser.py),
the SASL_SSL connection test (test_sasl_ssl_e2e.py) and the secret-leak test
(test_no_secret_leaks_e2e.py): started once, for the first of them that runs, and stopped after
the last test of tests/e2e (each start and stop costs about a minute and a half on 2 cores).
test_spark_cluster.py adds a pipeline of its own, on a Spark connection to the standalone
cluster, for the time of its test (and runs `eos-ingest run` on that cluster, without Airflow).

It serves these pipelines, each with its own topic, tables and control DB, so no module's counts
depend on another having run (or on the order they run in):

* ``e2e``: driven through the REST API;
* ``ui``: driven by a person's clicks in Chromium;
* ``tls``: reads over the session broker's SASL_SSL listener, everything from the connection
  kafka_tls (left out, and its test skipped, with an external EOS_TEST_BOOTSTRAP broker);
* ``leaks``, whose Kafka sasl.password is ``${EOS_TEST_CANARY}`` (LEAKS_CANARY), and ``broken``,
  whose control_db_url quotes that canary after a mistake (a DAG import error by design).

The pipelines' YAML names no broker (its default points where nothing listens); the real one (the
session test broker) is only in the Airflow connection kafka_default, with a canary password: so
every step provably uses the connection, and the canary must never show in a log or a rendered
template.

What the tests would only wait for starts with the stack: the Spark cluster of test_spark_cluster.py
(when those tests are in the session) while Airflow starts, and the ingest runs of ``tls`` and
``leaks`` (each the only run of its test, when that test is in the session) as soon as their DAGs
are parsed (Stack.early_runs): they go beside the REST test's runs, and their tests check them.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from tests.e2e.airflow_api import AirflowApi
from tests.e2e.airflow_stack import running_airflow
from tests.fixtures.kafka import SaslSslListener
from tests.helpers.kafka import TxProducer

CANARY = f"canary-{secrets.token_hex(8)}"
LEAKS_CANARY = f"S3CR3T-CANARY-{secrets.token_hex(6)}"  # the leaks pipeline's, from the environment
BAD_VALUES = [b"not json", b'{"id": "abc"}', b"[1, 2]"]
RUN_TIMEOUT_S = 900  # one batch: spark-submit, the GX gate and audit, on a busy 2-core machine


@dataclass
class Stack:
    api: AirflowApi
    config: PipelineConfig  # pipeline e2e as Airflow sees it: the connection's broker merged in
    topic: str
    airflow_home: Path
    ui_config: PipelineConfig  # pipeline ui, the browser tests' own
    ui_topic: str
    root: Path  # everything the stack wrote: Airflow's home, task logs, GX results, tables, DBs
    tls: dict[str, str] | None  # pipeline tls: its kafka_tls connection's settings (None: no listener)
    early_runs: dict[str, str]  # DAG id -> the run triggered at the stack's start


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def _topic(admin: AdminClient, prefix: str, partitions: int) -> str:
    topic = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    return topic


def _produce(bootstrap: str, topic: str, partitions: int, batches: list[tuple[list, bool]]) -> None:
    """Each (values, commit) is one transaction spread over every partition, committed or aborted."""
    producer = TxProducer(bootstrap)
    for values, commit in batches:
        producer.begin()
        for partition in range(partitions):
            producer.send(topic, values[partition::partitions], partition=partition)
        if commit:
            producer.commit()
        else:
            producer.abort()


def _pipeline_doc(name: str, topic: str, root: Path, **extra: object) -> dict:
    return {
        "name": name,
        "topics": [topic],
        # No kafka: section, and its built-in default points where nothing listens (EOS_KAFKA_BOOTSTRAP
        # below): every step must take the cluster from the connection.
        "kafka_conn_id": "kafka_default",
        "value": {"format": "json", "schema": "id BIGINT, name STRING, amount DOUBLE"},
        "output": {"path": str(root / "tables" / name)},
        "control_db_url": f"sqlite:///{root / f'control-{name}.db'}",
        "schedule": None,
        **extra,
    }


def _sasl_ssl(request: pytest.FixtureRequest) -> SaslSslListener | None:
    """The session broker's SASL_SSL listener; None with an external broker (the tls test skips)."""
    try:
        return request.getfixturevalue("kafka_sasl_ssl")
    except pytest.skip.Exception:
        return None


def _start_early_runs(api: AirflowApi, dag_ids: list[str]) -> dict[str, str]:
    """Trigger each DAG's run once it is parsed; their tests wait for them, a module later."""
    for dag_id in dag_ids:
        api.wait_for_dag(dag_id)
    return {dag_id: api.run(dag_id) for dag_id in dag_ids}


def _in_session(request: pytest.FixtureRequest, file_name: str) -> bool:
    return any(item.path.name == file_name for item in request.session.items)


def _spark_cluster_if_used(request: pytest.FixtureRequest) -> None:
    """The session's Spark cluster, started now when test_spark_cluster.py runs in this session
    (a start of its master and worker JVMs that would otherwise come after the stack's). A cluster
    that does not start fails the cluster tests (pytest keeps the fixture's error), not the stack."""
    if _in_session(request, "test_spark_cluster.py"):
        with contextlib.suppress(pytest.fail.Exception):
            request.getfixturevalue("spark_cluster")


# Package scope: stopped after the last e2e test, not left running through the rest of the suite.
@pytest.fixture(scope="package")
def stack(
    tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("airflow-e2e")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic, ui_topic = _topic(admin, "e2e_events", 3), _topic(admin, "ui_events", 2)
    tls_topic, leaks_topic = _topic(admin, "tls", 2), _topic(admin, "leaks", 2)
    # Every partition gets records (the default partitioner may leave one empty), so the backfill
    # has a non-empty committed range in each.
    _produce(
        kafka_bootstrap,
        topic,
        3,
        [(rows(0, 30), True), (rows(1000, 20), False), (rows(30, 30), True), (BAD_VALUES, True)],
    )
    _produce(kafka_bootstrap, ui_topic, 2, [(rows(0, 20), True), (BAD_VALUES[:2], True)])
    TxProducer(kafka_bootstrap).transaction(tls_topic, [{"id": i} for i in range(20)], commit=True)
    TxProducer(kafka_bootstrap).transaction(leaks_topic, [{"id": i} for i in range(20)], commit=True)
    pipelines = root / "pipelines"
    pipelines.mkdir()
    # 31-32 offsets per partition (records, aborted ones, transaction markers): the first run, with
    # until_caught_up, takes 2 batches (20 offsets, then the rest): the fewest that show a backlog
    # taken batch after batch.
    e2e = _pipeline_doc("e2e", topic, root, max_records_per_partition=20)
    (pipelines / "e2e.yaml").write_text(yaml.safe_dump(e2e))
    (pipelines / "ui.yaml").write_text(yaml.safe_dump(_pipeline_doc("ui", ui_topic, root)))
    leaks = _pipeline_doc(
        "leaks", leaks_topic, root, value={"format": "json", "schema": "id BIGINT"}, kafka_conn_id=None,
        kafka={"bootstrap.servers": kafka_bootstrap, "sasl.username": "svc",
               "sasl.password": "${EOS_TEST_CANARY}"},
    )  # fmt: skip
    (pipelines / "leaks.yaml").write_text(yaml.safe_dump(leaks))
    broken = {**leaks, "name": "broken", "control_db_url": "mysql://eos:${EOS_TEST_CANARY}@db/eos"}
    (pipelines / "broken.yaml").write_text(yaml.safe_dump(broken))
    conn = {"bootstrap.servers": kafka_bootstrap, "sasl.username": "e2e", "sasl.password": CANARY}
    env = {
        # The YAML's default broker points where nothing listens: the connection must win.
        "EOS_KAFKA_BOOTSTRAP": "127.0.0.1:9",
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "kafka", "extra": conn}),
        "EOS_TEST_CANARY": LEAKS_CANARY,
        # A task's calls to the api-server's execution API time out after 5 s by default; at load 80
        # on 2 cores (six suites at once) a plan task's start timed out, failed its first try and
        # was retried 30 s later. Airflow's advice for high load: a longer timeout.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
    }
    listener = _sasl_ssl(request)
    tls = None
    if listener is not None:
        tls = listener.settings("eos-umlaut")  # a password with ä, ö, a quote and a backslash
        doc = _pipeline_doc("tls", tls_topic, root, value={"format": "json", "schema": "id BIGINT"},
                            kafka_conn_id="kafka_tls")  # fmt: skip
        (pipelines / "tls.yaml").write_text(yaml.safe_dump(doc))
        env["AIRFLOW_CONN_KAFKA_TLS"] = json.dumps({"conn_type": "kafka", "extra": tls})

    def as_airflow_sees_it(name: str) -> PipelineConfig:
        config = load_pipeline(pipelines / f"{name}.yaml")
        return config.model_copy(update={"kafka": {**config.kafka, "bootstrap.servers": kafka_bootstrap}})

    meanwhile = partial(_spark_cluster_if_used, request)
    with running_airflow(root, pipelines, env, meanwhile) as (api, airflow_home):
        early = _start_early_runs(
            api,
            (["eos_ingest__leaks"] if _in_session(request, "test_no_secret_leaks_e2e.py") else [])
            + (["eos_ingest__tls"] if tls and _in_session(request, "test_sasl_ssl_e2e.py") else []),
        )
        yield Stack(
            api, as_airflow_sees_it("e2e"), topic, airflow_home, as_airflow_sees_it("ui"), ui_topic, root, tls,
            early,
        )  # fmt: skip
