"""Spark batch read of exactly the planned Kafka ranges, read_committed.

Aborted records and transaction markers leave gaps in offsets, so a range [start, end) yields at
most end - start rows, often fewer. failOnDataLoss=true turns records deleted by retention between
plan and read into an error instead of a silent gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from eos_ingest.kafka_java import java_kafka_options
from eos_ingest.planner import PlannedRange, ranges_to_assign_json, ranges_to_kafka_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def spark_kafka_options(kafka_settings: Mapping[str, str]) -> dict[str, str]:
    """The pipeline's librdkafka settings as Spark's `kafka.*` source options (see kafka_java)."""
    return {f"kafka.{key}": value for key, value in java_kafka_options(kafka_settings).items()}


def read_ranges(
    spark: SparkSession,
    kafka_settings: Mapping[str, str],
    ranges: Sequence[PlannedRange],
    *,
    headers: bool = False,
) -> DataFrame:
    """The committed records of exactly `ranges` (empty ranges skipped) as Spark's Kafka rows;
    with `headers`, their headers too (a column only pipelines that keep them pay for)."""
    non_empty = [r for r in ranges if r.end > r.start]
    if not non_empty:
        raise ValueError("read_ranges needs at least one non-empty range; an empty plan does no Spark work")
    starting, ending = ranges_to_kafka_json(non_empty)
    reader = (
        spark.read.format("kafka")
        .option("assign", ranges_to_assign_json(non_empty))
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true" if headers else "false")
    )
    for key, value in spark_kafka_options(kafka_settings).items():
        reader = reader.option(key, value)
    return reader.load()
