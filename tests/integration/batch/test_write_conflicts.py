"""A write conflict (Delta's, or Iceberg's refused fast-forward), a partial write and a superseded
attempt, on the real tables and store: the job's steps (run_fenced) in the test's Spark session,
the exit code the job would give from the error they raise (job_exit)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.batch.sequence import execute_batch, run_fenced
from eos_ingest.cli import open_store, plan_batch
from eos_ingest.errors import EosIngestError, FencedError, OffsetsLostError, WriteConflictError, exit_code
from eos_ingest.storage.delta import writer
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.lost_races import CONFLICT_ATTEMPTS_ENV
from eos_ingest.storage.table_format import Replace, Txn, txn_app_id
from eos_ingest.storage.table_names import QUARANTINE, TABLE
from tests.fixtures.pipelines import ingest_once, on_formats, table_count, verify_pipeline
from tests.helpers.kafka import TxProducer
from tests.helpers.processes import AttemptInThread

pytestmark = pytest.mark.integration
sqlite_only = pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)


def produce(bootstrap: str, topic: str, first_id: int) -> None:
    """200 good records and 10 that are not JSON (they go to the quarantine table)."""
    producer = TxProducer(bootstrap)
    producer.begin()
    producer.send(topic, [{"id": first_id + i, "name": "x", "amount": 1.0} for i in range(200)])
    producer.send(topic, [b"not json"] * 10)
    producer.commit()


def job_exit(error: BaseException) -> int:
    """The spark-submit job's exit code for the error its batch raised (batch/job.py main: ours by
    errors.exit_code, any other one is Python's uncaught exception, 1)."""
    return exit_code(error) if isinstance(error, EosIngestError) else 1


def job_attempt(spark, config, store, batch_id: int) -> BaseException:
    """The spark-submit job's steps for the planned batch `batch_id` (run_fenced: a new fence, then
    the batch), in this process's Spark session, where they must fail: the error (job_exit gives
    the job's exit code). What is under test is what the failure leaves in the tables and the
    store, not the process: a spark-submit of its own cost ~15 s of CPU."""
    with pytest.raises(Exception) as failed:
        run_fenced(spark, config, store, store.get_batch(batch_id))
    return failed.value


def paused_attempt(spark, config, store, batch_id: int, pause: Path, monkeypatch) -> AttemptInThread:
    """job_attempt's steps started in a thread of this process, once they hold at the pause before
    the table's commit (the gate passed, the rows staged); they go on at attempt_error."""
    monkeypatch.setenv(PAUSE_BEFORE_TABLE_COMMIT_ENV, str(pause))
    attempt = AttemptInThread(spark, config, store, store.get_batch(batch_id), pause)
    attempt.wait_for_pause()
    monkeypatch.delenv(PAUSE_BEFORE_TABLE_COMMIT_ENV)  # held once: the tries after it run through
    return attempt


def attempt_error(attempt: AttemptInThread) -> BaseException:
    """What the attempt that was held at its pause raised once it went on."""
    attempt.go_on()
    attempt.join()
    assert not attempt.thread.is_alive(), "the attempt did not end in time"
    assert attempt.error is not None, "the attempt went through"
    return attempt.error


def rerun(spark, config, store, batch_id: int):
    fence = store.take_fence(batch_id)
    return execute_batch(spark, config, store, store.get_batch(batch_id), fence)


def planned_over_existing_tables(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url):
    """A pipeline whose first batch made both tables, and a planned second batch over 1,000 new
    records: (config, store, batch, the committed offsets before it)."""
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap, topic, 0)
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None  # both tables exist from here on
    produce(kafka_bootstrap, topic, 1000)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    return config, store, batch, store.committed_offsets(config.name)


def commit_beside(spark, config, which: str, n: int = 1) -> None:
    """Another writer's commit to the table (`which`) that adds no row: on Delta a table property
    (it conflicts with any transaction open on the table), on Iceberg an empty append to main (main
    moves, so a branch cut before it can no longer be fast-forwarded). Both take milliseconds, also
    on a loaded machine: Delta's is delta-rs's, not an ALTER TABLE through the test's Spark session,
    which took seconds there and let a job's try land between two of them."""
    if config.output.format == "iceberg":
        name = config.output.table if which == TABLE else config.output.quarantine_table
        table = IcebergCatalog.of(config).java_table(spark, name)
        table.newAppend().set("eos.test.commit", str(n)).commit()
        return
    path = config.output_path if which == TABLE else config.quarantine_path
    DeltaTable(str(path)).alter.set_table_properties({"eos.test.commit": str(n)}, raise_if_not_exists=False)


