"""Which files `backfill --resume` deletes on Delta after the batch committed: only those a dead
attempt of that batch staged (storage/delta/dead_attempts.py). A real Delta table written with delta-rs;
the staged files are Parquet files beside its log, as Spark's staged write leaves them."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_ingest.storage.delta.dead_attempts import delete_dead_attempt_files

pytestmark = pytest.mark.integration

BATCH = 7


def rows(*batch_ids: int) -> pa.Table:
    return pa.table({"batch_id": pa.array(batch_ids, pa.int64()), "value": pa.array(range(len(batch_ids)))})


def staged(root: Path, name: str, table: pa.Table, at: float) -> str:
    """A Parquet file in the table's folder that no commit names, written at `at`."""
    path = root / name
    pq.write_table(table, path)
    os.utime(path, (at, at))
    return name


def test_only_the_unnamed_files_of_the_batch_written_before_its_commit_are_deleted(tmp_path: Path) -> None:
    root = tmp_path / "table"
    planned = datetime.now(UTC) - timedelta(minutes=10)
    write_deltalake(str(root), rows(1, 1))  # version 0: an older batch's rows
    now = time.time()
    dead = staged(root, "part-dead.parquet", rows(BATCH, BATCH), now - 300)
    mixed = staged(root, "part-rewrite.parquet", rows(1, 1), now - 300)  # a rewrite: other rows
    other = staged(root, "part-other-batch.parquet", rows(8), now - 300)  # another batch's attempt
    before_plan = staged(root, "part-old.parquet", rows(BATCH), planned.timestamp() - 3600)
    # Version 1: a zombie attempt of the batch committed to Delta (then its control commit was fenced).
    write_deltalake(str(root), rows(BATCH), mode="append")
    zombie = {a["path"] for a in pa.table(DeltaTable(str(root)).get_add_actions()).to_pylist()} - {
        a["path"] for a in pa.table(DeltaTable(str(root), version=0).get_add_actions()).to_pylist()
    }
    write_deltalake(str(root), rows(BATCH, BATCH), mode="overwrite")  # version 2: the batch's commit
    for version, at in ((1, now - 120), (2, now - 60)):
        os.utime(root / "_delta_log" / f"{version:020d}.json", (at, at))
    later = staged(root, "part-later.parquet", rows(BATCH), now)  # after the commit: maybe another's
    # Its file holds the batch's rows alone and is no longer current, but a commit names it (time travel).
    assert len(zombie) == 1
    for path in zombie:  # written before the batch's commit, as a zombie's are
        os.utime(root / path, (now - 200, now - 200))

    deleted = delete_dead_attempt_files(root, BATCH, planned, 2)

    assert deleted == [dead]
    for kept in (mixed, other, before_plan, later, *zombie):
        assert (root / kept).exists(), kept
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == 2  # the committed version reads whole
    assert delete_dead_attempt_files(root, BATCH, planned, None) == []  # not committed: nothing
