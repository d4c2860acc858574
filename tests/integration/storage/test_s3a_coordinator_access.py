"""A Delta table on s3a whose commit coordinator's database refuses the pipeline's user (issue
48): PostgreSQL's insufficient_privilege (SQLState 42501) on the coordinator's table
eos_delta_commits, after a REVOKE of INSERT while the batch waits before its table commit, is a
refusal (storage/commit_outcomes.delta_refused_state), not a commit of unknown outcome: the run
exits 2 (a person must act) with one line naming the table, the SQLState and the grant, instead
of exit 75 and retries that meet the same refusal. The batch stays planned and neither table holds
a row of it; once the grant is back, the rerun commits the batch: one copy of each record, by
delta-rs and by a raw read_committed read of the topic.

Real broker, Spark (`eos-ingest run` processes: the coordinator is set on a job's own session),
s3proxy and PostgreSQL (the session's test server, with a role of this test's own)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.control.schema import BatchStatus
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import EXIT_NEEDS_A_PERSON
from eos_ingest.storage.object_stores import delta_rs_table
from tests.helpers.kafka import TxProducer, read_committed
from tests.helpers.postgres_roles import pipeline_role
from tests.helpers.s3a import CLI, cli, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)

RECORDS = 8


def rows(first: int, end: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(first, end)]


@postgres_only
def test_a_coordinator_database_that_refuses_the_pipelines_user_exits_2_leaves_the_batch_planned_and_names_the_grant(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, tmp_path, monkeypatch
) -> None:
    # The pipeline's user owns what it creates (the control tables, the coordinator's table), as a
    # deployment's would; a DBA's REVOKE takes INSERT on eos_delta_commits from it.
    with pipeline_role(control_db_url) as role:
        as_admin, user_url = role.as_admin, role.url
        topic = make_topic(partitions=1)
        TxProducer(kafka_bootstrap).transaction(topic, rows(0, RECORDS), commit=True, partition=0)
        bucket = s3_server.make_bucket()
        config = make_pipeline(
            [topic], user_url, output={"path": f"s3a://{bucket}/tables/refused"}, kafka_conn_id=None
        )
        env = {**os.environ, **s3_server.env}
        pause = tmp_path / "pause"
        args = [CLI, "run", "--config", str(config.source), "--master", "local[1]"]
        # The coordinator's table exists (it is made on the first use) and was readable; the
        # REVOKE lands while the batch waits before its table commit.
        paused_env = {**env, PAUSE_BEFORE_TABLE_COMMIT_ENV: str(pause)}
        job = subprocess.Popen(args, env=paused_env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 600
        while not pause.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pause.exists(), job.communicate(timeout=60)[1][-4000:]
        as_admin(f'REVOKE INSERT ON eos_delta_commits FROM "{role.name}"')
        pause.unlink()
        _, stderr = job.communicate(timeout=600)

        assert job.returncode == EXIT_NEEDS_A_PERSON, stderr[-4000:]
        (line,) = [
            line for line in stderr.splitlines() if line.startswith("eos-ingest: CatalogAccessError: ")
        ]
        for named in ("42501", "INSERT", "eos_delta_commits", "control_db_url", "stays planned"):
            assert named in line, (named, line)
        store = ControlStore(user_url)
        try:
            (batch,) = store.list_batches(config.name)
            assert batch.status is BatchStatus.PLANNED, batch
            assert set(store.committed_offsets(config.name).values()) <= {0}  # nothing committed
        finally:
            store.close()
        for key, value in s3_server.env.items():  # delta-rs reads with the same AWS_* variables
            monkeypatch.setenv(key, value)
        for location in (config.output_path, config.quarantine_path):
            # The first batch creates both tables: no table, or one with no row of it.
            if delta_rs_table(str(location)) is not None:
                assert identities(str(location), topic) == {}, location

        as_admin(f'GRANT INSERT ON eos_delta_commits TO "{role.name}"')
        again = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
        assert again.returncode == 0, again.stderr[-4000:]
        store = ControlStore(user_url)
        try:
            (batch,) = store.list_batches(config.name)
            assert batch.status is BatchStatus.COMMITTED, batch
        finally:
            store.close()
        committed = {(p, o) for p, o, _ in read_committed(kafka_bootstrap, topic, 1)}
        assert len(committed) == RECORDS
        assert identities(str(config.output_path), topic) == dict.fromkeys(committed, 1)
