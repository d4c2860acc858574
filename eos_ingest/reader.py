"""Spark batch read of exactly the planned Kafka ranges, read_committed.

Aborted records and transaction markers leave gaps in offsets, so a range [start, end) yields at
most end - start rows, often fewer. failOnDataLoss=true turns records deleted by retention between
plan and read into an error instead of a silent gap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from eos_ingest.errors import ConfigError
from eos_ingest.planner import PlannedRange, ranges_to_assign_json, ranges_to_kafka_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# librdkafka keys that mean the same in the Java client Spark uses.
_SAME_IN_JAVA = {
    "bootstrap.servers",
    "security.protocol",
    "client.id",
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "ssl.endpoint.identification.algorithm",
}
# librdkafka-only keys with no effect on a read (producer or consumer-group tuning).
_IGNORED = {"socket.timeout.ms", "linger.ms", "enable.partition.eof", "group.id", "debug", "log_level"}


def spark_kafka_options(kafka_settings: Mapping[str, str]) -> dict[str, str]:
    """Translate the pipeline's librdkafka settings into Spark's `kafka.*` source options."""
    options: dict[str, str] = {}
    username = kafka_settings.get("sasl.username")
    password = kafka_settings.get("sasl.password")
    mechanism = kafka_settings.get("sasl.mechanism") or kafka_settings.get("sasl.mechanisms")
    for key, value in kafka_settings.items():
        if key in _SAME_IN_JAVA:
            options[f"kafka.{key}"] = str(value)
        elif key in ("sasl.mechanism", "sasl.mechanisms"):
            options["kafka.sasl.mechanism"] = str(value)
        elif key in ("sasl.username", "sasl.password") or key in _IGNORED:
            continue
        else:
            raise ConfigError(
                f"kafka setting '{key}' has no known equivalent for Spark's Kafka source; "
                "remove it from the pipeline's 'kafka' settings or add its translation to eos_ingest/reader.py"
            )
    if username is not None:
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if str(mechanism or "").upper().startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        options["kafka.sasl.jaas.config"] = (
            f"{module} required username={json.dumps(str(username))} password={json.dumps(str(password or ''))};"
        )
    return options


def read_ranges(
    spark: SparkSession, kafka_settings: Mapping[str, str], ranges: Sequence[PlannedRange]
) -> DataFrame:
    """The committed records of exactly `ranges` (empty ranges skipped) as Spark's Kafka rows."""
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
        .option("includeHeaders", "false")
    )
    for key, value in spark_kafka_options(kafka_settings).items():
        reader = reader.option(key, value)
    return reader.load()
