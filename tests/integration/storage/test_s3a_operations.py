"""A pipeline whose tables are on s3a, on a real S3 API server (s3proxy), Kafka, Spark and a
PostgreSQL control DB, and what an operator uses on it: `eos-ingest run`, `verify` and `audit` as a
user runs them (the access in the standard AWS_* variables only), delta-rs (a reader that is not
Spark) finding the same rows, the quality gate in the job, `eos-ingest audit --recount` (delta-rs
reads the committed rows from the store), `eos-ingest maintain` (OPTIMIZE and VACUUM through the
commit coordinator), and the Ingestion page's data through the Airflow plugin's own app.

One pipeline, one table and two batches for all of it: each `eos-ingest` command is a process of
its own, most with a Spark application. (test_s3a_pipeline.py's run, verify and audit of a table
of its own were merged in here: they repeated this module's run, audit and verify. The audit is
the --recount one, which differs from the plain audit only in where the expected count comes
from, Kafka instead of the batch's records_read.)
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import tomllib

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from eos_ingest import paths
from eos_ingest.storage.object_stores import delta_rs_table
from tests.fixtures.page_users import viewer
from tests.kafka_helpers import TxProducer, read_committed
from tests.s3a_helpers import cli, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)


def plugin_client() -> TestClient:
    """The plugin's app, loaded from its entry point as Airflow does (login and access checks
    overridden: a viewer)."""
    pyproject = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())
    ((name, value),) = pyproject["project"]["entry-points"]["airflow.plugins"].items()
    cls = importlib.metadata.EntryPoint(name=name, value=value, group="airflow.plugins").load()
    app = sys.modules[cls.__module__].build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = viewer  # reads every pipeline's DAGs
    return TestClient(app)


@postgres_only
def test_run_verify_the_gate_the_audit_maintenance_and_the_ingestion_page_work_on_an_s3a_table(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "n", "amount": 1.5} for i in range(40)], commit=True)
    producer.transaction(topic, [{"id": 99, "name": "aborted", "amount": 0.0}] * 5, commit=False)
    producer.transaction(topic, [b"not json"] * 3, commit=True)
    bucket = s3_server.make_bucket()
    config = make_pipeline(
        [topic],
        control_db_url,
        output={"path": f"s3a://{bucket}/tables/ops", "partition_by": ["event_date"]},
        kafka_conn_id=None,
    )
    env = {**os.environ, **s3_server.env}
    run = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert run.returncode == 0, run.stderr[-4000:]

    engine = create_engine(control_db_url)
    with engine.connect() as conn:
        coordinated = conn.execute(
            text("SELECT count(*) FROM eos_delta_commits WHERE table_path LIKE :b"),
            {"b": f"s3a://{bucket}/%"},
        ).scalar_one()
    engine.dispose()
    assert coordinated >= 2  # the table's and the quarantine table's commits went through the control DB

    # delta-rs, with the same AWS_* variables, reads exactly Kafka's committed identities.
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    committed = read_committed(kafka_bootstrap, topic, 2)
    good = {(p, o) for p, o, v in committed if v != b"not json"}
    bad = {(p, o) for p, o, v in committed if v == b"not json"}
    assert len(good) == 40 and len(bad) == 3
    assert identities(str(config.output_path), topic) == dict.fromkeys(good, 1)
    assert identities(str(config.quarantine_path), topic) == dict.fromkeys(bad, 1)
    # Nothing landed on the local disk instead.
    assert not (tmp_path / "tables").exists()

    monkeypatch.setenv("EOS_PIPELINES_DIR", str(config.source.parent))
    client = plugin_client()

    # The gate ran in the job, before the write to the store, and passed (a passed gate is logged;
    # only a failed one is recorded on the batch, so the page shows no check before the audit).
    assert "batch 1 gate passed" in run.stderr, run.stderr[-3000:]
    body = client.get(f"/api/pipelines/{config.name}").json()
    (batch,) = body["batches"]
    assert (batch["batch_id"], batch["status"], batch["dq_success"]) == (1, "committed", None), batch
    assert (batch["records_written"], batch["records_quarantined"]) == (40, 3)
    assert batch["delta_version"] == delta_rs_table(str(config.output_path)).version()  # type: ignore[union-attr]
    assert body["output_path"] == str(config.output_path) and body["total_lag"] == 0, body

    # The audit reads the committed rows from the store with delta-rs and recounts Kafka.
    audit = cli(
        "audit", "--config", str(config.source), "--batch-id", str(batch["batch_id"]), "--recount", env=env
    )
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-4000:]
    (after,) = client.get(f"/api/pipelines/{config.name}").json()["batches"]
    assert (after["dq_stage"], after["dq_success"]) == ("audit", True), after
    docs = after["dq_report_docs_path"]
    assert docs and client.get(f"/pipelines/{config.name}").text.count(docs) >= 1

    # Maintenance on the store: a second batch adds files, OPTIMIZE compacts them and VACUUM (no
    # batch planned, so a retention of 0 h is taken) deletes the small ones; every row stays
    # once, verify still says exactly-once, and the page shows the maintenance.
    producer.transaction(topic, [{"id": i, "name": "n", "amount": 1.5} for i in range(40, 80)], commit=True)
    second = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert second.returncode == 0, second.stderr[-4000:]
    table = delta_rs_table(str(config.output_path))
    assert table is not None
    files_before, rows_before = len(table.file_uris()), identities(str(config.output_path), topic)
    # One file per batch at least (a batch is now written in its one pass over the topic's
    # partition): OPTIMIZE has two or more to compact.
    assert files_before >= 2 and sum(rows_before.values()) == 80, (files_before, rows_before)

    maintain = cli("maintain", "--config", str(config.source), "--retention-hours", "0", env=env)
    assert maintain.returncode == 0, maintain.stdout[-2000:] + maintain.stderr[-4000:]
    after = delta_rs_table(str(config.output_path))
    assert after is not None and len(after.file_uris()) < files_before, maintain.stdout[-2000:]
    assert identities(str(config.output_path), topic) == rows_before
    # verify (Spark, with the access in the AWS_* variables only) finds every committed record of
    # both batches once, after the maintenance too.
    verify = cli("verify", "--config", str(config.source), env=env)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-4000:]
    report = json.loads(verify.stdout)
    assert (report["ok"], report["missing"], report["duplicates"]) == (True, 0, 0), report
    tables = client.get(f"/api/pipelines/{config.name}").json()["tables"]
    assert tables["table"]["files"] == len(after.file_uris()), tables
    assert tables["table"]["last_maintenance"]["operation"] in ("OPTIMIZE", "VACUUM END"), tables
