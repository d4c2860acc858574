"""Iceberg table properties against a batch's replace (issue 48, item 4; storage/iceberg/properties.py).

Each property is set on a real table after its first batch, then a scheduled batch and a backfill
over both (a replace: the DELETE on the branch meets the earlier files) run as the job runs them.
Kept: the batch's recorded counts, the gate, the audit, `verify` and the page agree with what Spark
reads on main. Before the append was hash-distributed, a sort order made the batch record each
record twice (Spark sampled the counted plan for the range bounds): records_written 20 for 10 rows,
and the audit failed. Refused at plan time and in the job: equality deletes, which pyiceberg
cannot apply.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from eos_ingest.batch.sequence import run_fenced
from eos_ingest.errors import ConfigError
from eos_ingest.quality.audit import audit_batch
from eos_ingest.service.operations import open_store, plan_batch, record_backfill
from eos_ingest.service.status import pipeline_status
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.table_names import TABLE
from tests.fixtures.pipelines import iceberg_output, ingest_once, verify_pipeline, write_pipeline
from tests.helpers.kafka import TxProducer
from tests.helpers.rescan import assert_each_committed_record_once

pytestmark = pytest.mark.integration

TABLE_NAME = "lake.props"


def merge_on_read(table: Any, jvm: Any) -> None:
    _properties(table, {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")})


def sorted_with_identifier_fields_wap_and_short_retention(table: Any, jvm: Any) -> None:
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    table.replaceSortOrder().asc(
        expressions.ref("kafka_offset"), jvm.org.apache.iceberg.NullOrder.NULLS_FIRST
    ).commit()
    update = table.updateSchema().allowIncompatibleChanges().requireColumn("kafka_offset")
    update.setIdentifierFields(["kafka_offset"]).commit()
    _properties(
        table,
        {
            "write.wap.enabled": "true",
            "history.expire.max-snapshot-age-ms": "1",
            "history.expire.min-snapshots-to-keep": "1",
            "history.expire.max-ref-age-ms": "1",
        },
    )


def v3_deletion_vectors_and_range_distribution(table: Any, jvm: Any) -> None:
    _properties(
        table,
        {"format-version": "3", "write.delete.mode": "merge-on-read", "write.distribution-mode": "range"},
    )


def _properties(table: Any, values: dict[str, str]) -> None:
    update = table.updateProperties()
    for key, value in values.items():
        update = update.set(key, value)
    update.commit()


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = TxProducer(bootstrap)
    producer.begin()
    producer.send(topic, [{"id": i, "name": "x", "amount": 1.0} for i in range(start, start + count)])
    producer.commit()


@pytest.fixture
def pipeline(spark, kafka_bootstrap, kafka_admin, tmp_path: Path):
    """An Iceberg pipeline on a new 1-partition topic whose first batch (20 records) committed."""
    topic = f"props_{uuid.uuid4().hex[:8]}"
    kafka_admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(60)
    config = write_pipeline(
        tmp_path, kafka_bootstrap, [topic], f"sqlite:///{tmp_path / 'control.db'}", name="props",
        output=iceberg_output(tmp_path, "props", TABLE_NAME),
    )  # fmt: skip
    produce(kafka_bootstrap, topic, 0, 20)
    first = ingest_once(spark, config)
    assert first is not None and first.records_written == 20
    return config, topic


@pytest.mark.parametrize(
    "alter",
    [
        merge_on_read,
        sorted_with_identifier_fields_wap_and_short_retention,
        v3_deletion_vectors_and_range_distribution,
    ],
)
def test_a_batch_and_a_backfill_under_the_property_record_and_read_what_main_shows(
    spark, kafka_bootstrap, pipeline, alter: Callable[[Any, Any], None]
) -> None:
    config, topic = pipeline
    catalog = IcebergCatalog.of(config)
    name = catalog.identifier(TABLE_NAME)
    alter(catalog.java_table(spark, TABLE_NAME), spark._jvm)
    produce(kafka_bootstrap, topic, 20, 10)

    second = ingest_once(spark, config)
    assert second is not None and second.records_written == 10
    store = open_store(config)
    batch, _ = record_backfill(
        config, store, {"topic": topic, "partitions": "0", "start_offset": 5, "end_offset": 25, "reason": "t"}
    )
    backfill = run_fenced(spark, config, store, batch)

    # What Spark reads on main, and what the batch recorded.
    offsets = Counter(int(r[0]) for r in spark.sql(f"SELECT kafka_offset FROM {name}").collect())
    # Offsets 0-19 and 21-30: each transaction's commit marker takes an offset.
    assert sorted(offsets) == [*range(20), *range(21, 31)] and set(offsets.values()) == {1}
    recorded = store.get_batch(backfill.batch_id)
    assert (recorded.status.value, recorded.records_written, backfill.records_written) == (
        "committed",
        19,
        19,
    )
    table = catalog.java_table(spark, TABLE_NAME)
    assert recorded.delta_version == table.currentSnapshot().snapshotId()
    if "merge-on-read" in str(table.properties().get("write.delete.mode")):  # the replace left delete files
        assert spark.sql(f"SELECT count(*) FROM {name}.delete_files").first()[0] > 0
    # The readers: verify and the audit (pyiceberg), the page's figures.
    report = verify_pipeline(spark, config)
    assert (report.found, report.duplicates, report.missing, report.unexpected) == (30, 0, 0, 0)
    audit = audit_batch(config, backfill.batch_id)
    assert audit["success"] is True and audit["statistics"]["rows"] == 19, audit
    shown = pipeline_status(config, store, offsets=[], now=datetime.now(UTC))["tables"][TABLE]
    files = spark.sql(f"SELECT count(*) FROM {name}.data_files").first()[0]
    assert (shown["version"], shown["files"]) == (recorded.delta_version, files)
    assert_each_committed_record_once(spark, config)  # by a raw read_committed rescan of the topic


def test_equality_deletes_on_main_are_refused_at_plan_time_and_in_the_job(
    spark, kafka_bootstrap, pipeline
) -> None:
    config, topic = pipeline
    store = open_store(config)
    produce(kafka_bootstrap, topic, 20, 10)
    planned, _ = plan_batch(config, store)  # planned before another engine's equality delete
    assert planned is not None
    catalog = IcebergCatalog.of(config)
    table = catalog.java_table(spark, TABLE_NAME)
    # Another engine's equality delete (Flink's upsert, say) on kafka_offset: its file is never read
    # here, since both checks read main's snapshot summary only.
    field = spark.sparkContext._gateway.new_array(spark._jvm.int, 1)
    field[0] = table.schema().findField("kafka_offset").fieldId()
    spec = table.spec()
    partition = spark.sql(f"SELECT partition FROM {catalog.identifier(TABLE_NAME)}.files LIMIT 1").first()[0]
    delete = (
        spark._jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(spec)
        .ofEqualityDeletes(field)
        .withPath(f"{config.output.path}/other-engine-eq-delete.parquet")
        .withFormat("PARQUET")
        .withFileSizeInBytes(100)
        .withRecordCount(1)
        .withPartitionPath(f"event_date={partition['event_date']}")
        .build()
    )
    table.newRowDelta().addDeletes(delete).commit()

    with pytest.raises(ConfigError, match=r"lake\.props has 1 equality-deleted rows on main") as refused:
        run_fenced(spark, config, store, planned)
    assert "rewrite_data_files" in str(refused.value) and "nothing was written" in str(refused.value)
    assert store.get_batch(planned.batch_id).status.value == "failed"
    before = len(store.list_batches(config.name, limit=100))
    with pytest.raises(ConfigError, match="equality-deleted rows"):
        plan_batch(config, store)
    with pytest.raises(ConfigError, match="equality-deleted rows"):
        record_backfill(
            config,
            store,
            {"topic": topic, "partitions": "0", "start_offset": 0, "end_offset": 5, "reason": "t"},
        )
    assert len(store.list_batches(config.name, limit=100)) == before  # nothing planned
