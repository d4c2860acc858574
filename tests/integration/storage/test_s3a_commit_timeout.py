"""A control DB that stops answering in the middle of a commit: the commit coordinator's JDBC
connection goes through a TCP proxy (bench/tcp_fault_proxy.py, its `stall` fault) that, once
armed, stops forwarding at the commit's entry insert (the INSERT is held, never answered) and leaves
every new connection unanswered. The commit fails within the store's timeouts with one error naming them, instead of
hanging while Delta's lock on the path is held; the Delta table is as before; once the proxy
forwards again, the next commit succeeds.

Then that table, versions 0 and 1, is recreated at the same path after its objects were deleted
(docs/formats.md: what to do when a key format changes): the coordinator still holds the old log's
entries, and an unfinished one (a writer of the old table killed mid-commit, whose temporary file
went with the table). The new table's version 0 is written, the old entries are forgotten, and
delta-rs sees only the new table. (test_s3a_recreate_table.py, which wrote an old table of its own
in a Spark application of its own first, was merged in here: this test's table serves as the old
one.)

On s3proxy with a PostgreSQL control DB (no mock)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.tcp_fault_proxy import TcpFaultProxy, carrying
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.object_stores import S3Access, coordinator_conf, delta_rs_uri
from tests.helpers.s3a import commit_entries, delete_objects, s3_objects, spark_app_argv

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)

APP = Path(__file__).parents[2] / "spark_apps" / "s3a_coordinator_app.py"
TIMEOUT_S = 5  # socket_timeout and login_timeout of the store in this test
COMMIT_INSERT = b"INSERT INTO eos_delta_commits"


def wait_for(path: Path, job: subprocess.Popen[str], log: Path, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if job.poll() is not None:
            pytest.fail(f"the app exited ({job.returncode}):\n{log.read_text()[-5000:]}")
        if time.monotonic() > deadline:
            job.kill()
            pytest.fail(f"the app did not write {path.name} in time:\n{log.read_text()[-5000:]}")
        time.sleep(0.1)


@postgres_only
def test_a_database_that_stops_answering_mid_commit_fails_the_commit_in_bounded_time_then_the_table_is_recreated(
    s3_server, control_db_url, tmp_path
) -> None:
    db = make_url(control_db_url)
    proxy = TcpFaultProxy(db.port or 5432, db.host or "127.0.0.1")
    jdbc = coordinator_conf(control_db_url)["eos.delta.jdbc.url"]
    through_proxy = jdbc.replace(f"{db.host}:{db.port}", f"127.0.0.1:{proxy.port}", 1)
    assert through_proxy != jdbc, jdbc
    settings = {
        # Every statement is sent with its text (no server-side prepared statements), so the proxy
        # sees the insert.
        "eos.delta.jdbc.url": through_proxy + ("&" if "?" in through_proxy else "?") + "prepareThreshold=0",
        "eos.delta.jdbc.socket_timeout": str(TIMEOUT_S),
        "eos.delta.jdbc.login_timeout": str(TIMEOUT_S),
        "eos.delta.jdbc.connect_timeout": str(TIMEOUT_S),
    }
    table = f"s3a://{s3_server.make_bucket()}/stalled"
    env = {**spark_submit_env(), **s3_server.env, "EOS_TEST_CONTROL_DB_URL": control_db_url,
           "EOS_TEST_JDBC_SETTINGS": json.dumps(settings)}  # fmt: skip
    log, out = tmp_path / "app.log", tmp_path / "app.out"
    with log.open("w") as err, out.open("w") as stdout:
        job = subprocess.Popen(
            [*spark_app_argv(APP), "stall", table, str(tmp_path)],
            env=env,
            stdout=stdout,
            stderr=err,
            text=True,
        )
    try:
        wait_for(tmp_path / "ready", job, log)
        proxy.arm("stall", carrying(COMMIT_INSERT))
        (tmp_path / "go").touch()
        wait_for(tmp_path / "tried", job, log)
        assert proxy.fired.is_set(), "the commit's insert never reached the proxy"
        lines = [(tmp_path / "ready").read_text().strip(), (tmp_path / "tried").read_text().strip()]
        assert lines[0] == "committed 0", lines
        outcome = lines[1].split(" ", 2)
        assert outcome[0] == "failed", lines
        # Bounded: one socket_timeout for the held insert, one login_timeout for the retry on a
        # new connection, and Spark's own work around them.
        assert float(outcome[1]) < 4 * TIMEOUT_S + 20, lines
        assert "did not answer in time (eos.delta.jdbc.socket_timeout=5 s, login_timeout=5 s" in outcome[2], (
            lines
        )

        # The table is as it was: version 0 only, no entry for version 1.
        from deltalake import DeltaTable

        options = S3Access.from_env(s3_server.env).storage_options()
        read = DeltaTable(delta_rs_uri(table), storage_options=options)
        assert read.version() == 0
        assert read.to_pyarrow_table()["n"].to_pylist() == [0]
        assert [n for _, n, _ in commit_entries(control_db_url, table) if n.startswith(f"{1:020d}")] == []

        # The database answers again: the next commit succeeds, as version 1.
        proxy.release()
        (tmp_path / "again").touch()
        assert job.wait(timeout=600) == 0, log.read_text()[-5000:]
        assert out.read_text().splitlines() == ["committed 1"]
        read = DeltaTable(delta_rs_uri(table), storage_options=options)
        assert read.version() == 1
        assert sorted(read.to_pyarrow_table()["n"].to_pylist()) == [0, 2]
        entries = [(n, done) for path, n, done in commit_entries(control_db_url, table) if path == table]
        assert sorted({int(n.split(".")[0]) for n, _ in entries}) == [0, 1] and all(d for _, d in entries), (
            entries
        )
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=60)
        proxy.close()

    # The table is deleted as an operator deletes it: every object under its path. A writer of
    # the old table had taken version 2 and was killed before its copy: its entry is unfinished
    # and names a temporary file that is gone with the rest.
    delete_objects(s3_server.env, table)
    assert s3_objects(s3_server.env, table) == []
    old = {n.split(".")[0] for _, n, _ in commit_entries(control_db_url, table)}
    assert old >= {f"{v:020d}" for v in range(2)}, old
    engine = create_engine(control_db_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO eos_delta_commits (table_path, file_name, temp_path, complete) VALUES (:t, :f, :p, false)"
            ),
            {"t": table, "f": f"{2:020d}.json", "p": f".tmp/{2:020d}.json.{uuid.uuid4()}"},
        )
    engine.dispose()

    # The new table, its coordinator straight on the database: versions 0 and 1, new rows only.
    recreate_log = tmp_path / "new.log"
    with recreate_log.open("w") as err:
        new = subprocess.run(
            [*spark_app_argv(APP), "append", table, "100", "2"],
            env={**spark_submit_env(), **s3_server.env, "EOS_TEST_CONTROL_DB_URL": control_db_url},
            stdout=subprocess.PIPE, stderr=err, text=True, timeout=1200, check=False,
        )  # fmt: skip
    assert new.returncode == 0, f"{new.stdout}\n{recreate_log.read_text()[-6000:]}"
    assert [int(n) for n in new.stdout.split()[1::2]] == [0, 1]
    entries = [(n, done) for path, n, done in commit_entries(control_db_url, table) if path == table]
    versions = sorted({int(n.split(".")[0]) for n, _ in entries})
    assert versions == [0, 1] and all(done for _, done in entries), entries
    read = DeltaTable(delta_rs_uri(table), storage_options=options)
    assert read.version() == 1
    assert sorted(read.to_pyarrow_table()["n"].to_pylist()) == [100, 101]
