"""The commit coordinator's table stays bounded: after each commit the writer deletes the entries
more than keep_versions below it, and a writer that paused past that cleanup (a zombie) still
cannot take an old version whose entry is gone. On s3proxy with a PostgreSQL control DB."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.object_stores import S3Access, delta_rs_uri
from tests.s3a_helpers import commit_entries, spark_app_argv

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)

APP = Path(__file__).with_name("s3a_commit_cleanup_app.py")
COMMITS, KEEP, ZOMBIE_VERSION = 8, 3, 2


@postgres_only
def test_old_commit_entries_are_deleted_and_a_zombie_cannot_reuse_their_versions(
    s3_server, control_db_url, tmp_path
) -> None:
    table = f"s3a://{s3_server.make_bucket()}/cleanup"
    env = {**spark_submit_env(), **s3_server.env, "EOS_TEST_CONTROL_DB_URL": control_db_url}
    log = tmp_path / "app.log"
    with log.open("w") as err:
        done = subprocess.run(
            [*spark_app_argv(APP), table, str(COMMITS), str(KEEP), str(ZOMBIE_VERSION)],
            env=env, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1200, check=False,
        )  # fmt: skip
    print(done.stdout)
    assert done.returncode == 0, f"{done.stdout}\n{log.read_text()[-4000:]}"
    assert [line for line in done.stdout.splitlines() if line.startswith("committed")] == [
        f"committed {v}" for v in range(COMMITS)
    ]

    # Bounded: the last commit (version 7) deleted every entry below 7 - KEEP.
    entries = [(name, done) for path, name, done in commit_entries(control_db_url, table) if path == table]
    versions = sorted({int(name.split(".")[0]) for name, _ in entries})
    assert versions == list(range(COMMITS - 1 - KEEP, COMMITS)), entries
    assert all(done for _, done in entries), entries

    # The zombie's insert for version 2 (entry deleted, 2.json long written) is refused as a
    # taken version, so Delta would re-read the log and retry above it; nothing was inserted.
    assert "zombie refused java.nio.file.FileAlreadyExistsException" in done.stdout, done.stdout
    assert not [n for n, _ in entries if n.startswith(f"{ZOMBIE_VERSION:020d}")]
    assert commit_entries(control_db_url, table) == [(table, n, d) for n, d in entries]

    # Every commit is in the table (delta-rs, not the writer's code, reads it).
    from deltalake import DeltaTable

    read = DeltaTable(delta_rs_uri(table), storage_options=S3Access.from_env(s3_server.env).storage_options())
    assert sorted(read.to_pyarrow_table().to_pydict()["n"]) == list(range(COMMITS))
