"""A full disk under the table's folder mid-batch: the table's files are staged, then the file
system fills before Delta's commit. The batch fails cleanly: one line naming the folder, its free
space and what to do, exit 75 with the batch left planned, nothing committed (the staged files are
in no Delta commit, so no reader sees them); once space is freed the next run commits it once.
On main (31a5b8a) the line was PartialWriteError's "the table may hold it" and named no full disk.
The control DB's SQLite file on the small disk, filling after the table's commit and before the
offsets' one: the same line for its file, exit 75, the offsets unmoved, the batch planned, and the
rerun leaves each record once. On main (c32b458) that was ControlStoreUnavailableError's "the
connection failed during COMMIT, so it is unknown whether the transaction was applied".
The state folder (EOS_STATE_DIR) full while the gate writes its GX results: the line names the
state folder; on main (c32b458) it named the table's folder, which had space.

The folder is a size-limited tmpfs the test mounts, so it needs root; elsewhere it is skipped.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eos_ingest.batch.attempt import PAUSE_BEFORE_COMMIT_ENV, PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.batch.sequence import run_fenced
from eos_ingest.config.model import PipelineConfig
from eos_ingest.control.batches import Batch
from eos_ingest.control.store import BatchStatus, ControlStore
from eos_ingest.errors import EXIT_RETRIABLE, DiskFullError, EosIngestError, exit_code
from eos_ingest.service.operations import open_store, plan_batch
from tests.fixtures.pipelines import pending_scheduled_batch, table_count, verify_pipeline
from tests.helpers.kafka import TxProducer
from tests.helpers.rescan import assert_each_committed_record_once

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DISK_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for the test (root only); another size by indirect parametrization."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    size = getattr(request, "param", DISK_BYTES)
    mount = tmp_path / "small-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Fills `disk` to its last byte; the filler's path, to free the space again."""
    filler = disk / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def _planned_batch(config: PipelineConfig, kafka_bootstrap: str, topic: str) -> tuple[ControlStore, Batch]:
    """300 records in one committed transaction, and the batch planned over them."""
    producer = TxProducer(kafka_bootstrap)
    producer.begin()
    producer.send(topic, [{"id": i, "name": f"n{i}", "amount": 1.0} for i in range(300)])
    producer.commit()
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    return store, batch


@contextmanager
def _disk_filled_when(marker: Path, disk: Path) -> Iterator[list[Path]]:
    """Fills `disk` once the attempt pauses at its fault point (`marker` appears), then lets it go
    on; yields the list that gets the filler's path, to free the space again."""
    filled: list[Path] = []

    def fill_when_paused() -> None:
        deadline = time.monotonic() + 300
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        filled.append(_fill(disk))
        marker.unlink()

    filler = threading.Thread(target=fill_when_paused, daemon=True)
    filler.start()
    try:
        yield filled
    finally:
        filler.join(10)


def _assert_named_and_retriable(error: BaseException, where: Path, what: str) -> None:
    """The batch's error: DiskFullError, exit 75, one line naming `where` and its free bytes."""
    line = str(error)
    print(f"{what}: exit {exit_code(error)}: {line}")
    assert exit_code(error) == EXIT_RETRIABLE
    assert isinstance(error, DiskFullError)
    assert "\n" not in line and str(where) in line and "bytes free now" in line


def _rerun(spark: SparkSession, config: PipelineConfig, store: ControlStore, batch: Batch) -> None:
    """The next attempt, after space was freed: the same planned batch, run to its commit."""
    again = pending_scheduled_batch(store, config.name)
    assert again is not None and again.batch_id == batch.batch_id
    run_fenced(spark, config, store, again)


