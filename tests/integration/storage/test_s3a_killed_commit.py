"""Two faults inside coordinated commits to an s3a table, one pipeline walking through both (each
`eos-ingest` command a process with its own Spark application: one table and its first batch
serve both faults, and one verify reads the result of both).

1. A writer killed (SIGKILL) in the one window where the commit is decided but not yet visible:
   its entry is in the control DB (complete=false) and its actions are in the temporary file
   `_delta_log/.tmp/<N>.json.<uuid>`, but `<N>.json` is not written. JdbcLogStore's test-only hook
   (EOS_FAULT_DELTA_PAUSE_AFTER_ENTRY) parks the writer exactly there, so the kill lands in the
   window every time. Then delta-rs (which knows nothing of the coordinator) ignores the
   unfinished commit and reads version N-1; the next writer (an `eos-ingest run` that resumes the
   batch) completes version N from the temporary file before committing its own.
2. That next writer's copy of its own commit's temporary file to `<N+1>.json` fails once
   (JdbcLogStore's test-only hook EOS_FAULT_DELTA_FAIL_COPY_ONCE, which the repair's copy of
   step 1 does not go through). The entry (the commit) is already in the control DB, so the store
   does not fail the commit: the writer completes its entry as a reader would, before Delta (which
   asks the FileSystem for `<N+1>.json` right after the store's write) looks. So the batch commits,
   the control DB records N+1 (what Delta's commit returned), the entry is complete, and later
   reads (delta-rs, and Spark) see N+1. With a store that only logs the failed copy, the batch
   fails (FileNotFoundException on `<N+1>.json` inside Delta's commitIfNeeded).

Then Spark (`verify`) and delta-rs read one copy of every committed record.

(test_s3a_commit_version.py, the copy that fails once on a batch of its own after a first batch of
its own, was merged in here: its first batch and its verify repeated this scenario's. Its fault
now lands on the resuming writer's commit: the marker file names the version that failed, so it
is asserted to be the batch's commit, not the repair's.)

On s3proxy with a PostgreSQL control DB."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections import Counter

import pytest
from sqlalchemy import create_engine, text

from eos_ingest.config.table_location import S3A
from eos_ingest.storage.object_stores import S3Access, delta_rs_table
from tests.helpers.kafka import TxProducer, read_committed
from tests.helpers.processes import wait_for_pause
from tests.helpers.s3a import CLI, cli, commit_entries, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
PAUSE_ENV = "EOS_FAULT_DELTA_PAUSE_AFTER_ENTRY"  # JdbcLogStore.PAUSE_AFTER_ENTRY_ENV
FAIL_COPY_ENV = "EOS_FAULT_DELTA_FAIL_COPY_ONCE"  # JdbcLogStore.FAIL_COPY_ONCE_ENV
FAIL_COPY_TABLE_ENV = "EOS_FAULT_DELTA_FAIL_COPY_TABLE"  # JdbcLogStore.FAIL_COPY_TABLE_ENV


def s3_files(s3_server, prefix: str) -> list[str]:
    """Every object under s3a://`prefix`, listed with pyarrow's S3 client (not Hadoop's)."""
    from pyarrow.fs import FileSelector, S3FileSystem

    access = S3Access.from_env(s3_server.env)
    fs = S3FileSystem(access_key=access.access_key, secret_key=access.secret_key,
                      endpoint_override=access.endpoint, scheme="http", region="us-east-1")  # fmt: skip
    found = fs.get_file_info(FileSelector(prefix.removeprefix(S3A), recursive=True, allow_not_found=True))
    return [f.path for f in found]


def recorded_version(control_db_url: str, batch_id: int) -> int | None:
    """The Delta version the control DB records for the committed batch `batch_id`."""
    engine = create_engine(control_db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(
                text("SELECT delta_version FROM eos_batches WHERE status = 'committed' AND batch_id = :b"),
                {"b": batch_id},
            ).scalar_one()
    finally:
        engine.dispose()


@postgres_only
def test_a_killed_commit_is_repaired_or_ignored_and_a_failed_log_copy_still_records_its_version(
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

    # 1. The second batch's writer, parked after its entry and killed with its whole process group.
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

    # The next writer: the batch is still planned, a rerun resumes it, completes N and commits
    # after N; 2. its own commit's copy to <N+1>.json fails once (the output table's only).
    marker = tmp_path / "copy_failed"
    rerun = cli(
        "run", "--config", str(config.source), "--master", "local[1]",
        env={**env, FAIL_COPY_ENV: str(marker), FAIL_COPY_TABLE_ENV: table},
    )  # fmt: skip
    errors = [line for line in rerun.stderr.splitlines() if "Error" in line or "Exception" in line]
    assert rerun.returncode == 0, "\n".join(errors[:20]) + "\n" + rerun.stderr[-2000:]
    resumed = re.search(r"^eos-ingest: resuming batch (\d+)$", rerun.stderr, re.M)
    assert resumed, rerun.stderr[-2000:]
    assert any(f.endswith(f"/_delta_log/{name}") for f in s3_files(s3_server, f"{table}/_delta_log")), (
        f"the next writer did not complete {name} from its temporary file"
    )
    entries = [(n, done) for path, n, done in commit_entries(control_db_url, table) if path == table]
    assert (name, True) in entries and all(done for _, done in entries), entries

    # The failed copy was the resumed batch's own commit, after N (not the repair's copy of N).
    failed_file = marker.read_text()
    assert failed_file.startswith(f"{table}/_delta_log/"), failed_file
    failed_name = failed_file.rsplit("/", 1)[1]
    failed_version = int(failed_name.split(".")[0])
    assert failed_version > version, (failed_version, version)
    # The copy failed, yet the entry is complete and <N+1>.json is there: the writer completed it.
    assert (table, failed_name, True) in commit_entries(control_db_url, table)
    assert delta_rs_table(table).version() == failed_version  # type: ignore[union-attr]
    # The control DB records the version of the commit that carries the (resumed) batch.
    recorded = recorded_version(control_db_url, int(resumed.group(1)))
    assert recorded == failed_version, f"recorded {recorded}, the batch's commit is version {failed_version}"

    # Spark (verify) and delta-rs read one copy of every committed record, at that version.
    verify = cli("verify", "--config", str(config.source), env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-4000:]
    report = json.loads(verify.stdout)
    assert (report["ok"], report["missing"], report["duplicates"]) == (True, 0, 0), report
    assert all(done for _, _, done in commit_entries(control_db_url, table))
    assert delta_rs_table(table).version() == failed_version  # type: ignore[union-attr]
    committed = {(p, o) for p, o, _ in read_committed(kafka_bootstrap, topic, 2)}
    assert identities(table, topic) == Counter(dict.fromkeys(committed, 1))
