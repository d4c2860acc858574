"""An Iceberg pipeline's batches through the whole sequence (real broker, Spark): each lands once, a
backfill replaces, a zombie attempt publishes nothing. On the JDBC catalog of the SQLite control DB
(PostgreSQL's: tests/integration/storage/iceberg/test_format.py) and on a REST catalog server
(tests/fixtures/iceberg_rest.py), whose tables the read side's pyiceberg reads too (the reader, the
audit, the gate's read of a staged branch); a REST catalog that refuses the credentials is named
with its fix; a batch's marker checks read main since the batch was planned, not its history."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from eos_ingest.batch.sequence import execute_batch
from eos_ingest.errors import ConfigError, FencedError
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.quality.audit import audit_batch
from eos_ingest.service.backfill import create_backfill, parse_request
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.storage.iceberg import branch as iceberg_branch
from eos_ingest.storage.iceberg import format as iceberg_format
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.format import IcebergFormat
from eos_ingest.storage.table_format import Replace, Txn, txn_app_id
from eos_ingest.storage.table_formats import output_reader
from eos_ingest.storage.table_names import TABLE
from tests.fixtures.pipelines import ingest_once
from tests.fixtures.postgres import on_control_db
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

CONN = "AIRFLOW_CONN_ICEBERG_REST"


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def identities(spark, config, table: str) -> Counter[tuple[int, int]]:
    catalog = IcebergCatalog.of(config)
    found = spark.table(catalog.identifier(table)).select("kafka_partition", "kafka_offset").collect()
    return Counter((r.kafka_partition, r.kafka_offset) for r in found)


def lands_once_backfill_replaces_zombie_publishes_nothing(spark, kafka_bootstrap, make_topic, make_config):
    """The sequence every catalog must pass; returns the config and main's identities at the end."""
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)
    producer.transaction(topic, rows(100, 5), commit=False, partition=0)
    producer.transaction(topic, [*rows(10, 6), "not json"], commit=True, partition=1)
    config = make_config(topic)

    first = ingest_once(spark, config)

    assert first is not None and (first.records_written, first.records_quarantined) == (16, 1)
    table = identities(spark, config, "lake.events")
    assert set(table.values()) == {1} and len(table) == 16  # aborted records are gaps, not rows
    assert identities(spark, config, "lake.events_quarantine") == Counter({(1, 6): 1})
    main = IcebergCatalog.of(config).java_table(spark, "lake.events")
    assert first.table_version == main.currentSnapshot().snapshotId()

    # A backfill of part of the ranges replaces them: still one copy of every record.
    store = open_store(config)
    request = parse_request(
        {"topic": topic, "partitions": [0, 1], "start_offset": 2, "end_offset": 8, "reason": "replay"},
        config.topics,
    )
    backfill = create_backfill(config, store, request)
    result = execute_batch(spark, config, store, backfill, store.take_fence(backfill.batch_id))
    assert (result.records_written, result.records_quarantined) == (6 + 4, 1)  # p1: 2-5, then the bad 6
    assert identities(spark, config, "lake.events") == table
    assert identities(spark, config, "lake.events_quarantine") == Counter({(1, 6): 1})

    # Two attempts at the next batch: the newer fence lands, the zombie's publishes nothing.
    producer.transaction(topic, rows(20, 4), commit=True, partition=0)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    zombie_fence = store.take_fence(batch.batch_id)
    newer = execute_batch(spark, config, store, batch, store.take_fence(batch.batch_id))
    with pytest.raises(FencedError):
        execute_batch(spark, config, store, batch, zombie_fence)
    main.refresh()
    assert newer.table_version == main.currentSnapshot().snapshotId()  # main did not move
    after = identities(spark, config, "lake.events")
    assert set(after.values()) == {1} and len(after) == 16 + 4
    assert not [b for b in main.refs().keySet() if b.startswith("eos_")]  # no branch left behind
    return config, after, batch.batch_id


