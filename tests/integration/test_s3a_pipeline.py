"""A pipeline whose tables are on s3a, on a real S3 API server (s3proxy), Kafka, Spark and a
PostgreSQL control DB: `eos-ingest run`, `verify` and `audit` as a user runs them (the access in
the standard AWS_* variables only), and delta-rs, a reader that is not Spark, finds the same rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from eos_ingest.object_storage import delta_rs_table
from tests.kafka_helpers import TxProducer, read_committed

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
CLI = str(Path(sys.executable).with_name("eos-ingest"))


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=900, check=False)


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

    def identities(location: str) -> set[tuple[int, int]]:
        table = delta_rs_table(location)
        assert table is not None, location
        rows = table.to_pyarrow_table(columns=["kafka_topic", "kafka_partition", "kafka_offset"]).to_pylist()
        assert {r["kafka_topic"] for r in rows} == {topic}
        return {(r["kafka_partition"], r["kafka_offset"]) for r in rows}

    assert identities(str(config.output_path)) == good
    assert identities(str(config.quarantine_path)) == bad
    # Nothing landed on the local disk instead.
    assert not (tmp_path / "tables").exists()