def test_a_disk_that_fills_before_the_table_commit_fails_the_batch_cleanly(
    spark, make_pipeline, topic, kafka_bootstrap, tmp_path, small_disk, monkeypatch
) -> None:
    config = make_pipeline(
        [topic], f"sqlite:///{tmp_path / 'control.db'}", output={"path": str(small_disk / "events")}
    )
    store, batch = _planned_batch(config, kafka_bootstrap, topic)

    # The attempt pauses with its files staged; the disk fills; the attempt goes on to commit.
    marker = tmp_path / "paused"
    monkeypatch.setenv(PAUSE_BEFORE_TABLE_COMMIT_ENV, str(marker))
    with _disk_filled_when(marker, small_disk) as filled, pytest.raises(EosIngestError) as raised:
        run_fenced(spark, config, store, batch)
    _assert_named_and_retriable(raised.value, small_disk / "events", "full disk at the table's commit")
    assert ControlStore(config.control_db_url).get_batch(batch.batch_id).status is BatchStatus.PLANNED
    filled[0].unlink()
    assert table_count(spark, config) == 0  # the staged files are in no commit

    monkeypatch.delenv(PAUSE_BEFORE_TABLE_COMMIT_ENV)
    _rerun(spark, config, store, batch)
    assert table_count(spark, config) == 300
    report = verify_pipeline(spark, config)
    assert (report.duplicates, report.missing, report.unexpected) == (0, 0, 0), report
    assert_each_committed_record_once(spark, config)


def test_a_control_db_disk_that_fills_before_the_offsets_commit_fails_the_batch_cleanly(
    spark, make_pipeline, topic, kafka_bootstrap, tmp_path, small_disk, monkeypatch
) -> None:
    """The control DB (SQLite, the default) on the small disk: the table's commit lands, then the
    disk fills before the offsets' transaction. The batch stays planned; the rerun replaces the
    same ranges, so the table still holds each record once."""
    control_db = small_disk / "control.db"
    config = make_pipeline([topic], f"sqlite:///{control_db}", output={"path": str(tmp_path / "events")})
    store, batch = _planned_batch(config, kafka_bootstrap, topic)
    offsets_before = store.committed_offsets(config.name)

    marker = tmp_path / "paused"
    monkeypatch.setenv(PAUSE_BEFORE_COMMIT_ENV, str(marker))
    with _disk_filled_when(marker, small_disk) as filled, pytest.raises(EosIngestError) as raised:
        run_fenced(spark, config, store, batch)
    _assert_named_and_retriable(raised.value, control_db, "full disk at the offsets' commit")
    filled[0].unlink()
    assert ControlStore(config.control_db_url).get_batch(batch.batch_id).status is BatchStatus.PLANNED
    assert ControlStore(config.control_db_url).committed_offsets(config.name) == offsets_before

    monkeypatch.delenv(PAUSE_BEFORE_COMMIT_ENV)
    _rerun(spark, config, store, batch)
    assert ControlStore(config.control_db_url).get_batch(batch.batch_id).status is BatchStatus.COMMITTED
    assert table_count(spark, config) == 300
    report = verify_pipeline(spark, config)
    assert (report.duplicates, report.missing, report.unexpected) == (0, 0, 0), report
    assert_each_committed_record_once(spark, config)


# The gate's GX context takes about 5 MB of the state folder on a batch's first run (Data Docs'
# assets, the suite, the results): the disk must hold that once space is freed.
@pytest.mark.parametrize("small_disk", [32 * 1024 * 1024], indirect=True)
def test_a_full_state_folder_fails_the_batch_cleanly_and_is_named(
    spark, make_pipeline, topic, kafka_bootstrap, tmp_path, small_disk, monkeypatch
) -> None:
    """The state folder (EOS_STATE_DIR: the gate's GX context and Data Docs) on the small disk,
    full before the batch runs; the table and the control DB elsewhere. The line names the state
    folder, not the table's; once space is freed the rerun commits once."""
    state = small_disk / "state"
    monkeypatch.setenv("EOS_STATE_DIR", str(state))
    config = make_pipeline(
        [topic], f"sqlite:///{tmp_path / 'control.db'}", output={"path": str(tmp_path / "events")}
    )
    store, batch = _planned_batch(config, kafka_bootstrap, topic)

    filler = _fill(small_disk)
    with pytest.raises(EosIngestError) as raised:
        run_fenced(spark, config, store, batch)
    _assert_named_and_retriable(raised.value, state, "full state folder")
    assert ControlStore(config.control_db_url).get_batch(batch.batch_id).status is BatchStatus.PLANNED
    filler.unlink()
    assert table_count(spark, config) == 0

    _rerun(spark, config, store, batch)
    assert table_count(spark, config) == 300
    report = verify_pipeline(spark, config)
    assert (report.duplicates, report.missing, report.unexpected) == (0, 0, 0), report
    assert_each_committed_record_once(spark, config)
