"""The oldest unread record of each partition: how old the lag is (the Ingestion page, check-lag)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eos_ingest.errors import KafkaUnavailableError
from eos_ingest.kafka import clients as librdkafka_clients
from eos_ingest.kafka.admin import TRANSIENT_ERRORS, QuietLibrdkafkaLog


def first_record_timestamps(
    kafka_settings: Mapping[str, str], positions: Mapping[tuple[str, int], int], timeout_s: float = 3.0
) -> dict[tuple[str, int], int | None]:
    """Per (topic, partition), the timestamp (ms since the epoch) of the first committed record at
    or after its position, read in one pass over every partition, within `timeout_s` in total.

    What "the age of the oldest unread record" needs: the position is the committed offset, and a
    transaction marker or an aborted record there is skipped as the pipeline's read skips it
    (read_committed). None for a partition that reached the end of its log first (nothing
    committed past the position yet) or whose record has no timestamp; a partition that did not
    answer within `timeout_s` is left out (unknown). A broker that answers for no partition at all
    is KafkaUnavailableError.
    """
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    found: dict[tuple[str, int], int | None] = {}
    if not positions:
        return found
    watch = QuietLibrdkafkaLog(kafka_settings.get("bootstrap.servers"))
    consumer = librdkafka_clients.build(
        Consumer,
        {
            # A partition with nothing past its position answers (end of log) after this long.
            "fetch.wait.max.ms": 10,
            # One record per partition is wanted: small fetches, not the default 1 MiB each.
            "max.partition.fetch.bytes": 4096,
            "socket.timeout.ms": max(int(timeout_s * 1000), 1000),
            "logger": watch,
            **kafka_settings,
            "group.id": f"eos-ingest-status-{uuid.uuid4().hex}",  # assigned, never committed
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "latest",
        },
    )
    answered = False
    try:
        consumer.assign([KafkaTopicPartition(t, p, offset) for (t, p), offset in positions.items()])
        waiting = set(positions)
        deadline = time.monotonic() + timeout_s
        while waiting and (left := deadline - time.monotonic()) > 0:
            # Short waits: consume() returns at its timeout, not when the last partition answered.
            for message in consumer.consume(num_messages=1000, timeout=min(left, 0.05)):
                tp = (message.topic(), message.partition())
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    if error.code() == KafkaError._ALL_BROKERS_DOWN and not answered:
                        break  # no broker can be reached: unknown now, not after the timeout
                    if error.code() not in TRANSIENT_ERRORS:
                        raise KafkaException(error)
                    continue
                answered = True
                if tp not in waiting:
                    continue
                waiting.discard(tp)
                found[tp] = None
                if error is None:
                    kind, stamp = message.timestamp()
                    found[tp] = stamp if kind != TIMESTAMP_NOT_AVAILABLE and stamp >= 0 else None
                # Not paused: a pause changes the fetch session (a round trip more, measured
                # 0.2-0.4 s); later records of the partition are small fetches, ignored.
    finally:
        consumer.close()
    if not answered:
        refused = watch.refusal
        raise KafkaUnavailableError(
            f"Kafka at {bootstrap} did not answer in {timeout_s:g} s while reading the oldest unread "
            f"records{': ' + refused if refused else ''}"
        )
    return found