@on_control_db("sqlite")
def test_an_iceberg_batch_lands_once_a_backfill_replaces_it_and_a_zombie_publishes_nothing(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    lands_once_backfill_replaces_zombie_publishes_nothing(
        spark, kafka_bootstrap, make_topic,
        lambda topic: make_pipeline([topic], control_db_url, output={"format": "iceberg", "table": "lake.events"}),
    )  # fmt: skip


@on_control_db("sqlite")
def test_on_a_rest_catalog_the_same_and_pyiceberg_reads_what_spark_wrote(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, iceberg_rest, monkeypatch
) -> None:
    monkeypatch.setenv(CONN, iceberg_rest.connection())  # OAuth2 client credentials
    catalog = {"type": "rest", "uri": iceberg_rest.uri, "conn_id": "iceberg_rest"}
    # Its own name: the server's catalog outlives the test, and a rerun of the session's tables
    # must not meet another test's namespace.
    config, on_main, last = lands_once_backfill_replaces_zombie_publishes_nothing(
        spark, kafka_bootstrap, make_topic,
        lambda topic: make_pipeline([topic], control_db_url, name="itest_rest",
                                    output={"format": "iceberg", "table": "lake.events", "catalog": catalog}),
    )  # fmt: skip

    # pyiceberg's RestCatalog on the same server, here with the bearer token instead: main's rows
    # as the read side's reader (audit, page, verify's counts) opens them, and the audit passing.
    monkeypatch.setenv(CONN, iceberg_rest.connection(token=iceberg_rest.token))
    read = IcebergCatalog.of(config).pyiceberg().load_table("lake.events").scan().to_arrow()
    assert (
        Counter(zip(read["kafka_partition"].to_pylist(), read["kafka_offset"].to_pylist(), strict=True))
        == on_main
    )
    store = open_store(config)
    published = output_reader(config).open(TABLE)
    assert published is not None and published.batch_rows(store.get_batch(last)).num_rows == 4
    report = audit_batch(config, last)
    assert report["success"] is True and report["statistics"]["rows"] == 4, report

    # The gate's pyiceberg read of a staged branch, through the server (its metadata is the
    # server's to place): Spark's read-back, row for row.
    iceberg = IcebergFormat(IcebergCatalog.of(config))
    topic = config.topics[0]
    again = spark.table(iceberg.catalog.identifier("lake.events")).where(f"batch_id = {last}")
    again = again.withColumn("batch_id", F.lit(99).cast("bigint")).withColumn("kafka_partition", F.lit(7))
    staged = iceberg.stage(spark, Replace(again, "lake.events", [PlannedRange(topic, 7, 0, 100)], 99))
    try:
        read_back = staged.read_back(again.schema)
        arrow = staged.read_arrow(read_back.schema, 99)
        assert arrow is not None  # pyiceberg stood in for Spark's read
        by_spark = read_back.where("batch_id = 99").toArrow()
        assert arrow.schema == by_spark.schema and arrow.num_rows == by_spark.num_rows == 4
    finally:
        staged.abort()


def test_a_rest_catalog_that_refuses_the_credentials_is_named_with_its_fix(spark, iceberg_rest) -> None:
    wrong_secret = IcebergCatalog(
        "eos_refused", iceberg_rest.uri, None, "rest", (("credential", f"{iceberg_rest.client_id}:wrong"),)
    )
    wrong_token = IcebergCatalog("eos_refused_token", iceberg_rest.uri, None, "rest", (("token", "wrong"),))

    for catalog in (wrong_secret, wrong_token):
        for open_it in (lambda c=catalog: c.ensure(spark), lambda c=catalog: c.pyiceberg()):
            with pytest.raises(ConfigError) as refused:
                open_it()
            message = str(refused.value)
            assert "output.catalog" in message and "output.catalog.conn_id" in message, message
            assert (
                "refused this pipeline's sign-in (" in message
                and "not accepted" in message  # the server's own words
                and "wrong" not in message
            ), message


def marker_search_round_trips(spark, monkeypatch) -> list[int]:
    """The py4j round trips of each call of the marker search (newest_write, wherever the format
    calls it), in order: a pass-through count of the commands sent to the JVM by the thread inside
    the search (the quarantine's stage runs beside the table's), which answers each as before."""
    client = spark.sparkContext._gateway._gateway_client
    send = client.send_command
    inside = threading.local()
    walks: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        if getattr(inside, "walk", None) is not None:
            walks[inside.walk] += 1
        return send(*args, **kwargs)

    def counting(search: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            walks.append(0)
            inside.walk = len(walks) - 1
            try:
                return search(*args, **kwargs)
            finally:
                inside.walk = None

        return run

    monkeypatch.setattr(client, "send_command", counted)
    for module in (iceberg_format, iceberg_branch):
        monkeypatch.setattr(module, "newest_write", counting(module.newest_write))
    return walks


@on_control_db("sqlite")
def test_a_batch_reads_main_since_its_plan_not_the_history_before_and_still_finds_its_write(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, monkeypatch
) -> None:
    """Issue 48, item 5: a batch's marker checks (the stage's skip check and the publish's fence
    check, on both tables) stop at the snapshots committed before the batch was planned, so their
    cost does not grow with main's history; and within that bound they still find the batch's own
    write: a zombie attempt's stage is skipped and its replace returns the newer write's snapshot."""
    monkeypatch.setenv("EOS_ICEBERG_CLOCK_MARGIN_S", "1")
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 5), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, output={"format": "iceberg", "table": "lake.events"})
    assert ingest_once(spark, config) is not None
    main = IcebergCatalog.of(config).java_table(spark, "lake.events")
    history = 40  # other writers' commits on main (empty appends: snapshots like any to the walk)
    for i in range(history):
        main.newFastAppend().set("eos.app-id", f"another-writer/{i}").commit()
    time.sleep(1.5)  # past the margin: the history is older than the next plan, on any clock here
    producer.transaction(topic, rows(5, 5), commit=True, partition=0)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    zombie_fence = store.take_fence(batch.batch_id)
    walks = marker_search_round_trips(spark, monkeypatch)

    newer = execute_batch(spark, config, store, batch, store.take_fence(batch.batch_id))

    assert newer.records_written == 5 and len(walks) >= 4, walks  # two checks on each table
    # A walk of the history would cost 3 or more round trips a snapshot: 120 and up here.
    assert max(walks) <= 20, walks
    walks.clear()
    app_id = txn_app_id(config.name, batch.batch_id, batch.created_at.isoformat(), TABLE)
    zombie = Txn(app_id, zombie_fence, planned_at=batch.created_at)
    iceberg = IcebergFormat(IcebergCatalog.of(config))
    again = spark.table(iceberg.catalog.identifier("lake.events")).where(f"batch_id = {batch.batch_id}")
    ranges = batch.ranges
    assert iceberg.stage(spark, Replace(again, "lake.events", ranges, batch.batch_id, txn=zombie)).skipped
    late = iceberg.replace_ranges(spark, Replace(again, "lake.events", ranges, batch.batch_id, txn=zombie))
    assert (late.version, late.written_by_fence) == (newer.table_version, zombie_fence + 1)
    assert max(walks) <= 20, walks
