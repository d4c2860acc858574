"""`eos-ingest maintain` beside batches that commit to the same table (issue 31, items 1 and 6).

- VACUUM never deletes the staged files of a batch in flight: a batch planned and staged while
  OPTIMIZE runs keeps its files, and its commit reads back whole;
- while maintain holds the VACUUM lock no attempt takes a fence (it writes nothing, exit 75);
- an OPTIMIZE that loses to a batch's replace is retried, and past its tries ends with one line
  and the retriable exit 75.

The batches run as the spark-submit job runs them (run_fenced, execute_batch) on the test's
session; maintain runs in this process too (threads share the session, as `eos-ingest maintain`
would run its own). The pauses are Delta's own Python API wrapped, so the same test runs on code without
eos-ingest's fault points.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from delta.tables import DeltaOptimizeBuilder, DeltaTable
from deltalake import DeltaTable as RsTable

from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.batch.sequence import run_fenced
from eos_ingest.errors import MaintenanceBusyError, exit_code
from eos_ingest.service.operations import maintain, open_store, plan_batch
from eos_ingest.storage.delta import maintenance, writer
from eos_ingest.storage.table_format import Replace
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

WAIT_S = 240  # bound on every wait of these tests
# One Kafka timestamp for every record of these tests, so every batch writes the same event_date
# partition: OPTIMIZE loses to a replace only when it compacts the files the replace removes. A
# test running across midnight UTC put its later batches in the next day's partition, and OPTIMIZE
# won its single try (make test of 2b24469). The time of the module's import, not a fixed date: a
# week-old record would fall to the broker's retention, and one ahead of the clock is refused.
STAMP_MS = int(time.time() * 1000)


def produce(bootstrap: str, topic: str, first_id: int, count: int = 100) -> None:
    producer = TxProducer(bootstrap)
    producer.begin()
    rows = [{"id": first_id + i, "name": "x", "amount": 1.0} for i in range(count)]
    producer.send(topic, rows, timestamp_ms=STAMP_MS)
    producer.commit()


def two_batches(spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path):
    """A pipeline whose table holds 2 small batches (several small files: OPTIMIZE has work)."""
    topic = make_topic(partitions=2)
    config = make_pipeline([topic], f"sqlite:///{tmp_path / 'control.db'}")
    for i in range(2):
        produce(kafka_bootstrap, topic, i * 100)
        assert ingest_once(spark, config) is not None
    return topic, config


def table_count(spark, path: Path) -> int:
    """Every row of the table's current version, read by Spark: fails if a file it lists is gone."""
    return spark.read.format("delta").load(str(path)).count()


