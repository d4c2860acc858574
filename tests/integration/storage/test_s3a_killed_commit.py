"""A writer killed (SIGKILL) inside a coordinated commit to an s3a table, in the one window where
the commit is decided but not yet visible: its entry is in the control DB (complete=false) and
its actions are in the temporary file `_delta_log/.tmp/<N>.json.<uuid>`, but `<N>.json` is not
written. JdbcLogStore's test-only hook (EOS_FAULT_DELTA_PAUSE_AFTER_ENTRY) parks the writer
exactly there, so the kill lands in the window every time.

Then delta-rs (which knows nothing of the coordinator) ignores the unfinished commit and reads
version N-1; the next writer (an `eos-ingest run` that resumes the batch) completes version N
from the temporary file before committing its own; Spark (`verify`) and delta-rs then read one
copy of every committed record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter

import pytest

from eos_ingest.config.table_location import S3A
from eos_ingest.storage.object_stores import S3Access, delta_rs_table
from tests.kafka_helpers import TxProducer, read_committed
from tests.process_helpers import wait_for_pause
from tests.s3a_helpers import CLI, cli, commit_entries, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
PAUSE_ENV = "EOS_FAULT_DELTA_PAUSE_AFTER_ENTRY"  # JdbcLogStore.PAUSE_AFTER_ENTRY_ENV


def s3_files(s3_server, prefix: str) -> list[str]:
    """Every object under s3a://`prefix`, listed with pyarrow's S3 client (not Hadoop's)."""
    from pyarrow.fs import FileSelector, S3FileSystem

    access = S3Access.from_env(s3_server.env)
    fs = S3FileSystem(access_key=access.access_key, secret_key=access.secret_key,
                      endpoint_override=access.endpoint, scheme="http", region="us-east-1")  # fmt: skip
    found = fs.get_file_info(FileSelector(prefix.removeprefix(S3A), recursive=True, allow_not_found=True))
    return [f.path for f in found]


@postgres_only
def test_a_writer_killed_between_its_commit_entry_and_the_log_file_is_repaired_or_ignored(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "a", "amount": 1.0} for i in range(40)], commit=True)
    bucket = s3_server.make_bucket()
    config = make_pipeline([topic], control_db_url, output={"path": f"s3a://{bucket}/tables/killed"})
    table = str(config.output_path)
    env = {**os.environ, **s3_server.env}
    first = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert first.returncode == 0, first.stderr[-4000:]
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    before = identities(table, topic)
    version_before = delta_rs_table(table).version()  # type: ignore[union-attr]
    producer.transaction(topic, [{"id": i, "name": "b", "amount": 2.0} for i in range(40, 100)], commit=True)

    # The second batch's writer, parked after its entry and killed with its whole process group.
    pause = tmp_path / "paused"
    log = tmp_path / "killed.log"
    with log.open("w") as out:
        job = subprocess.Popen(
            [CLI, "run", "--config", str(config.source), "--master", "local[1]"],
            env={**env, PAUSE_ENV: str(pause)}, start_new_session=True, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_for_pause(job, pause, log, timeout_s=600)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=60)
    log_file = pause.read_text()  # s3a://.../_delta_log/<N>.json
    assert log_file.startswith(f"{table}/_delta_log/"), log_file
    name = log_file.rsplit("/", 1)[1]
    version = int(name.split(".")[0])
    assert version == version_before + 1

    # The window: the entry is taken but incomplete, the temporary file is there, N.json is not.
    assert (table, name, False) in commit_entries(control_db_url, table)
    files = s3_files(s3_server, f"{table}/_delta_log")
    assert not any(f.endswith(f"/_delta_log/{name}") for f in files), files
    assert any(f"/_delta_log/.tmp/{name}." in f for f in files), files

    # delta-rs ignores the unfinished commit: the table reads as before, at version N-1.
    assert delta_rs_table(table).version() == version_before  # type: ignore[union-attr]
    assert identities(table, topic) == before

    # The next writer: the batch is still planned, a rerun resumes it and commits after N.
    rerun = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert "resuming batch" in rerun.stderr, rerun.stderr[-2000:]
    assert any(f.endswith(f"/_delta_log/{name}") for f in s3_files(s3_server, f"{table}/_delta_log"))
    entries = [(n, done) for path, n, done in commit_entries(control_db_url, table) if path == table]
    assert (name, True) in entries and all(done for _, done in entries), entries
    assert delta_rs_table(table).version() > version  # type: ignore[union-attr]

    # Spark (verify) and delta-rs read one copy of every committed record.
    verify = cli("verify", "--config", str(config.source), env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-4000:]
    report = json.loads(verify.stdout)
    assert (report["ok"], report["missing"], report["duplicates"]) == (True, 0, 0), report
    committed = {(p, o) for p, o, _ in read_committed(kafka_bootstrap, topic, 2)}
    assert identities(table, topic) == Counter(dict.fromkeys(committed, 1))
