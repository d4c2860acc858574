"""The commit coordinator with exactly the grants docs/object-storage.md documents: a PostgreSQL
role that does not own eos_delta_commits (an administrator ran the page's SQL) and has only the
documented privileges commits to an s3a table, and the cleanup after each commit still deletes
the entries more than keep_versions below it and their temporary files in `_delta_log/.tmp/`.
On s3proxy with a PostgreSQL control DB."""

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
from tests.s3a_helpers import s3_objects, spark_app_argv

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)

APP = Path(__file__).with_name("s3a_coordinator_app.py")
DOC = paths.REPO_ROOT / "docs" / "object-storage.md"
COMMITS, KEEP = 8, 3


def documented_sql() -> list[str]:
    """The statements of the page's SQL block for the coordinator's table and grants (role `eos`)."""
    block = re.search(r"```sql\n(-- the commit coordinator's table.*?)```", DOC.read_text(), re.S)
    assert block, f"{DOC} has no ```sql block starting with '-- the commit coordinator's table'"
    body = "\n".join(line for line in block.group(1).splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


@postgres_only
def test_with_the_documented_grants_old_entries_and_their_temp_files_are_deleted(
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
        table = f"s3a://{s3_server.make_bucket()}/grants"
        env = {**spark_submit_env(), **s3_server.env,
               "EOS_TEST_CONTROL_DB_URL": role_url.render_as_string(hide_password=False),
               "EOS_TEST_JDBC_SETTINGS": f'{{"eos.delta.jdbc.keep_versions": "{KEEP}"}}'}  # fmt: skip
        log = tmp_path / "app.log"
        with log.open("w") as err:
            done = subprocess.run(
                [*spark_app_argv(APP), "append", table, "0", str(COMMITS)],
                env=env, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1200, check=False,
            )  # fmt: skip
        app_log = log.read_text()
        assert done.returncode == 0, f"{done.stdout}\n{app_log[-4000:]}"
        assert done.stdout.split() == " ".join(f"committed {v}" for v in range(COMMITS)).split()
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

        from deltalake import DeltaTable

        from eos_ingest.storage.object_stores import S3Access, delta_rs_uri

        options = S3Access.from_env(s3_server.env).storage_options()
        assert sorted(
            DeltaTable(delta_rs_uri(table), storage_options=options).to_pyarrow_table()["n"].to_pylist()
        ) == list(range(COMMITS))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE {role}"))
        admin.dispose()