@sqlite_only
@on_formats()
def test_a_write_conflict_past_the_retries_leaves_the_batch_planned_and_the_job_exits_75(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, caplog, monkeypatch
) -> None:
    config, store, batch, before = planned_over_existing_tables(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )

    # A concurrent writer that commits to both tables all the time once the attempt reads (table
    # property changes: each conflicts with any open transaction on the table, adds no rows). The
    # attempt's table transaction opens when it stages the files, before the gate.
    caplog.set_level(logging.INFO, logger="eos_ingest")
    monkeypatch.setenv(CONFLICT_ATTEMPTS_ENV, "2")
    stop = threading.Event()

    def hammer() -> None:
        n = 0
        while not stop.is_set() and "phase read" not in caplog.text:
            time.sleep(0.2)
        while not stop.is_set():
            for which in (TABLE, QUARANTINE):
                n += 1
                commit_beside(spark, config, which, n)
            time.sleep(0.2)  # 5 commits a second on each table: several in any try's window (~1 s)

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        error = job_attempt(spark, config, store, batch.batch_id)
    finally:
        stop.set()
        thread.join(timeout=120)

    assert job_exit(error) == 75, repr(error)
    assert isinstance(error, WriteConflictError), repr(error)
    assert "try 1 of 2" in caplog.text  # retried once inside the attempt
    assert store.get_batch(batch.batch_id).status.value == "planned"
    assert store.committed_offsets(config.name) == before

    result = rerun(spark, config, store, batch.batch_id)  # what the next attempt does
    assert (result.records_written, result.records_quarantined) == (200, 10)
    assert store.get_batch(batch.batch_id).status.value == "committed"
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 420, report.to_dict()
    assert table_count(spark, config) == 400
    assert table_count(spark, config, QUARANTINE) == 20


@sqlite_only
@on_formats()
def test_a_failed_table_commit_publishes_neither_table_and_leaves_the_batch_planned_and_one_copy_after_the_rerun(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path, monkeypatch
) -> None:
    """The quarantine's replace is staged beside the gate and published only after the table's: when
    the table's commit fails, the quarantine table holds nothing of the batch either (until issue
    48 its replace landed beside); the batch stays planned, and the rerun leaves exactly one copy
    in both tables."""
    config, store, batch, before = planned_over_existing_tables(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )

    # Paused after the gate, before the table's commit: another writer commits to the table only,
    # so the staged commit conflicts (one try allowed) while the quarantine's replace has none.
    monkeypatch.setenv(CONFLICT_ATTEMPTS_ENV, "1")
    pause = tmp_path / "pause"
    attempt = paused_attempt(spark, config, store, batch.batch_id, pause, monkeypatch)
    commit_beside(spark, config, TABLE)
    error = attempt_error(attempt)

    assert job_exit(error) == 75, repr(error)
    assert isinstance(error, WriteConflictError), repr(error)
    assert store.get_batch(batch.batch_id).status.value == "planned"
    assert store.committed_offsets(config.name) == before
    assert table_count(spark, config) == 200  # the first batch only
    assert table_count(spark, config, QUARANTINE) == 10  # the first batch only: nothing published

    result = rerun(spark, config, store, batch.batch_id)
    assert (result.records_written, result.records_quarantined) == (200, 10)
    assert table_count(spark, config) == 400
    assert table_count(spark, config, QUARANTINE) == 20
    report = verify_pipeline(spark, config)  # an independent read_committed rescan of the topic
    assert report.ok and report.expected == 420, report.to_dict()


@sqlite_only
def test_a_quarantine_table_that_cannot_be_written_publishes_neither_table_and_a_rerun_leaves_one_copy_in_both(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap, topic, 0)
    config = make_pipeline([topic], control_db_url)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    # A real write failure of the second table: its path is taken by a plain file. Its replace is
    # staged beside the gate, so the error comes before either table is published (as a Spark
    # error of the table's own stage would: the job exits 1 and the batch stays planned). A failure
    # after the table's publish: test_quarantine_publish.py, exit 75.
    config.quarantine_path.parent.mkdir(parents=True, exist_ok=True)
    config.quarantine_path.write_text("in the way")

    error = job_attempt(spark, config, store, batch.batch_id)

    assert job_exit(error) == 1, repr(error)
    assert "DELTA_CANNOT_CREATE_LOG_PATH" in str(error)
    assert store.get_batch(batch.batch_id).status.value == "planned"
    assert table_count(spark, config) == 0  # neither table was published

    config.quarantine_path.unlink()
    result = rerun(spark, config, store, batch.batch_id)

    assert (result.records_written, result.records_quarantined) == (200, 10)
    assert table_count(spark, config) == 200
    assert table_count(spark, config, QUARANTINE) == 10
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 210, report.to_dict()


