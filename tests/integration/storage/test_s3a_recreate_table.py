"""A table recreated at the same s3a path after its objects were deleted (docs/formats.md: what
to do when a key format changes): the coordinator still holds the old log's entries, including an
unfinished one (a writer of the old table killed mid-commit, whose temporary file went with the
table). The new table's version 0 is written, the old entries are forgotten, and readers (Spark,
delta-rs) see only the new table. On s3proxy with a PostgreSQL control DB."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.object_stores import S3Access, delta_rs_uri
from tests.s3a_helpers import commit_entries, delete_objects, s3_objects, spark_app_argv

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)

APP = Path(__file__).with_name("s3a_coordinator_app.py")


def append(
    table: str, first: int, commits: int, env: dict[str, str], log: Path
) -> subprocess.CompletedProcess[str]:
    with log.open("w") as err:
        return subprocess.run(
            [*spark_app_argv(APP), "append", table, str(first), str(commits)],
            env=env, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1200, check=False,
        )  # fmt: skip


@postgres_only
def test_a_table_recreated_at_the_same_path_after_its_objects_were_deleted(
    s3_server, control_db_url, tmp_path
) -> None:
    table = f"s3a://{s3_server.make_bucket()}/tables/recreated"
    env = {**spark_submit_env(), **s3_server.env, "EOS_TEST_CONTROL_DB_URL": control_db_url}
    old = append(table, 0, 3, env, tmp_path / "old.log")
    assert old.returncode == 0, f"{old.stdout}\n{(tmp_path / 'old.log').read_text()[-4000:]}"
    assert [int(n) for n in old.stdout.split()[1::2]] == [0, 1, 2]
    assert {e[1].split(".")[0] for e in commit_entries(control_db_url, table)} >= {
        f"{v:020d}" for v in range(3)
    }

    # The table is deleted as an operator deletes it: every object under its path. A writer of
    # the old table had taken version 3 and was killed before its copy: its entry is unfinished
    # and names a temporary file that is gone with the rest.
    delete_objects(s3_server.env, table)
    assert s3_objects(s3_server.env, table) == []
    engine = create_engine(control_db_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO eos_delta_commits (table_path, file_name, temp_path, complete) VALUES (:t, :f, :p, false)"
            ),
            {"t": table, "f": f"{3:020d}.json", "p": f".tmp/{3:020d}.json.{uuid.uuid4()}"},
        )
    engine.dispose()

    # The new table: versions 0 and 1, with new rows only.
    log = tmp_path / "new.log"
    new = append(table, 100, 2, env, log)
    assert new.returncode == 0, f"{new.stdout}\n{log.read_text()[-6000:]}"
    assert [int(n) for n in new.stdout.split()[1::2]] == [0, 1]
    entries = [(name, done) for path, name, done in commit_entries(control_db_url, table) if path == table]
    versions = sorted({int(name.split(".")[0]) for name, _ in entries})
    assert versions == [0, 1] and all(done for _, done in entries), entries

    from deltalake import DeltaTable

    read = DeltaTable(delta_rs_uri(table), storage_options=S3Access.from_env(s3_server.env).storage_options())
    assert read.version() == 1
    assert sorted(read.to_pyarrow_table()["n"].to_pylist()) == [100, 101]
