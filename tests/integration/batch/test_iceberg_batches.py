"""An Iceberg pipeline's batches through the whole sequence (real broker, Spark, the JDBC catalog on
the control DB, SQLite and PostgreSQL): each lands once, a backfill replaces, a zombie attempt
publishes nothing."""

from __future__ import annotations

from collections import Counter

import pytest

from eos_ingest.batch.sequence import execute_batch
from eos_ingest.errors import FencedError
from eos_ingest.service.backfill import create_backfill, parse_request
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.storage.iceberg_catalog import IcebergCatalog
from tests.fixtures.pipelines import ingest_once
from tests.kafka_helpers import TxProducer

pytestmark = pytest.mark.integration


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def identities(spark, config, table: str) -> Counter[tuple[int, int]]:
    catalog = IcebergCatalog.of(config)
    found = spark.table(catalog.identifier(table)).select("kafka_partition", "kafka_offset").collect()
    return Counter((r.kafka_partition, r.kafka_offset) for r in found)


# On both control DBs: the JDBC catalog's commit (its compare-and-set of the metadata location) is
# the catalog's own SQL on each backend, not the control store's, so tests/integration/control/
# does not prove it.
def test_an_iceberg_batch_lands_once_a_backfill_replaces_it_and_a_zombie_publishes_nothing(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 10), commit=True, partition=0)
    producer.transaction(topic, rows(100, 5), commit=False, partition=0)
    producer.transaction(topic, [*rows(10, 6), "not json"], commit=True, partition=1)
    config = make_pipeline([topic], control_db_url, output={"format": "iceberg", "table": "lake.events"})

    first = ingest_once(spark, config)

    assert first is not None and (first.records_written, first.records_quarantined) == (16, 1)
    table = identities(spark, config, "lake.events")
    assert set(table.values()) == {1} and len(table) == 16  # aborted records are gaps, not rows
    assert identities(spark, config, "lake.events_quarantine") == Counter({(1, 6): 1})
    main = IcebergCatalog.of(config).java_table(spark, "lake.events")
    assert first.delta_version == main.currentSnapshot().snapshotId()

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
    assert newer.delta_version == main.currentSnapshot().snapshotId()  # main did not move
    after = identities(spark, config, "lake.events")
    assert set(after.values()) == {1} and len(after) == 16 + 4
    assert not [b for b in main.refs().keySet() if b.startswith("eos_")]  # no branch left behind
