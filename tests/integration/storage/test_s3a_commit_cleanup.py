"""The commit coordinator's table stays bounded, with exactly the grants docs/object-storage.md
documents: a PostgreSQL role that does not own eos_delta_commits (an administrator ran the page's
SQL) and has only the documented privileges commits to an s3a table; after each commit the writer
deletes the entries more than keep_versions below it and their temporary files in
`_delta_log/.tmp/`; and a writer that paused past that cleanup (a zombie) still cannot take an old
version whose entry is gone. On s3proxy with a PostgreSQL control DB.

(test_s3a_commit_grants.py, the same 8 commits with keep_versions 3 as the documented role in a
Spark application of its own, was merged in here: the cleanup and the zombie now run as that role,
so one application serves both.)"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from eos_ingest import paths
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.object_stores import S3Access, delta_rs_uri
from tests.helpers.s3a import commit_entries, s3_objects, spark_app_argv

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)

APP = Path(__file__).parents[2] / "spark_apps" / "s3a_commit_cleanup_app.py"
DOC = paths.REPO_ROOT / "docs" / "object-storage.md"
COMMITS, KEEP, ZOMBIE_VERSION = 8, 3, 2


def documented_sql() -> list[str]:
    """The statements of the page's SQL block for the coordinator's table and grants (role `eos`)."""
    block = re.search(r"```sql\n(-- the commit coordinator's table.*?)```", DOC.read_text(), re.S)
    assert block, f"{DOC} has no ```sql block starting with '-- the commit coordinator's table'"
    body = "\n".join(line for line in block.group(1).splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


@postgres_only
def test_with_the_documented_grants_old_entries_and_their_temp_files_are_deleted_and_a_zombie_cannot_reuse_them(
    s3_server, control_db_url, tmp_path
) -> None:
    statements = documented_sql()
    assert any(s.upper().startswith("GRANT ") for s in statements), statements
    role, password = f"eos_r_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    admin = create_engine(control_db_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
            for statement in statements:
                conn.execute(text(re.sub(r"\bTO eos\b", f"TO {role}", statement)))
        role_url = make_url(control_db_url).set(username=role, password=password)
        table = f"s3a://{s3_server.make_bucket()}/cleanup"
        env = {**spark_submit_env(), **s3_server.env,
               "EOS_TEST_CONTROL_DB_URL": role_url.render_as_string(hide_password=False)}  # fmt: skip
        log = tmp_path / "app.log"
        with log.open("w") as err:
            done = subprocess.run(
                [*spark_app_argv(APP), table, str(COMMITS), str(KEEP), str(ZOMBIE_VERSION)],
                env=env, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1200, check=False,
            )  # fmt: skip
        print(done.stdout)
        app_log = log.read_text()
        assert done.returncode == 0, f"{done.stdout}\n{app_log[-4000:]}"
        assert [line for line in done.stdout.splitlines() if line.startswith("committed")] == [
            f"committed {v}" for v in range(COMMITS)
        ]
        assert "could not delete" not in app_log, app_log[-4000:]

        # Bounded: the last commit (version 7) deleted every entry below 7 - KEEP, as this role.
        with admin.connect() as conn:
            rows = conn.execute(
                text("SELECT file_name, temp_path, complete FROM eos_delta_commits WHERE table_path = :t"),
                {"t": table},
            ).all()
        versions = sorted({int(r.file_name.split(".")[0]) for r in rows})
        assert versions == list(range(COMMITS - 1 - KEEP, COMMITS)), rows
        assert all(r.complete for r in rows), rows

        # `_delta_log/.tmp/` holds the temporary files of the kept entries only: those of the
        # deleted entries went with them.
        temp = sorted(os.path.basename(p) for p in s3_objects(s3_server.env, f"{table}/_delta_log/.tmp"))
        assert temp == sorted(os.path.basename(r.temp_path) for r in rows), (temp, rows)

        # The zombie's insert for version 2 (entry deleted, 2.json long written) is refused as a
        # taken version, so Delta would re-read the log and retry above it; nothing was inserted.
        assert "zombie refused java.nio.file.FileAlreadyExistsException" in done.stdout, done.stdout
        assert not [r for r in rows if r.file_name.startswith(f"{ZOMBIE_VERSION:020d}")]
        assert commit_entries(control_db_url, table) == [
            (table, r.file_name, r.complete) for r in sorted(rows, key=lambda r: r.file_name)
        ]

        # Every commit is in the table (delta-rs, not the writer's code, reads it).
        from deltalake import DeltaTable

        options = S3Access.from_env(s3_server.env).storage_options()
        read = DeltaTable(delta_rs_uri(table), storage_options=options)
        assert sorted(read.to_pyarrow_table()["n"].to_pylist()) == list(range(COMMITS))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE {role}"))
        admin.dispose()
