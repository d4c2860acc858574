"""Kafka-side facts the planner needs: partitions, log-start offsets and last stable offsets.

The last stable offset (LSO) is the read_committed end of a partition: below it every transaction
is decided. Planning to the LSO, never to "latest at read time", is what makes a range's content
fixed at plan time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from eos_ingest.errors import KafkaUnavailableError, TopicNotFoundError
from eos_ingest.identity import KafkaIdentity
from eos_ingest.planner import PartitionOffsets

# Errors that mean "the cluster did not answer (yet)", worth a bounded retry.
_TRANSIENT = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


def admin_client(kafka_settings: Mapping[str, str], timeout_s: float = 15.0) -> AdminClient:
    """An AdminClient whose requests give up after `timeout_s` instead of librdkafka's minutes."""
    conf: dict[str, str | int | float | bool] = {"socket.timeout.ms": int(timeout_s * 1000), **kafka_settings}
    return AdminClient(conf)


def _with_retries(what: str, bootstrap: str, call, attempts: int, backoff_s: float):
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not isinstance(error, KafkaError) or error.code() not in _TRANSIENT:
                raise
            last = exc
            time.sleep(backoff_s * (2**attempt))
    raise KafkaUnavailableError(
        f"Kafka at {bootstrap} did not answer while {what} ({attempts} attempts): {last}. "
        "Check that the broker is up and bootstrap.servers is right; the batch is unchanged and can be retried."
    )


def discover_partitions(admin: AdminClient, topics: Sequence[str], timeout_s: float = 15.0) -> dict[str, int]:
    """Number of partitions of each topic; raises TopicNotFoundError naming missing topics."""
    metadata = admin.list_topics(timeout=timeout_s)
    missing = [t for t in topics if t not in metadata.topics or metadata.topics[t].error is not None]
    if missing:
        raise TopicNotFoundError(
            f"topic(s) {', '.join(missing)} do not exist on the cluster; create them or fix 'topics' in the pipeline config"
        )
    return {t: len(metadata.topics[t].partitions) for t in topics}


def _list(
    admin: AdminClient, spec_by_tp, isolation: IsolationLevel, timeout_s: float
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets(spec_by_tp, isolation_level=isolation, request_timeout=timeout_s)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def fetch_partition_offsets(
    kafka_settings: Mapping[str, str],
    topics: Sequence[str],
    *,
    timeout_s: float = 15.0,
    attempts: int = 4,
    backoff_s: float = 1.0,
) -> list[PartitionOffsets]:
    """Log start and LSO of every partition of `topics`, partitions discovered now (new ones included)."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    admin = admin_client(kafka_settings, timeout_s)

    def fetch() -> list[PartitionOffsets]:
        counts = discover_partitions(admin, topics, timeout_s)
        tps = [KafkaTopicPartition(t, p) for t in topics for p in range(counts[t])]
        starts = _list(
            admin, {tp: OffsetSpec.earliest() for tp in tps}, IsolationLevel.READ_COMMITTED, timeout_s
        )
        # With READ_COMMITTED, "latest" is the last stable offset, not the high watermark.
        stables = _list(
            admin, {tp: OffsetSpec.latest() for tp in tps}, IsolationLevel.READ_COMMITTED, timeout_s
        )
        return [
            PartitionOffsets(topic=t, partition=p, log_start=starts[(t, p)], last_stable=stables[(t, p)])
            for t, p in sorted(starts)
        ]

    return _with_retries("reading partition offsets", bootstrap, fetch, attempts, backoff_s)


def offsets_for_time(
    kafka_settings: Mapping[str, str],
    topic: str,
    partitions: Sequence[int],
    timestamp_ms: int,
    timeout_s: float = 15.0,
) -> dict[int, int]:
    """First offset of each partition whose timestamp is >= timestamp_ms (the LSO when none is)."""
    admin = admin_client(kafka_settings, timeout_s)
    tps = [KafkaTopicPartition(topic, p) for p in partitions]
    found = _list(
        admin,
        {tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in tps},
        IsolationLevel.READ_COMMITTED,
        timeout_s,
    )
    stables = _list(admin, {tp: OffsetSpec.latest() for tp in tps}, IsolationLevel.READ_COMMITTED, timeout_s)
    # Kafka answers -1 when no record is that recent: the range then ends at the stable end.
    return {p: (found[(topic, p)] if found[(topic, p)] >= 0 else stables[(topic, p)]) for p in partitions}


# -- identity: which cluster, which incarnation of each topic ---------------------------------------


@dataclass(frozen=True)
class KafkaSnapshot:
    """Partition offsets and the identity (cluster id, topic ids) they were read under."""

    offsets: list[PartitionOffsets]
    identity: KafkaIdentity


def _describe(admin: AdminClient, topics: Sequence[str], timeout_s: float, bootstrap: str) -> KafkaIdentity:
    cluster = admin.describe_cluster(request_timeout=timeout_s).result()
    described = admin.describe_topics(TopicCollection(list(topics)), request_timeout=timeout_s)
    topic_ids: dict[str, str | None] = {}
    for name, future in described.items():
        try:
            topic_id = future.result().topic_id
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicNotFoundError(
                    f"topic {name} does not exist on the cluster at {bootstrap}; create it or fix 'topics' "
                    "in the pipeline config"
                ) from None
            raise
        # A broker without topic ids (ZooKeeper mode before Kafka 2.8) reports the zero UUID.
        text_id = str(topic_id) if topic_id is not None else None
        topic_ids[name] = None if text_id in (None, "", _ZERO_UUID) else text_id
    return KafkaIdentity(cluster_id=cluster.cluster_id or None, topic_ids=topic_ids, bootstrap=bootstrap)


_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def fetch_identity(
    kafka_settings: Mapping[str, str],
    topics: Sequence[str],
    *,
    timeout_s: float = 15.0,
    attempts: int = 4,
    backoff_s: float = 1.0,
) -> KafkaIdentity:
    """The cluster id (describe_cluster) and each topic's id (describe_topics), bounded and retried."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    admin = admin_client(kafka_settings, timeout_s)
    return _with_retries(
        "reading the cluster and topic ids",
        bootstrap,
        lambda: _describe(admin, topics, timeout_s, bootstrap),
        attempts,
        backoff_s,
    )


def fetch_snapshot(
    kafka_settings: Mapping[str, str],
    topics: Sequence[str],
    *,
    timeout_s: float = 15.0,
    attempts: int = 4,
    backoff_s: float = 1.0,
) -> KafkaSnapshot:
    """Offsets of every partition of `topics` and the identity they belong to.

    The identity is read before and after the offsets; if a topic was recreated in between the two
    disagree and the whole read is repeated (up to `attempts` times, then KafkaUnavailableError), so
    the offsets returned belong to the identity returned."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    for _ in range(attempts):
        before = fetch_identity(
            kafka_settings, topics, timeout_s=timeout_s, attempts=attempts, backoff_s=backoff_s
        )
        found = fetch_partition_offsets(
            kafka_settings, topics, timeout_s=timeout_s, attempts=attempts, backoff_s=backoff_s
        )
        after = fetch_identity(
            kafka_settings, topics, timeout_s=timeout_s, attempts=attempts, backoff_s=backoff_s
        )
        if before == after:
            return KafkaSnapshot(found, after)
    raise KafkaUnavailableError(
        f"Kafka at {bootstrap}: the ids of topic(s) {', '.join(topics)} changed while their offsets were read "
        f"({attempts} attempts); a topic is being deleted and recreated. Run again once it is stable."
    )