@sqlite_only
def test_a_superseded_attempt_writes_nothing_and_its_late_write_is_skipped_by_delta(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap, topic, 0)
    config = make_pipeline([topic], control_db_url)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    zombie_fence = store.take_fence(batch.batch_id)
    winner_fence = store.take_fence(batch.batch_id)

    # The zombie runs after the winner took the fence: fenced before its first write.
    with pytest.raises(FencedError):
        execute_batch(spark, config, store, batch, zombie_fence)
    assert not config.output_path.exists() and not config.quarantine_path.exists()

    won = execute_batch(spark, config, store, batch, winner_fence)
    winner_rows = sorted(spark.read.format("delta").load(str(config.output_path)).collect())

    # A zombie that passed its fence check just before the winner took the fence writes late:
    # Delta skips its write (lower txnVersion for the batch's app id), and its commit is fenced.
    from pyspark.sql import functions as F

    app_id = txn_app_id(config.name, batch.batch_id, batch.created_at.isoformat(), "table")
    zombie_rows = spark.read.format("delta").load(str(config.output_path)).withColumn("name", F.lit("zombie"))
    late = writer.replace_ranges(
        spark,
        Replace(
            zombie_rows.localCheckpoint(),
            str(config.output_path),
            batch.ranges,
            batch.batch_id,
            config.output.partition_by,
            txn=Txn(app_id, zombie_fence),
        ),
    )
    assert late.written_by_fence == winner_fence and late.version == won.table_version
    assert sorted(spark.read.format("delta").load(str(config.output_path)).collect()) == winner_rows
    with pytest.raises(FencedError):
        store.commit_batch(
            batch.batch_id, zombie_fence, records_read=210, records_written=200, records_quarantined=10,
            delta_version=late.version, quarantine_delta_version=None,
        )  # fmt: skip
    done = store.get_batch(batch.batch_id)
    assert done.status.value == "committed" and done.fence == winner_fence
    assert verify_pipeline(spark, config).ok


@sqlite_only
def test_a_commit_that_loses_a_conflict_is_staged_and_gated_anew_and_records_deleted_meanwhile_fail_it_as_lost(
    spark,
    kafka_bootstrap,
    kafka_admin,
    make_topic,
    make_pipeline,
    control_db_url,
    tmp_path,
    caplog,
    monkeypatch,
) -> None:
    """Issue 31, item 3: the write after a lost conflict reads the ranges again. It is a staged
    write checked by the gate like the first, so a record deleted by retention in between fails
    the batch as OffsetsLostError (exit 2), as any read of lost offsets does, never a WriteError."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "x", "amount": 1.0} for i in range(100)], commit=True)
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None
    producer.transaction(topic, [{"id": i, "name": "x", "amount": 1.0} for i in range(100, 300)], commit=True)
    store = open_store(config)
    batch, _ = plan_batch(config, store)  # good records only: nothing is cached, a retry reads Kafka
    assert batch is not None
    before = store.committed_offsets(config.name)

    caplog.set_level(logging.INFO, logger="eos_ingest")
    pause = tmp_path / "pause"
    attempt = paused_attempt(spark, config, store, batch.batch_id, pause, monkeypatch)  # staged, gated
    # Another writer commits (the staged commit will conflict), and retention deletes records
    # of the batch's range before the retry reads it again.
    spark.sql(f"ALTER TABLE delta.`{config.output_path}` SET TBLPROPERTIES ('eos.test.conflict' = '1')")
    (deleted,) = kafka_admin.delete_records([KafkaTopicPartition(topic, 0, 150)], request_timeout=30).values()
    assert deleted.result(30).low_watermark == 150
    error = attempt_error(attempt)

    assert job_exit(error) == 2, repr(error)
    assert isinstance(error, OffsetsLostError), repr(error)
    assert "WriteError" not in caplog.text + repr(error), caplog.text[-5000:]
    done = store.get_batch(batch.batch_id)
    assert done.status.value == "failed" and "OffsetsLostError" in (done.error or "")
    assert store.committed_offsets(config.name) == before
    assert table_count(spark, config) == 100  # nothing of batch 2 was committed