def test_a_batch_staged_while_optimize_runs_keeps_its_files_through_vacuum_and_commits_whole(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, config = two_batches(spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path)
    store = open_store(config)
    optimized, staged = threading.Event(), threading.Event()
    real_compaction = DeltaOptimizeBuilder.executeCompaction

    def compaction_then_wait(builder):  # OPTIMIZE of the table: then batch 2 is planned and staged
        result = real_compaction(builder)
        if not optimized.is_set():
            optimized.set()
            assert staged.wait(WAIT_S)
        return result

    monkeypatch.setattr(DeltaOptimizeBuilder, "executeCompaction", compaction_then_wait)
    with ThreadPoolExecutor(1) as pool:
        # No batch is planned when maintain starts: retention 0 is taken at the start.
        maintained: Future = pool.submit(maintain, config, store, spark, retention_hours=0)
        assert optimized.wait(WAIT_S)
        produce(kafka_bootstrap, topic, 200)
        batch, _ = plan_batch(config, store)
        assert batch is not None
        # Batch 2 runs as the job runs it (run_fenced), in a thread of this process, and pauses
        # after its gate with its table files staged, not committed.
        pause = tmp_path / "pause"
        monkeypatch.setenv(PAUSE_BEFORE_TABLE_COMMIT_ENV, str(pause))
        with ThreadPoolExecutor(1) as batch_pool:
            ran: Future = batch_pool.submit(run_fenced, spark, config, store, batch)
            try:
                wait_until(lambda: pause.exists() or ran.done())
                assert not ran.done(), ran.result()
                staged.set()
                with pytest.raises(MaintenanceBusyError) as busy:
                    maintained.result(WAIT_S)
            finally:
                staged.set()
                pause.unlink(missing_ok=True)
            assert ran.result(WAIT_S).records_written == 100
    text = str(busy.value)
    assert "VACUUM skipped" in text and f"batch {batch.batch_id}" in text, text

    assert table_count(spark, config.output_path) == 300  # every staged file was there to commit
    assert store.get_batch(batch.batch_id).status.value == "committed"
    assert verify_pipeline(spark, config).ok

    # No batch in flight now: the same maintain runs to its end, and the table still reads whole.
    report = maintain(config, store, spark, retention_hours=0)
    assert report["table"]["vacuum"] is not None
    assert table_count(spark, config.output_path) == 300
    assert verify_pipeline(spark, config).ok


def test_while_maintain_holds_the_vacuum_lock_no_attempt_takes_a_fence_and_the_batch_runs_after(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, config = two_batches(spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path)
    store = open_store(config)
    vacuuming, release = threading.Event(), threading.Event()
    real_vacuum = DeltaTable.vacuum

    def wait_then_vacuum(table, *args, **kwargs):
        if not vacuuming.is_set():
            vacuuming.set()
            assert release.wait(WAIT_S)
        return real_vacuum(table, *args, **kwargs)

    monkeypatch.setattr(DeltaTable, "vacuum", wait_then_vacuum)
    with ThreadPoolExecutor(1) as pool:
        maintained: Future = pool.submit(maintain, config, store, spark, retention_hours=0)
        try:
            assert vacuuming.wait(WAIT_S)
            produce(kafka_bootstrap, topic, 200)
            batch, _ = plan_batch(config, store)  # planning is not held up
            assert batch is not None
            with pytest.raises(MaintenanceBusyError, match="vacuuming the tables") as busy:
                store.take_fence(batch.batch_id)
            assert busy.value.retriable
            assert store.get_batch(batch.batch_id).fence == 0  # no attempt owns it
        finally:
            release.set()
        report = maintained.result(WAIT_S)
    assert report["table"]["vacuum"] is not None

    result = ingest_once(spark, config)  # the lock is gone with maintain: the batch runs
    assert result is not None and result.batch_id == batch.batch_id
    assert table_count(spark, config.output_path) == 300
    assert verify_pipeline(spark, config).ok


def replace_committed_mid_optimize(spark, config, store, first) -> dict | MaintenanceBusyError:
    """maintain() with a batch's replace (Delta's own write, staged before) committed after its
    OPTIMIZE read the table and before OPTIMIZE commits: the cores are held by a job that waits on
    a file, so OPTIMIZE's first Spark job (after its transaction started) queues behind it."""
    rows = spark.read.format("delta").load(str(config.output_path)).where(f"batch_id = {first.batch_id}")
    staged = writer.stage(
        spark,
        Replace(
            rows.localCheckpoint(),
            str(config.output_path),
            first.ranges,
            first.batch_id,
            config.output.partition_by,
        ),
    )
    hold = Path(str(config.output_path) + ".hold")
    hold.write_text("")
    tracker = spark.sparkContext.statusTracker()

    def held(_: object) -> None:
        deadline = time.monotonic() + WAIT_S
        while os.path.exists(str(hold)) and time.monotonic() < deadline:
            time.sleep(0.05)

    def running_tasks() -> int:
        infos = (tracker.getStageInfo(s) for s in tracker.getActiveStageIds())
        return sum(i.numActiveTasks for i in infos if i is not None)

    with ThreadPoolExecutor(3) as pool:
        holder = pool.submit(lambda: spark.sparkContext.parallelize(range(2), 2).foreach(held))
        try:
            wait_until(lambda: running_tasks() == 2)
            jobs = set(tracker.getActiveJobsIds())
            maintained = pool.submit(maintain, config, store, spark, retention_hours=0)
            wait_until(lambda: bool(set(tracker.getActiveJobsIds()) - jobs) or maintained.done())
            assert not maintained.done(), maintained.result()
            # The replace lands between OPTIMIZE's read and its commit. Its log entry is written on
            # the driver; what Delta does after it may need the cores, so they are freed then.
            version = RsTable(str(config.output_path)).version()  # delta-rs: no Spark job
            entry = config.output_path / "_delta_log" / f"{version + 1:020d}.json"
            committed = pool.submit(staged.commit)
            wait_until(lambda: entry.exists() or committed.done())
        finally:
            hold.unlink()
        holder.result(WAIT_S)
        assert committed.result(WAIT_S) == version + 1
        try:
            return maintained.result(WAIT_S)
        except MaintenanceBusyError as exc:
            return exc


def wait_until(condition, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_optimize_that_loses_to_a_replace_is_retried_and_past_its_tries_exits_75_with_one_line(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, config = two_batches(spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path)
    store = open_store(config)
    first = store.list_batches(config.name, 10)[-1]

    report = replace_committed_mid_optimize(spark, config, store, first)
    assert isinstance(report, dict), report
    assert report["table"]["optimize"]["attempts"] == 2, report  # lost once, then compacted
    assert report["table"]["after"]["files"] <= 2  # one per date partition
    assert table_count(spark, config.output_path) == 200
    assert verify_pipeline(spark, config).ok

    # One try only: maintain gives up with one line and the retriable exit 75, nothing changed.
    monkeypatch.setattr(maintenance, "OPTIMIZE_ATTEMPTS", 1)
    for i in range(2):  # new small files for OPTIMIZE to compact
        produce(kafka_bootstrap, topic, 1000 + i * 100)
        assert ingest_once(spark, config) is not None
    busy = replace_committed_mid_optimize(spark, config, store, first)
    assert isinstance(busy, MaintenanceBusyError), busy
    assert exit_code(busy) == 75 and "\n" not in str(busy)
    assert "OPTIMIZE of" in str(busy) and "run maintain again" in str(busy)
    assert table_count(spark, config.output_path) == 400
    assert verify_pipeline(spark, config).ok
