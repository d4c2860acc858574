"""The s3a integration tests' shared steps: the eos-ingest CLI as a user runs it, what delta-rs
(a reader that is not Spark) finds in a table, and the commit coordinator's entries."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from sqlalchemy import create_engine, text

from eos_ingest.object_storage import delta_rs_table

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
