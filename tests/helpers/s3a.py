"""The s3a integration tests' shared steps: the eos-ingest CLI as a user runs it, what delta-rs
(a reader that is not Spark) finds in a table, and the commit coordinator's entries."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sqlalchemy import create_engine, text

from eos_ingest.storage.object_stores import delta_rs_table

CLI = str(Path(sys.executable).with_name("eos-ingest"))


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`eos-ingest <args>` in its own process; output captured, never raises on a non-zero exit."""
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=900, check=False)


def identities(location: str, topic: str) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row of the table read by delta-rs, counted (a copy too many
    shows as 2). Needs the AWS_* variables in this process's environment."""
    table = delta_rs_table(location)
    assert table is not None, f"no Delta table at {location}"
    rows = table.to_pyarrow_table(columns=["kafka_topic", "kafka_partition", "kafka_offset"]).to_pylist()
    assert {r["kafka_topic"] for r in rows} <= {topic}
    return Counter((r["kafka_partition"], r["kafka_offset"]) for r in rows)


def commit_entries(control_db_url: str, table_prefix: str) -> list[tuple[str, str, bool]]:
    """(table_path, file_name, complete) of the coordinator's entries under `table_prefix`."""
    engine = create_engine(control_db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT table_path, file_name, complete FROM eos_delta_commits "
                    "WHERE table_path LIKE :p ORDER BY table_path, file_name"
                ),
                {"p": f"{table_prefix}%"},
            ).all()
    finally:
        engine.dispose()
    return [(r[0], r[1], bool(r[2])) for r in rows]


def spark_app_argv(app: Path) -> list[str]:
    """spark-submit of `app` (a Python Spark application) on local[1], with the s3a jars and the
    commit coordinator as the s3a log store, as eos-ingest starts its own small jobs (job_conf:
    the small-batches driver profile and the class archive)."""
    from eos_ingest.spark.session import local_jars, spark_submit_binary
    from eos_ingest.spark.submit import job_conf

    argv = [spark_submit_binary(), "--master", "local[1]", "--driver-memory", "512m",
            "--jars", ",".join(local_jars(object_storage=True))]  # fmt: skip
    for key, value in job_conf("local[1]", object_storage=True, job_records=0).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(app)]


def s3_objects(access_env: dict[str, str], prefix: str) -> list[str]:
    """Every object under s3a://`prefix` (bucket/key paths), listed with pyarrow's S3 client."""
    from pyarrow.fs import FileSelector, S3FileSystem

    from eos_ingest.config.table_location import S3A
    from eos_ingest.storage.object_stores import S3Access

    access = S3Access.from_env(access_env)
    fs = S3FileSystem(access_key=access.access_key, secret_key=access.secret_key,
                      endpoint_override=access.endpoint, scheme="http", region="us-east-1")  # fmt: skip
    try:
        found = fs.get_file_info(FileSelector(prefix.removeprefix(S3A), recursive=True, allow_not_found=True))
    except FileNotFoundError:  # a prefix emptied meanwhile: s3proxy drops its folders as they empty
        return []
    return [f.path for f in found if f.type.name == "File"]


def delete_objects(access_env: dict[str, str], prefix: str) -> None:
    """Deletes every object under s3a://`prefix`, as an operator deleting a table would."""
    from pyarrow.fs import S3FileSystem

    from eos_ingest.storage.object_stores import S3Access

    access = S3Access.from_env(access_env)
    fs = S3FileSystem(access_key=access.access_key, secret_key=access.secret_key,
                      endpoint_override=access.endpoint, scheme="http", region="us-east-1")  # fmt: skip
    # One DeleteObject per key: s3proxy's filesystem provider stalls on a multi-object delete.
    # Deepest first; a folder marker pyarrow leaves behind (re-creating an emptied parent) goes
    # in a later round.
    for _ in range(5):
        left = sorted(s3_objects(access_env, prefix), key=lambda p: -p.count("/"))
        if not left:
            return
        for path in left:
            try:
                fs.delete_file(path)
            except OSError:  # gone, or a folder marker ("<path>/")
                with contextlib.suppress(OSError):
                    fs.delete_dir(path)
    raise AssertionError(f"objects left under {prefix}: {s3_objects(access_env, prefix)}")
