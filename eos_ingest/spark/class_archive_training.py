"""The class-data archive's training job (spark/train_class_archive.py runs it under
-XX:ArchiveClassesAtExit): a batch's steps on generated rows, so that its JVM loads the classes a
batch loads (the JDK writes them to the archive at exit): the Kafka source over explicit ranges
(analysed, not read: no broker here), the JSON parse with its quarantine and unknown-field columns,
the observed counts, the staged partitioned write, the gate's read-back to Arrow, the commit, the
quarantine's replace, and a second batch's replace into the existing table. Nothing here is kept
but the archive (spark/class_archive.py builds and checks it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.formats import parser
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.spark.kafka_source import read_ranges
from eos_ingest.storage.delta import writer
from eos_ingest.storage.delta.staged_write import StagedReplace
from eos_ingest.storage.table_format import Replace

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ROWS = 2000


def kafka_like_rows(spark: SparkSession, first: int) -> DataFrame:
    """Rows shaped as the Kafka source's, offsets first.. first+ROWS: JSON values, one in 50 not JSON,
    one in 40 with a field the schema lacks."""
    good = F.to_json(F.struct(F.col("id"), F.concat(F.lit("n"), F.col("id").cast("string")).alias("name")))
    extra = F.to_json(F.struct(F.col("id"), F.lit(1).alias("extra")))
    value = (
        F.when(F.col("id") % 50 == 0, F.lit("not json")).when(F.col("id") % 40 == 0, extra).otherwise(good)
    )
    return spark.range(first, first + ROWS).select(
        F.lit(None).cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.lit("t").alias("topic"),
        F.lit(0).alias("partition"),
        F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(0).alias("timestampType"),
    )


def batch(spark: SparkSession, config: PipelineConfig, batch_id: int, first: int) -> None:
    ranges = [PlannedRange("t", 0, first, first + ROWS)]
    parsed = parser.parse(kafka_like_rows(spark, first), config, batch_id)
    txn = writer.Txn(f"class-archive/{batch_id}/table", 1)
    rows = parser.output_rows(parsed, config)
    observation: list[Any] = []

    def stage() -> StagedReplace:
        observed, observed_by = parser.observe_split(parsed, batch_id)
        observation.append(observed_by)
        rows = parser.output_rows(observed, config)
        return writer.stage(
            spark,
            Replace(rows, str(config.output_path), ranges, batch_id, config.output.partition_by, txn=txn),
        )

    def check(staged: StagedReplace) -> None:
        parser.observed_split(observation[-1])
        staged.read_back(rows.schema).where(f"batch_id = {batch_id}").toArrow()

    writer.commit_staged(stage, str(config.output_path), batch_id, txn=txn, check=check)
    quarantine = parser.quarantine_rows(parsed, config)
    quarantine_txn = writer.Txn(f"class-archive/{batch_id}/quarantine", 1)
    writer.replace_ranges(
        spark, Replace(quarantine, str(config.quarantine_path), ranges, batch_id, txn=quarantine_txn)
    )


def main(work: Path) -> None:
    spark = SparkSession.builder.getOrCreate()
    doc = {
        "name": "class_archive",
        "topics": ["t"],
        "value": {"format": "json", "schema": "id BIGINT, name STRING"},
        "output": {"path": str(work / "table")},
    }
    (work / "class_archive.yaml").write_text(yaml.safe_dump(doc))
    config = load_pipeline(work / "class_archive.yaml")
    # The Kafka source over explicit ranges, analysed only: planning it would ask a broker.
    source = read_ranges(spark, {"bootstrap.servers": "127.0.0.1:9"}, [PlannedRange("t", 0, 0, 10)])
    parser.parse(source, config, 1).schema  # noqa: B018
    batch(spark, config, 1, 0)
    batch(spark, config, 2, ROWS)  # a replace into an existing table
    spark.stop()
