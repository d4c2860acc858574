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

The second batch is written by an ingest and an overlapping backfill started at once (a second
overlapping backfill with EOS_LONG_TESTS=1): `eos-ingest` processes, each with its own Spark application, whose Delta commits meet in the
commit coordinator. Each must exit 0 (a write conflict costs a retry), every committed record must
be in the table (and every bad one in the quarantine table) exactly once, and the coordinator's
entries are versions 0..N, all complete. (test_s3a_concurrent_batches.py, which did that on a
table of its own after a first batch of its own, was merged in here: it repeated this module's
first batch, and this module's second batch was a plain `run`.)
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from eos_ingest import paths
from eos_ingest.control.store import ControlStore
from eos_ingest.storage.object_stores import delta_rs_table
from tests.helpers.kafka import TxProducer, read_committed
from tests.helpers.page_users import viewer
from tests.helpers.s3a import CLI, cli, commit_entries, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)


def spread(producer: TxProducer, topic: str, values: list, *, commit: bool) -> None:
    """One transaction over both partitions (every other value to each), committed or aborted:
    each partition gets records, so the backfills below have a committed range in both."""
    producer.begin()
    for partition in (0, 1):
        producer.send(topic, values[partition::2], partition=partition)
    if commit:
        producer.commit()
    else:
        producer.abort()


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
def test_run_verify_the_gate_the_audit_concurrent_batches_maintenance_and_the_page_work_on_an_s3a_table(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    spread(producer, topic, [{"id": i, "name": "n", "amount": 1.5} for i in range(40)], commit=True)
    spread(producer, topic, [{"id": 99, "name": "aborted", "amount": 0.0}] * 5, commit=False)
    spread(producer, topic, [b"not json"] * 3, commit=True)
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

    # The second batch: an ingest of new records and backfills over overlapping ranges of the
    # first batch's (the bad values of partition 0 among them), all at once.
    spread(producer, topic, [{"id": i, "name": "n", "amount": 1.5} for i in range(40, 80)], commit=True)
    ends = {tp.partition: o for tp, o in ControlStore(control_db_url).committed_offsets(config.name).items()}
    overlap = min(ends.values()) * 2 // 3
    assert ends[0] // 3 < overlap, ends  # backfill-b starts inside backfill-a's range
    base = ["--config", str(config.source), "--master", "local[1]", "--topic", topic]
    commands = {
        "ingest": ["run", "--config", str(config.source), "--master", "local[1]"],
        "backfill-a": ["backfill", *base, "--partitions", "0,1", "--start-offset", "0",
                       "--end-offset", str(overlap), "--reason", "overlap a"],
        "backfill-b": ["backfill", *base, "--partitions", "0", "--start-offset", str(ends[0] // 3),
                       "--end-offset", str(ends[0]), "--reason", "overlap b"],
    }  # fmt: skip
    if os.environ.get("EOS_LONG_TESTS") != "1":
        del commands["backfill-b"]  # two commits racing is the coordinator's subject; three: long runs
    procs = {}
    for name, args in commands.items():  # all at once
        with (tmp_path / f"{name}.log").open("w") as log:
            procs[name] = subprocess.Popen(
                [CLI, *args], env=env, stdout=log, stderr=subprocess.STDOUT, text=True
            )
    for name, proc in procs.items():
        proc.wait(timeout=1200)
        output = (tmp_path / f"{name}.log").read_text()
        print(f"--- {name} ---\n{output[-1500:]}")
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output[-5000:]}"
    # Every committed record once, nothing else: Kafka's committed records (a read_committed
    # consumer) against the tables read by delta-rs (not Spark, not the job's code).
    committed = read_committed(kafka_bootstrap, topic, 2)
    good = {(p, o) for p, o, v in committed if v != b"not json"}
    bad = {(p, o) for p, o, v in committed if v == b"not json"}
    assert len(good) == 80 and len(bad) == 3
    assert identities(str(config.output_path), topic) == Counter(dict.fromkeys(good, 1))
    assert identities(str(config.quarantine_path), topic) == Counter(dict.fromkeys(bad, 1))
    # Every commit went through the coordinator and completed: one entry per version.
    output = str(config.output_path)
    entries = [(name, done) for path, name, done in commit_entries(control_db_url, output) if path == output]
    commits = [(name, done) for name, done in entries if name.endswith(".json")]
    assert commits and all(done for _, done in commits), entries
    versions = [int(name.split(".")[0]) for name, _ in commits]
    assert versions == list(range(len(versions))), versions

    # Maintenance on the store: the batches added files, OPTIMIZE compacts them and VACUUM (no
    # batch planned, so a retention of 0 h is taken) deletes the small ones; every row stays
    # once, verify still says exactly-once, and the page shows the maintenance.
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
    # every batch once, after the maintenance too.
    verify = cli("verify", "--config", str(config.source), env=env)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-4000:]
    report = json.loads(verify.stdout)
    assert (report["ok"], report["missing"], report["duplicates"]) == (True, 0, 0), report
    tables = client.get(f"/api/pipelines/{config.name}").json()["tables"]
    assert tables["table"]["files"] == len(after.file_uris()), tables
    assert tables["table"]["last_maintenance"]["operation"] in ("OPTIMIZE", "VACUUM END"), tables
