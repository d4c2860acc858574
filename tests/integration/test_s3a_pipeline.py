"""A pipeline whose tables are on s3a, on a real S3 API server (s3proxy), Kafka, Spark and a
PostgreSQL control DB: `eos-ingest run`, `verify` and `audit` as a user runs them (the access in
the standard AWS_* variables only), and delta-rs, a reader that is not Spark, finds the same rows."""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import create_engine, text

from tests.kafka_helpers import TxProducer, read_committed
from tests.s3a_helpers import cli, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)


@postgres_only
def test_a_pipeline_ingests_into_s3a_tables_and_verify_audit_and_delta_rs_agree(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "n", "amount": 1.5} for i in range(30)], commit=True)
    producer.transaction(topic, [{"id": 99, "name": "aborted", "amount": 0.0}] * 5, commit=False)
    producer.transaction(topic, [b"not json"] * 3, commit=True)
    bucket = s3_server.make_bucket()
    config = make_pipeline(
        [topic],
        control_db_url,
        output={"path": f"s3a://{bucket}/tables/itest", "partition_by": ["event_date"]},
    )
    env = {**os.environ, **s3_server.env}

    run = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    verify = cli("verify", "--config", str(config.source), env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-4000:]
    report = json.loads(verify.stdout)
    assert (report["ok"], report["missing"], report["duplicates"]) == (True, 0, 0), report
    engine = create_engine(control_db_url)
    with engine.connect() as conn:
        batch_id = conn.execute(text("SELECT max(batch_id) FROM eos_batches")).scalar_one()
        coordinated = conn.execute(
            text("SELECT count(*) FROM eos_delta_commits WHERE table_path LIKE :b"),
            {"b": f"s3a://{bucket}/%"},
        ).scalar_one()
    engine.dispose()
    assert coordinated >= 2  # the table's and the quarantine table's commits went through the control DB
    audit = cli("audit", "--config", str(config.source), "--batch-id", str(batch_id), env=env)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-4000:]

    # delta-rs, with the same AWS_* variables, reads exactly Kafka's committed identities.
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    committed = read_committed(kafka_bootstrap, topic, 2)
    good = {(p, o) for p, o, v in committed if v != b"not json"}
    bad = {(p, o) for p, o, v in committed if v == b"not json"}
    assert len(good) == 30 and len(bad) == 3

    assert identities(str(config.output_path), topic) == dict.fromkeys(good, 1)
    assert identities(str(config.quarantine_path), topic) == dict.fromkeys(bad, 1)
    # Nothing landed on the local disk instead.
    assert not (tmp_path / "tables").exists()
