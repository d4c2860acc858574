"""Kafka-side facts the planner needs: partitions, log-start offsets and last stable offsets.

The last stable offset (LSO) is the read_committed end of a partition: below it every transaction
is decided. Planning to the LSO, never to "latest at read time", is what makes a range's content
fixed at plan time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from eos_ingest.errors import KafkaUnavailableError, TopicNotFoundError
from eos_ingest.kafka.admin import TRANSIENT_ERRORS, topic_problems, watched_admin, with_retries
from eos_ingest.plan.identity import KafkaIdentity
from eos_ingest.plan.ranges import PartitionOffsets


def discover_partitions(admin: AdminClient, topics: Sequence[str], timeout_s: float = 15.0) -> dict[str, int]:
    """Number of partitions of each topic; raises TopicNotFoundError naming missing topics, and
    KafkaException (retried by fetch_partition_offsets) for any other metadata error."""
    metadata = admin.list_topics(timeout=timeout_s)
    missing, other = topic_problems(topics, {t: m.error for t, m in metadata.topics.items()})
    if missing:
        raise TopicNotFoundError(
            f"topic(s) {', '.join(missing)} do not exist on the cluster; create them or fix 'topics' in the pipeline config"
        )
    if other is not None:
        if other.code() not in TRANSIENT_ERRORS:
            # Retried like a transport error: the topic exists, its metadata is not usable yet.
            other = KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"topic metadata error: {other.str()}")
        raise KafkaException(other)
    return {t: len(metadata.topics[t].partitions) for t in topics}


def _list(
    admin: AdminClient, spec_by_tp, isolation: IsolationLevel, timeout_s: float
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets(spec_by_tp, isolation_level=isolation, request_timeout=timeout_s)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def _check_answered(found: Mapping[tuple[str, int], int], what: str) -> None:
    """A transient KafkaException (retried, then KafkaUnavailableError) for a partition answered
    with no offset: librdkafka answered -1001 (OFFSET_INVALID) without an error while the
    partition's leader moved in a cluster (seen in `make chaos CHAOS_BROKERS=3`)."""
    missing = sorted(f"{t}[{p}]: {o}" for (t, p), o in found.items() if o < 0)
    if missing:
        raise KafkaException(
            KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"no {what} in the answer for {', '.join(missing)}")
        )


def fetch_partition_offsets(
    kafka_settings: Mapping[str, str],
    topics: Sequence[str],
    *,
    timeout_s: float = 10.0,
    deadline_s: float = 30.0,
    backoff_s: float = 1.0,
    attempts: int | None = None,
) -> list[PartitionOffsets]:
    """Log start and LSO of every partition of `topics`, partitions discovered now (new ones included).

    Transient errors are retried for deadline_s in total (at most `attempts` times when given),
    then KafkaUnavailableError."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    watched = watched_admin(kafka_settings, timeout_s)
    admin = watched.client

    def fetch(left_s: float) -> list[PartitionOffsets]:
        timeout_s_now = min(timeout_s, left_s)
        counts = discover_partitions(admin, topics, timeout_s_now)
        tps = [KafkaTopicPartition(t, p) for t in topics for p in range(counts[t])]
        starts = _list(
            admin, {tp: OffsetSpec.earliest() for tp in tps}, IsolationLevel.READ_COMMITTED, timeout_s_now
        )
        # With READ_COMMITTED, "latest" is the last stable offset, not the high watermark.
        stables = _list(
            admin, {tp: OffsetSpec.latest() for tp in tps}, IsolationLevel.READ_COMMITTED, timeout_s_now
        )
        _check_answered(starts, "log start")
        _check_answered(stables, "last stable offset")
        return [
            PartitionOffsets(topic=t, partition=p, log_start=starts[(t, p)], last_stable=stables[(t, p)])
            for t, p in sorted(starts)
        ]

    return with_retries(
        "reading partition offsets",
        bootstrap,
        fetch,
        deadline_s,
        backoff_s,
        attempts,
        refusal=watched.refusal,
    )


def offsets_for_time(
    kafka_settings: Mapping[str, str],
    topic: str,
    partitions: Sequence[int],
    timestamp_ms: int,
    *,
    timeout_s: float = 15.0,
    deadline_s: float = 30.0,
    backoff_s: float = 1.0,
) -> dict[int, int]:
    """First offset of each partition whose timestamp is >= timestamp_ms (the LSO when none is).
    Transient errors and partitions answered with no offset are retried for deadline_s, then
    KafkaUnavailableError, as in fetch_partition_offsets."""
    watched = watched_admin(kafka_settings, timeout_s)
    tps = [KafkaTopicPartition(topic, p) for p in partitions]

    def fetch(left_s: float) -> dict[int, int]:
        timeout_s_now = min(timeout_s, left_s)
        found = _list(
            watched.client,
            {tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in tps},
            IsolationLevel.READ_COMMITTED,
            timeout_s_now,
        )
        stables = _list(
            watched.client,
            {tp: OffsetSpec.latest() for tp in tps},
            IsolationLevel.READ_COMMITTED,
            timeout_s_now,
        )
        _check_answered(stables, "last stable offset")
        # Kafka answers -1 when no record is that recent: the range then ends at the stable end.
        # Below that (-1001) is no answer, not "none that recent".
        _check_answered({tp: o for tp, o in found.items() if o != -1}, f"offset of the time {timestamp_ms}")
        return {p: (found[(topic, p)] if found[(topic, p)] >= 0 else stables[(topic, p)]) for p in partitions}

    return with_retries(
        f"reading the offsets of {topic} at the time {timestamp_ms}",
        str(kafka_settings.get("bootstrap.servers", "?")),
        fetch,
        deadline_s,
        backoff_s,
        refusal=watched.refusal,
    )


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
    timeout_s: float = 10.0,
    deadline_s: float = 30.0,
    backoff_s: float = 1.0,
    attempts: int | None = None,
) -> KafkaIdentity:
    """The cluster id (describe_cluster) and each topic's id (describe_topics), retried for
    deadline_s in total, then KafkaUnavailableError."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    watched = watched_admin(kafka_settings, timeout_s)
    return with_retries(
        "reading the cluster and topic ids",
        bootstrap,
        lambda left_s: _describe(watched.client, topics, min(timeout_s, left_s), bootstrap),
        deadline_s,
        backoff_s,
        attempts,
        refusal=watched.refusal,
    )


def fetch_snapshot(
    kafka_settings: Mapping[str, str],
    topics: Sequence[str],
    *,
    timeout_s: float = 10.0,
    deadline_s: float = 30.0,
    backoff_s: float = 1.0,
    attempts: int = 4,
) -> KafkaSnapshot:
    """Offsets of every partition of `topics` and the identity they belong to.

    The identity is read before and after the offsets; if a topic was recreated in between the two
    disagree and the whole read is repeated (up to `attempts` times, then KafkaUnavailableError), so
    the offsets returned belong to the identity returned. Each read is bounded by deadline_s."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    bounds: dict[str, Any] = {"timeout_s": timeout_s, "deadline_s": deadline_s, "backoff_s": backoff_s}
    for _ in range(attempts):
        before = fetch_identity(kafka_settings, topics, **bounds)
        found = fetch_partition_offsets(kafka_settings, topics, **bounds)
        after = fetch_identity(kafka_settings, topics, **bounds)
        if before == after:
            return KafkaSnapshot(found, after)
    raise KafkaUnavailableError(
        f"Kafka at {bootstrap}: the ids of topic(s) {', '.join(topics)} changed while their offsets were read "
        f"({attempts} attempts); a topic is being deleted and recreated. Run again once it is stable."
    )
