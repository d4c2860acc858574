"""What reads an Iceberg pipeline's tables, on a real table of its JDBC catalog (SQLite control DB)
written by a real batch (broker, Spark, the gate): the gate's pyiceberg read of a staged branch, the
audit (pyiceberg, no Spark), the Ingestion page's figures and the names its lineage and Asset use.
verify on Iceberg: tests/integration/service/test_verify_and_scale.py. One pipeline and one
committed batch for the module; the last test alters the table behind the pipeline's back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import pytest
from confluent_kafka.admin import NewTopic
from pyspark.sql import functions as F

from eos_ingest.airflow import ingestion_page as plugin
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import Batch, ControlStore
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.quality import context as gx_context
from eos_ingest.quality.audit import audit_batch
from eos_ingest.service.status import pipeline_status
from eos_ingest.service.trends import pipeline_trends
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.format import IcebergFormat
from eos_ingest.storage.table_format import Replace
from eos_ingest.storage.table_formats import output_reader
from eos_ingest.storage.table_names import QUARANTINE, TABLE, output_names
from tests.fixtures.pipelines import iceberg_output, ingest_once, write_pipeline
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

UNIQUE = "expect_compound_columns_to_be_unique(kafka_topic, kafka_partition, kafka_offset)"
COUNT = "expect_table_row_count_to_equal"


@dataclass(frozen=True)
class Committed:
    config: PipelineConfig
    batch: Batch

    @property
    def table(self) -> str:
        """The table's Spark name."""
        return output_names(self.config)[TABLE].shown


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


@pytest.fixture(scope="module")
def committed(
    spark, kafka_bootstrap, kafka_admin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Committed]:
    """One committed batch of 2 partitions: 12 good records, 1 that does not parse, an aborted
    transaction between them (offsets with gaps)."""
    folder: Path = tmp_path_factory.mktemp("iceberg_reads")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gx_context, "gx_root", lambda: folder / "gx")  # GX results under the module's folder
        topic = f"iceberg_reads_{uuid.uuid4().hex[:8]}"
        kafka_admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(60)
        producer = TxProducer(kafka_bootstrap)
        producer.transaction(topic, rows(0, 6), commit=True, partition=0)
        producer.transaction(topic, rows(100, 4), commit=False, partition=0)
        producer.transaction(topic, [*rows(6, 6), b"not json"], commit=True, partition=1)
        config = write_pipeline(
            folder,
            kafka_bootstrap,
            [topic],
            f"sqlite:///{folder / 'control.db'}",
            name="reads",
            output=iceberg_output(folder, "reads"),
        )
        result = ingest_once(spark, config)
        assert result is not None and (result.records_written, result.records_quarantined) == (12, 1)
        yield Committed(config, ControlStore(config.control_db_url).get_batch(result.batch_id))


def test_the_gate_reads_a_staged_branch_with_pyiceberg_as_spark_reads_it(spark, committed) -> None:
    config, batch = committed.config, committed.batch
    iceberg = IcebergFormat(IcebergCatalog.of(config))
    # A write of batch 99 staged on a branch: the batch's rows again, under another topic.
    other = [PlannedRange("other", p, 0, 100) for p in (0, 1)]
    again = (
        spark.table(committed.table)
        .where(f"batch_id = {batch.batch_id}")
        .withColumn("kafka_topic", F.lit("other"))
        .withColumn("batch_id", F.lit(99).cast("bigint"))
    )
    staged = iceberg.stage(spark, Replace(again, config.output.table, other, 99))
    try:
        read_back = staged.read_back(again.schema)
        schema = read_back.schema  # as the gate passes it: the read-back frame's (its nullability too)
        arrow = staged.read_arrow(schema, 99)
        by_spark = read_back.where("batch_id = 99").toArrow()

        assert arrow is not None  # pyiceberg stood in for Spark's read
        assert arrow.schema == by_spark.schema  # Spark's Arrow types, column for column
        key = [("kafka_partition", "ascending"), ("kafka_offset", "ascending")]
        assert arrow.sort_by(key).equals(by_spark.sort_by(key))
        assert arrow.num_rows == 12
        on_branch = staged.read_arrow(schema, batch.batch_id)  # main's rows too: the branch is cut from it
        assert on_branch is not None and on_branch.num_rows == 12
        published = output_reader(config).open(TABLE)  # main does not see the branch
        assert published is not None
        assert published.batch_rows(replace(batch, batch_id=99, ranges=tuple(other))).num_rows == 0
    finally:
        staged.abort()


def test_the_audit_reads_the_batch_with_pyiceberg_and_passes(committed) -> None:
    report = audit_batch(committed.config, committed.batch.batch_id)

    assert report["success"] is True, report
    stats = report["statistics"]
    assert (stats["rows"], stats["quarantined_rows"], stats["read_committed_records"]) == (12, 1, 13)


def test_the_page_shows_mains_snapshot_its_files_and_bytes(spark, committed) -> None:
    config = committed.config
    store = ControlStore(config.control_db_url)
    catalog = IcebergCatalog.of(config)

    shown = pipeline_status(config, store, offsets=[], now=datetime.now(UTC))

    assert (shown["table_format"], shown["version_label"]) == ("iceberg", "Iceberg snapshot")
    assert (shown["output_path"], shown["quarantine_path"]) == (
        "eos_reads.lake.events",
        "eos_reads.lake.events_quarantine",
    )
    for which, table in ((TABLE, "lake.events"), (QUARANTINE, "lake.events_quarantine")):
        figures = shown["tables"][which]
        files = spark.sql(f"SELECT file_size_in_bytes FROM {catalog.identifier(table)}.data_files").collect()
        assert figures["version"] == catalog.java_table(spark, table).currentSnapshot().snapshotId()
        assert (figures["files"], figures["bytes"]) == (len(files), sum(f[0] for f in files)), which
        assert figures["files"] > 0 and figures["last_maintenance"] is None
    assert shown["tables"][TABLE]["version"] == committed.batch.delta_version

    page = plugin.render(
        "pipeline.html",
        s={**shown, "trends": pipeline_trends(store, config.name, datetime.now(UTC))},
        batches=10,
        data_docs=False,
    )
    assert "<th>Iceberg snapshot</th>" in page
    assert f'<td class="num">{committed.batch.delta_version}</td>' in page


def test_lineage_and_the_asset_name_the_table_by_its_location(committed) -> None:
    names = output_names(committed.config)
    for which in (TABLE, QUARANTINE):
        published = output_reader(committed.config).open(which)
        assert published is not None
        location = urlparse(published.table.location()).path  # as the catalog created it
        assert names[which].dataset == ("file", location)
        assert names[which].uri == Path(location).as_uri()


def test_the_audit_fails_on_rows_duplicated_and_deleted_behind_the_pipelines_back(spark, committed) -> None:
    table = committed.table
    spark.sql(f"INSERT INTO {table} SELECT * FROM {table} WHERE kafka_partition = 0 LIMIT 2")
    spark.sql(f"DELETE FROM {table} WHERE kafka_partition = 1 AND kafka_offset = 2")

    report = audit_batch(committed.config, committed.batch.batch_id)

    assert report["success"] is False
    assert set(report["failed_expectations"]) == {UNIQUE, COUNT}, report
    assert f"{COUNT}: observed 13, expected 12" in report["critical_failures"]
