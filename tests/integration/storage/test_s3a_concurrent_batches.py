"""An ingest and overlapping backfills at the same time on one s3a table (s3proxy, a PostgreSQL
control DB): `eos-ingest` processes, each with its own Spark application, whose Delta commits meet
in the commit coordinator. Each must exit 0 (a write conflict costs a retry), and every committed
record must be in the table exactly once. `make test` runs the ingest beside one backfill (two
commits racing: the coordinator's subject); EOS_LONG_TESTS=1 adds a second backfill overlapping
the first (three at once)."""

from __future__ import annotations

import os
import subprocess
from collections import Counter

import pytest

from eos_ingest.storage.object_stores import delta_rs_table
from tests.kafka_helpers import TxProducer, read_committed
from tests.s3a_helpers import CLI, cli, commit_entries, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
LONG = os.environ.get("EOS_LONG_TESTS") == "1"


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": 1.0} for i in range(start, start + count)]


@postgres_only
def test_an_ingest_and_overlapping_backfills_at_once_all_commit_and_leave_one_copy(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    for partition in (0, 1):
        producer.transaction(
            topic, rows(1000 * partition, 150), commit=True, partition=partition
        )  # 0-149, marker 150
    bucket = s3_server.make_bucket()
    config = make_pipeline([topic], control_db_url, output={"path": f"s3a://{bucket}/tables/conc"})
    env = {**os.environ, **s3_server.env}
    first = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert first.returncode == 0, first.stderr[-4000:]
    for partition in (0, 1):  # new records for the ingest; the backfills replace committed ones
        producer.transaction(topic, rows(1000 * partition + 150, 100), commit=True, partition=partition)

    base = ["--config", str(config.source), "--master", "local[1]", "--topic", topic]
    commands = {
        "ingest": ["run", "--config", str(config.source), "--master", "local[1]"],
        "backfill-a": ["backfill", *base, "--partitions", "0,1", "--start-offset", "0",
                       "--end-offset", "120", "--reason", "overlap a"],
        "backfill-b": ["backfill", *base, "--partitions", "0", "--start-offset", "60",
                       "--end-offset", "151", "--reason", "overlap b"],
    }  # fmt: skip
    if not LONG:
        del commands["backfill-b"]
    procs = {}
    for name, args in commands.items():  # all at once
        log = (tmp_path / f"{name}.log").open("w")
        procs[name] = subprocess.Popen([CLI, *args], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    for name, proc in procs.items():
        proc.wait(timeout=1200)
        output = (tmp_path / f"{name}.log").read_text()
        print(f"--- {name} ---\n{output[-1500:]}")
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output[-5000:]}"

    # Every committed record once, nothing else: Kafka's committed records (a read_committed
    # consumer) against the table read by delta-rs (not Spark, not the job's code). This is what
    # `eos-ingest verify` compares too; it ran here as well, and its Spark session (~20 s on 2
    # cores) added no check: every record is valid JSON, so none belongs in the quarantine table,
    # which must hold none of them either.
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    committed = {(p, o) for p, o, _ in read_committed(kafka_bootstrap, topic, 2)}
    assert len(committed) == 500
    assert identities(str(config.output_path), topic) == Counter(dict.fromkeys(committed, 1))
    quarantine = delta_rs_table(str(config.quarantine_path))
    assert quarantine is None or quarantine.to_pyarrow_table().num_rows == 0
    # Every commit went through the coordinator and completed: one entry per version.
    table = str(config.output_path)
    entries = [(name, done) for path, name, done in commit_entries(control_db_url, table) if path == table]
    commits = [(name, done) for name, done in entries if name.endswith(".json")]
    assert commits and all(done for _, done in commits), entries
    versions = [int(name.split(".")[0]) for name, _ in commits]
    assert versions == list(range(len(versions))), versions
