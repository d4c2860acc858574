"""How many committed records Kafka holds in given offset spans: the gate's independent count.

Counted from the record-batch headers of raw read_committed fetches (kafka/header_counts.py, through
kafka-python), which costs a fraction of decoding every record. Where that cannot answer (a kafka
setting kafka-python cannot honour, an old message format, an edge batch in a codec missing
here), a plain confluent-kafka consumer with isolation.level=read_committed counts record by
record, as before. Both share no code with the Spark job's read, count without collecting (memory
O(partitions) plus a bounded fetch), and read every partition at once: one fetch covers them all,
so the count costs about the same for 6 partitions as for 1.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence

import kafka.errors as kafka_errors
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eos_ingest.errors import KafkaAccessError, KafkaUnavailableError
from eos_ingest.kafka import clients as librdkafka_clients
from eos_ingest.kafka.admin import transient
from eos_ingest.kafka.header_counts import count_from_headers
from eos_ingest.kafka.python_settings import Untranslatable, kafka_python_config
from eos_ingest.kafka.record_batches import NeedsTheConsumer

log = logging.getLogger(__name__)

Spans = Mapping[tuple[str, int], Sequence[tuple[int, int]]]

# consume() returns after this many messages or _POLL_S; the end of the log costs one short wait.
_CONSUME_BATCH = 10_000
_POLL_S = 0.2


def read_committed_consumer(kafka_settings: Mapping[str, str]) -> Consumer:
    """A consumer of no group's offsets that sees committed records only and reports the log's end."""
    return librdkafka_clients.build(
        Consumer,
        {
            # The broker answers a fetch at the end of the log after this long (librdkafka: 500 ms);
            # a count ends there, so do not wait. The pipeline's settings may still set it.
            "fetch.wait.max.ms": 50,
            **kafka_settings,
            "group.id": f"eos-ingest-verify-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        },
    )


def read_committed_counts(
    kafka_settings: Mapping[str, str], spans: Spans, timeout_s: float = 30.0
) -> dict[tuple[str, int], int]:
    """Per partition, how many committed records `spans` hold (end exclusive).

    Not end - start: transaction markers and aborted records leave gaps in the offsets. Every
    partition is assigned at once; a partition with several intervals reads them in turn.

    A broker that does not answer for `timeout_s`, or answers with a transient error (a restart:
    no leader yet, a newer leader epoch), is KafkaUnavailableError: retriable, the batch stays
    planned, where a raw KafkaException or TimeoutError made the job exit 1 with a traceback.
    """
    try:
        try:
            return _count_from_headers(kafka_settings, spans, timeout_s)
        except (Untranslatable, NeedsTheConsumer) as exc:
            log.info("counting committed records record by record: %s", exc)
        return count_by_records(kafka_settings, spans, timeout_s)
    except TimeoutError as exc:
        raise KafkaUnavailableError(f"{exc}; the batch stays planned: run it again") from exc
    except KafkaException as exc:
        if not transient(exc):
            raise
        raise KafkaUnavailableError(
            f"Kafka failed while counting committed records ({exc.args[0]}); the batch stays "
            "planned: run it again"
        ) from exc


def _count_from_headers(
    kafka_settings: Mapping[str, str], spans: Spans, timeout_s: float
) -> dict[tuple[str, int], int]:
    """count_from_headers with kafka-python's errors as ours: a refused login needs a person, a
    transient error is the same KafkaUnavailableError as the consumer's."""
    config = kafka_python_config(kafka_settings)
    try:
        return count_from_headers(config, spans, timeout_s)
    except kafka_errors.KafkaError as exc:
        if isinstance(exc, kafka_errors.SaslAuthenticationFailedError | kafka_errors.AuthorizationError):
            raise KafkaAccessError(
                f"Kafka refused the gate's count ({exc}); check sasl.username, sasl.password and "
                "sasl.mechanism, and the client's read access to the topics"
            ) from None
        if not exc.retriable:
            # Not the broker's answer to these settings but the client's trouble with it (a frame
            # or a record it cannot read): the record-decoding consumer still can count.
            log.warning("the header count failed (%r); counting record by record", exc)
            raise NeedsTheConsumer(str(exc)) from exc
        raise KafkaUnavailableError(
            f"Kafka failed while counting committed records ({exc}); the batch stays planned: run it again"
        ) from exc


def count_by_records(
    kafka_settings: Mapping[str, str], spans: Spans, timeout_s: float
) -> dict[tuple[str, int], int]:
    counts = {tp: 0 for tp in spans}
    todo = {tp: deque(sorted((s, e) for s, e in intervals if e > s)) for tp, intervals in spans.items()}
    current = {tp: queue.popleft() for tp, queue in todo.items() if queue}
    if not current:
        return counts
    consumer = read_committed_consumer(kafka_settings)
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in current.items()])
        deadline = time.monotonic() + timeout_s
        while current:
            messages = consumer.consume(_CONSUME_BATCH, _POLL_S)
            if not messages:
                if time.monotonic() > deadline:
                    waiting = ", ".join(f"{t}[{p}] [{s}, {e})" for (t, p), (s, e) in sorted(current.items()))
                    raise TimeoutError(
                        f"no answer within {timeout_s}s counting committed records of {waiting}"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            moved: set[tuple[str, int]] = set()  # sought anew: the rest of this list is stale for them
            for msg in messages:
                tp = (str(msg.topic()), int(msg.partition() or 0))
                if tp not in current or tp in moved:
                    continue  # fetched before its interval ended
                start, end = current[tp]
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"counting {tp[0]}[{tp[1]}] from {start}: {error}")
                    done = True  # the end of the committed log: the interval lies below the LSO
                else:
                    offset = int(msg.offset() or 0)
                    if offset < start:
                        continue
                    if offset < end:
                        counts[tp] += 1
                    done = offset + 1 >= end
                if done:
                    _next_interval(consumer, tp, todo[tp], current)
                    moved.add(tp)
    finally:
        consumer.close()
    return counts


def _next_interval(
    consumer: Consumer,
    tp: tuple[str, int],
    queue: deque[tuple[int, int]],
    current: dict[tuple[str, int], tuple[int, int]],
) -> None:
    """Move partition `tp` to its next interval (a seek), or stop fetching it (what lies beyond a
    backfill's range may be most of the partition)."""
    if queue:
        current[tp] = queue.popleft()
        consumer.seek(TopicPartition(tp[0], tp[1], current[tp][0]))
    else:
        del current[tp]
        consumer.pause([TopicPartition(tp[0], tp[1])])
