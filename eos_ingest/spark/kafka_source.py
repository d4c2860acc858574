"""Spark batch read of exactly the planned Kafka ranges, read_committed.

Aborted records and transaction markers leave gaps in offsets, so a range [start, end) yields at
most end - start rows, often fewer. failOnDataLoss=true turns records deleted by retention between
plan and read into an error instead of a silent gap.

A range planned up to the last stable offset often ends with a transaction's commit marker: the
last offset holds no record, so each task asks the broker for what follows, and at the end of the
log the broker answers only after the consumer's fetch.max.wait.ms (Java's default 500 ms). A read
is bounded and never waits for new records, so the wait is cut to _END_OF_LOG_WAIT_MS: 6 tasks on 2
cores paid 3 waits in a row, ~1.5 s a batch (a batch of markers only: 1.77 -> 0.22 s).

A broker that accepts connections and never answers (a black hole: a hung broker, a firewall that
drops packets) held a read for ~3 minutes under the Java client's and Spark's own bounds
(default.api.timeout.ms 60 s, after a 30 s request timeout; a poll timeout of spark.network.timeout,
120 s), then failed with a JVM traceback. The pipeline's `kafka_timeout_seconds` bounds each of
them instead, and spark_kafka_timeout turns the Kafka client's TimeoutException into the retriable
KafkaUnavailableError: one line, exit 75, the batch left planned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from eos_ingest.errors import KafkaUnavailableError
from eos_ingest.kafka.java_settings import java_kafka_options
from eos_ingest.plan.ranges import PlannedRange, ranges_to_assign_json, ranges_to_kafka_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_END_OF_LOG_WAIT_MS = 10
# What the Kafka client in Spark's source raises when the broker does not answer in time: its
# class, in the Py4J error's text (the Java stack trace), and the message's first words.
_KAFKA_TIMEOUT = "org.apache.kafka.common.errors.TimeoutException"
_KAFKA_TIMEOUT_TEXT = re.compile(r"org\.apache\.kafka\.common\.errors\.TimeoutException: ([^\n]*)")


def spark_kafka_options(kafka_settings: Mapping[str, str]) -> dict[str, str]:
    """The pipeline's librdkafka settings as Spark's `kafka.*` source options (see kafka_java)."""
    return {f"kafka.{key}": value for key, value in java_kafka_options(kafka_settings).items()}


def read_ranges(
    spark: SparkSession,
    kafka_settings: Mapping[str, str],
    ranges: Sequence[PlannedRange],
    *,
    headers: bool = False,
    timeout_s: float = 30.0,
) -> DataFrame:
    """The committed records of exactly `ranges` (empty ranges skipped) as Spark's Kafka rows;
    with `headers`, their headers too (a column only pipelines that keep them pay for). A broker
    that leaves a request unanswered for `timeout_s` fails the read (spark_kafka_timeout)."""
    non_empty = [r for r in ranges if r.end > r.start]
    if not non_empty:
        raise ValueError("read_ranges needs at least one non-empty range; an empty plan does no Spark work")
    return (
        spark.read.format("kafka")
        .options(**read_options(kafka_settings, non_empty, headers=headers, timeout_s=timeout_s))
        .load()
    )


def read_options(
    kafka_settings: Mapping[str, str],
    ranges: Sequence[PlannedRange],
    *,
    headers: bool = False,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """Spark's Kafka source options for exactly `ranges` (non-empty), read_committed; the
    pipeline's own fetch.wait.max.ms and request.timeout.ms, if set, replace the short end-of-log
    wait and the bound `timeout_s`."""
    starting, ending = ranges_to_kafka_json(ranges)
    bound_ms = str(int(timeout_s * 1000))
    return {
        "kafka.fetch.max.wait.ms": str(_END_OF_LOG_WAIT_MS),
        # One bound for every wait of the read: a request, a call that retries requests (the
        # position of a partition, the driver's offsets), and the executor's poll for records.
        "kafka.request.timeout.ms": bound_ms,
        "kafka.default.api.timeout.ms": bound_ms,
        "kafkaConsumer.pollTimeoutMs": bound_ms,
        **spark_kafka_options(kafka_settings),
        "assign": ranges_to_assign_json(ranges),
        "startingOffsets": starting,
        "endingOffsets": ending,
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",
        "includeHeaders": "true" if headers else "false",
    }


def spark_kafka_timeout(
    exc: BaseException, bootstrap: str, batch_id: int, timeout_s: float
) -> KafkaUnavailableError | None:
    """KafkaUnavailableError when `exc` (a Py4J error of the read) is the Kafka client giving up on
    an unanswered broker; None for any other error."""
    text = str(exc)
    if _KAFKA_TIMEOUT not in text:
        return None
    found = _KAFKA_TIMEOUT_TEXT.search(text)
    cause = found.group(1).strip() if found else "TimeoutException"
    return KafkaUnavailableError(
        f"Kafka at {bootstrap} did not answer within {timeout_s:g} s while Spark read batch {batch_id} "
        f"({cause}); nothing was committed and the batch stays planned: check that the broker is up "
        "and reachable from Spark's executors, then run again (kafka_timeout_seconds sets the bound)"
    )
