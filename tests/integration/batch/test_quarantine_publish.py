"""The table and the quarantine table are published as one, and the quarantine holds the rows the
gate counted (issue 48, items 1 and 3), on the real broker, Spark, both table formats and the
control DB.

The scenario of item 1 is a backfill after a parser fix: the record at offset 5 was quarantined by
the first batch, parses under the fixed schema, so the backfill moves it from the quarantine table
to the table. If one table's replace were published and not the other's, the record would be in
neither table (or in both), and nothing reruns a failed backfill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from bench.fault_proxy import FaultProxy, cuts_a_batch_branch, publishes_main
from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.batch.quarantine_replace import (
    PAUSE_BEFORE_QUARANTINE_COMMIT_ENV,
    PAUSE_BEFORE_QUARANTINE_READ_ENV,
)
from eos_ingest.batch.sequence import execute_batch
from eos_ingest.errors import PartialWriteError, WriteError, exit_code
from eos_ingest.service.backfill import create_backfill, parse_request
from eos_ingest.service.operations import job_argv, open_store, plan_batch
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.table_names import QUARANTINE, TABLE
from tests.fixtures.pipelines import (
    JSON_SCHEMA,
    ingest_once,
    on_formats,
    table_rows,
    verify_pipeline,
    write_pipeline,
)
from tests.helpers.kafka import TxProducer, cleaner_backoff
from tests.helpers.processes import AttemptInThread, wait_for_pause
from tests.helpers.rescan import assert_each_committed_record_once

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)]

# The first schema declares `code INT`: the record at offset 5 carries "code": "A7" and goes to
# quarantine. The fix declares no `code` (the table keeps the column; new rows get null there).
FIRST_SCHEMA = f"{JSON_SCHEMA}, code INT"


def offsets(spark, config, which: str) -> dict[int, int]:
    """kafka_offset -> batch_id of the rows the published table `which` holds."""
    rows = table_rows(spark, config, which)
    return {} if rows is None else {r.kafka_offset: r.batch_id for r in rows.collect()}


def fixed_parser_backfill(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url):
    """A committed first batch that quarantined offset 5, the parser fixed, and a planned backfill
    of [0, 10): (config, store, the first batch's id, the backfill)."""
    topic = make_topic(partitions=1)
    values = [{"id": i, "name": "x", "amount": 1.0, "code": "A7" if i == 5 else i} for i in range(10)]
    TxProducer(kafka_bootstrap).transaction(topic, values, commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, value={"format": "json", "schema": FIRST_SCHEMA})
    first = ingest_once(spark, config)
    assert first is not None and (first.records_written, first.records_quarantined) == (9, 1)
    assert offsets(spark, config, QUARANTINE) == {5: first.batch_id}

    config = make_pipeline([topic], control_db_url, value={"format": "json", "schema": JSON_SCHEMA})
    store = open_store(config)
    request = parse_request(
        {"topic": topic, "partitions": [0], "start_offset": 0, "end_offset": 10, "reason": "parser fix"},
        config.topics,
    )
    return config, store, first.batch_id, create_backfill(config, store, request)


def assert_as_before_the_backfill(spark, config, first_id: int) -> None:
    """Neither table holds anything of the backfill: offset 5 is still in quarantine only."""
    assert offsets(spark, config, TABLE) == {o: first_id for o in range(10) if o != 5}
    assert offsets(spark, config, QUARANTINE) == {5: first_id}
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 10, report.to_dict()


def assert_backfilled(spark, config, backfill_id: int) -> None:
    """Both tables replaced: every offset in the table, by the backfill, none in quarantine."""
    assert offsets(spark, config, TABLE) == {o: backfill_id for o in range(10)}
    assert offsets(spark, config, QUARANTINE) == {}
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 10, report.to_dict()
    if config.output.format == "iceberg":
        assert staged_branches(spark, config, TABLE) == staged_branches(spark, config, QUARANTINE) == []
    assert_each_committed_record_once(spark, config)  # by a raw read_committed rescan of the topic


def on_rest_catalog(request, monkeypatch, make_pipeline, table_format: str):
    """(make_pipeline, the fault proxy): on Delta the fixture's and None; on Iceberg, pipelines of a
    name of the test's own whose tables are in the session's REST catalog, reached through the
    fault proxy (tests/fixtures/fault_proxy.py), and that proxy."""
    if table_format != "iceberg":
        return make_pipeline, None
    server = request.getfixturevalue("iceberg_rest")
    proxy = request.getfixturevalue("armed_proxy")
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_REST", server.connection())
    name = f"qp_{uuid.uuid4().hex[:8]}"
    catalog = {"type": "rest", "uri": proxy.uri, "conn_id": "iceberg_rest"}
    folder, bootstrap = request.getfixturevalue("tmp_path"), request.getfixturevalue("kafka_bootstrap")

    def make(topics, control_db_url: str, **overrides):
        output = {"format": "iceberg", "table": f"lake.{name}", "catalog": catalog}
        return write_pipeline(folder, bootstrap, topics, control_db_url, name, output=output, **overrides)

    return make, proxy


def refuse_publishes(proxy: FaultProxy, config, which: str) -> None:
    """From now on the catalog refuses (403) every publish of the Iceberg table `which`: a grant
    that no longer lets this pipeline write it, a refusal for good (no retry gets past it)."""
    table = config.output.table if which == TABLE else config.output.quarantine_table
    proxy.arm("403-unforwarded", publishes_main(table.split(".", 1)[1]), times=1000)


def staged_branches(spark, config, which: str) -> list[str]:
    """The batch branches (eos_batch<id>_f<fence>) left on an Iceberg table."""
    name = config.output.table if which == TABLE else config.output.quarantine_table
    table = IcebergCatalog.of(config).java_table(spark, name)
    table.refresh()
    return sorted(str(ref) for ref in table.refs().keySet() if str(ref).startswith("eos_"))


def run_paused(
    spark, config, store, batch, monkeypatch, pause: Path, at: str, act: Callable[[], None]
) -> BaseException | None:
    """run_fenced(batch) in a thread of this process, paused at the fault point `at` while act()
    runs; the error it raised."""
    monkeypatch.setenv(at, str(pause))
    attempt = AttemptInThread(spark, config, store, batch, pause)
    try:
        attempt.wait_for_pause()
        act()
    finally:
        attempt.go_on()
        attempt.join()
        monkeypatch.delenv(at)
    assert not attempt.thread.is_alive()
    return attempt.error


def rerun(spark, config, store, batch_id: int):
    """The next attempt at the planned batch: a new fence, the batch's steps."""
    fence = store.take_fence(batch_id)
    return execute_batch(spark, config, store, store.get_batch(batch_id), fence)


@on_formats()
def test_a_table_publish_that_fails_for_good_after_the_gate_leaves_both_tables_as_they_were(
    spark,
    kafka_bootstrap,
    make_topic,
    make_pipeline,
    control_db_url,
    monkeypatch,
    tmp_path,
    request,
    table_format,
) -> None:
    """Item 1's recipe: the table's publish fails with an error that is not retriable after the gate
    passed. The batch is failed, and neither table holds anything of it (on ccdd127 the quarantine's
    replace had landed beside: offset 5 in neither table, verify missing=1). Iceberg: the REST
    catalog refuses the table's publish for good (403); a removed branch, the recipe's fault, is
    staged anew now (issue 48, item 2) and fails nothing."""
    make_pipeline, proxy = on_rest_catalog(request, monkeypatch, make_pipeline, table_format)
    config, store, first_id, backfill = fixed_parser_backfill(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )

    def break_the_table_publish() -> None:
        if proxy is not None:
            refuse_publishes(proxy, config, TABLE)
        else:
            # A constraint the staged rows break: the staged commit loses to it (metadata changed),
            # and the try staged anew is refused with a WriteError.
            spark.sql(f"ALTER TABLE delta.`{config.output_path}` ADD CONSTRAINT not_five CHECK (id <> 5)")

    error = run_paused(
        spark, config, store, backfill, monkeypatch, tmp_path / "pause", PAUSE_BEFORE_TABLE_COMMIT_ENV,
        break_the_table_publish,
    )  # fmt: skip

    assert isinstance(error, WriteError) and exit_code(error) == 1, repr(error)
    done = store.get_batch(backfill.batch_id)
    assert done.status.value == "failed" and "WriteError" in (done.error or "")
    if proxy is not None:
        assert proxy.fired and "refused by the catalog" in str(error), (proxy.fired, error)
        proxy.disarm()
    assert_as_before_the_backfill(spark, config, first_id)
    if config.output.format == "iceberg":  # neither staged branch is left: both are unpublished
        assert staged_branches(spark, config, TABLE) == staged_branches(spark, config, QUARANTINE) == []

    if config.output.format == "delta":
        spark.sql(f"ALTER TABLE delta.`{config.output_path}` DROP CONSTRAINT not_five")
    again = create_backfill(config, store, parse_request(
        {"topic": config.topics[0], "partitions": [0], "start_offset": 0, "end_offset": 10, "reason": "again"},
        config.topics,
    ))  # fmt: skip
    rerun(spark, config, store, again.batch_id)
    assert store.get_batch(again.batch_id).status.value == "committed"
    assert_backfilled(spark, config, again.batch_id)


@on_formats()
def test_a_kill_between_the_two_publishes_leaves_the_batch_planned_and_the_next_attempt_publishes_both(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path
) -> None:
    config, store, first_id, backfill = fixed_parser_backfill(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    pause, log = tmp_path / "pause", tmp_path / "job.log"
    env = {**spark_submit_env(), PAUSE_BEFORE_QUARANTINE_COMMIT_ENV: str(pause)}
    argv = job_argv(config, backfill, "local[1]", driver_memory="1g")
    with log.open("w") as out:
        job = subprocess.Popen(
            argv, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    wait_for_pause(job, pause, log)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)

    # The table holds the backfill, the quarantine table not yet (offset 5 in both): planned.
    assert store.get_batch(backfill.batch_id).status.value == "planned"
    assert offsets(spark, config, TABLE) == {o: backfill.batch_id for o in range(10)}
    assert offsets(spark, config, QUARANTINE) == {5: first_id}

    again = rerun(spark, config, store, backfill.batch_id)

    assert again.fence == 2 and (again.records_written, again.records_quarantined) == (10, 0)
    assert store.get_batch(backfill.batch_id).status.value == "committed"
    assert_backfilled(spark, config, backfill.batch_id)


@on_formats()
def test_a_quarantine_publish_that_fails_after_the_table_s_leaves_the_batch_planned_and_the_next_attempt_publishes_both(
    spark,
    kafka_bootstrap,
    make_topic,
    make_pipeline,
    control_db_url,
    monkeypatch,
    tmp_path,
    request,
    table_format,
) -> None:
    """The quarantine table's publish fails for good right after the table's landed (Iceberg: the
    REST catalog refuses it, 403): the batch stays planned, exit 75; once the cause is gone, the
    next attempt publishes both."""
    make_pipeline, proxy = on_rest_catalog(request, monkeypatch, make_pipeline, table_format)
    config, store, first_id, backfill = fixed_parser_backfill(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    aside = tmp_path / "quarantine-aside"

    def break_the_quarantine_publish() -> None:
        if proxy is not None:
            refuse_publishes(proxy, config, QUARANTINE)
        else:  # a real failure of the quarantine's commit: its table's folder is a plain file now
            config.quarantine_path.rename(aside)
            config.quarantine_path.write_text("in the way")

    error = run_paused(
        spark, config, store, backfill, monkeypatch, tmp_path / "pause", PAUSE_BEFORE_QUARANTINE_COMMIT_ENV,
        break_the_quarantine_publish,
    )  # fmt: skip

    assert isinstance(error, PartialWriteError) and exit_code(error) == 75, repr(error)
    assert store.get_batch(backfill.batch_id).status.value == "planned"
    if proxy is not None:
        assert proxy.fired and "refused by the catalog" in str(error), (proxy.fired, error)
        proxy.disarm()
    else:
        config.quarantine_path.unlink()
        aside.rename(config.quarantine_path)
    assert offsets(spark, config, TABLE) == {o: backfill.batch_id for o in range(10)}
    assert offsets(spark, config, QUARANTINE) == {5: first_id}

    rerun(spark, config, store, backfill.batch_id)

    assert store.get_batch(backfill.batch_id).status.value == "committed"
    assert_backfilled(spark, config, backfill.batch_id)


ICEBERG_COMMIT_TRIES = 5


@on_formats("iceberg")
def test_a_quarantine_stage_that_loses_its_branch_cut_once_is_staged_anew_by_the_next_try(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, monkeypatch, request, table_format
) -> None:
    """The quarantine's stage cuts its branch as a commit of its own, which a concurrent writer of
    the quarantine table (an ingest beside a backfill) can win: the REST catalog answers the first
    cut 409. The try is lost and the next try stages both replaces anew, so the batch commits; on
    7fb9f13 every try raised the first stage's error again and the batch gave up, exit 75."""
    monkeypatch.setenv("EOS_WRITE_CONFLICT_ATTEMPTS", "3")
    make_pipeline, proxy = on_rest_catalog(request, monkeypatch, make_pipeline, table_format)
    assert proxy is not None
    topic = make_topic(partitions=1)
    values = [{"id": i, "name": "x", "amount": 1.0, "code": "A7" if i == 5 else i} for i in range(10)]
    TxProducer(kafka_bootstrap).transaction(topic, values, commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, value={"format": "json", "schema": FIRST_SCHEMA})
    # Iceberg retries a refused commit of ref changes itself (commit.retry.num-retries, 4): the
    # cut is lost to this try once all five are refused.
    quarantine = config.output.quarantine_table.split(".", 1)[1]
    proxy.arm("409-unforwarded", cuts_a_batch_branch(quarantine), times=ICEBERG_COMMIT_TRIES)

    result = ingest_once(spark, config)

    assert len(proxy.fired) == ICEBERG_COMMIT_TRIES, proxy.fired
    assert result is not None and (result.records_written, result.records_quarantined) == (9, 1)
    store = open_store(config)
    assert store.get_batch(result.batch_id).status.value == "committed"
    assert offsets(spark, config, TABLE) == {o: result.batch_id for o in range(10) if o != 5}
    assert offsets(spark, config, QUARANTINE) == {5: result.batch_id}
    assert staged_branches(spark, config, TABLE) == staged_branches(spark, config, QUARANTINE) == []
    assert_each_committed_record_once(spark, config)  # by a raw read_committed rescan of the topic
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 10, report.to_dict()


def bad_records_kept(bootstrap: str, topic: str, end: int) -> int:
    """How many records keyed `bad` the partition still holds below `end` (compaction drops older ones)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compaction-check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, 0)])
        kept, deadline = 0, time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            if message.offset() >= end:
                break
            kept += message.key() == b"bad"
        return kept
    finally:
        consumer.close()


@on_formats()
def test_a_cleaner_run_between_the_two_reads_of_a_compacted_topic_fails_the_try_and_the_rerun_writes_what_it_counts(
    spark, kafka_bootstrap, kafka_admin, make_topic, make_pipeline, control_db_url, monkeypatch, tmp_path
) -> None:
    """Item 3: the table's rows and the gate's counts come from the batch's first read of Kafka, the
    quarantine's rows from a second one. Five malformed records share a key; the log cleaner
    compacts them to one between the two reads. The try fails retriably (the batch stays planned,
    nothing published) instead of committing 5 quarantined records with 1 row in the quarantine
    table (ccdd127); the rerun reads the compacted log and records what it writes."""
    topic = make_topic(
        partitions=1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce(topic, f"not json {i}".encode(), key=b"bad", partition=0)
    for i in range(20):
        value = json.dumps({"id": i, "name": "x", "amount": 1.0}).encode()
        producer.produce(topic, value, key=f"k{i}".encode(), partition=0)
    producer.flush(30)
    config = make_pipeline([topic], control_db_url)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None and [(r.start, r.end) for r in batch.ranges] == [(0, 25)]

    def compact() -> None:
        # One more record rolls the segment (older than segment.ms): the batch's records become
        # cleanable, and the broker's cleaner keeps the last `bad` only.
        producer.produce(topic, b"{}", key=b"roll", partition=0)
        producer.flush(30)
        deadline = time.monotonic() + 90
        with cleaner_backoff(kafka_admin, 200):  # not its 15 s sleep between looks
            while bad_records_kept(kafka_bootstrap, topic, 25) != 1:
                assert time.monotonic() < deadline, "the log cleaner did not compact the topic in time"
                time.sleep(0.2)

    error = run_paused(
        spark,
        config,
        store,
        batch,
        monkeypatch,
        tmp_path / "pause",
        PAUSE_BEFORE_QUARANTINE_READ_ENV,
        compact,
    )

    assert isinstance(error, PartialWriteError) and exit_code(error) == 75, repr(error)
    assert "quarantine" in str(error)
    assert store.get_batch(batch.batch_id).status.value == "planned"
    assert all(offset == 0 for offset in store.committed_offsets(config.name).values())
    assert offsets(spark, config, TABLE) == {} and offsets(spark, config, QUARANTINE) == {}

    result = rerun(spark, config, store, batch.batch_id)

    assert (result.records_written, result.records_quarantined) == (20, 1)
    done = store.get_batch(batch.batch_id)
    assert done.status.value == "committed" and done.records_quarantined == 1
    assert offsets(spark, config, QUARANTINE) == {4: batch.batch_id}
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 21, report.to_dict()
    assert_each_committed_record_once(spark, config)
