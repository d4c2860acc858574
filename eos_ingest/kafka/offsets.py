"""Kafka-side facts the planner needs: partitions, log-start offsets and last stable offsets.

The last stable offset (LSO) is the read_committed end of a partition: below it every transaction
is decided. Planning to the LSO, never to "latest at read time", is what makes a range's content
fixed at plan time.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception

from eos_ingest.errors import KafkaAccessError, KafkaUnavailableError, TopicNotFoundError
from eos_ingest.kafka import clients as librdkafka_clients
from eos_ingest.plan.identity import KafkaIdentity
from eos_ingest.plan.ranges import PartitionOffsets
from eos_ingest.redact import redact_text

T = TypeVar("T")
# The least time an attempt is started with: no retry begins with less left before the deadline.
_LAST_TRY_S = 0.5
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
    # A broker restarted: its partitions' leader epochs catch up with the clients' in moments.
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
}


# librdkafka's FAIL log lines that mean "the broker refused these settings", not "no answer yet":
# (pattern, what to tell the user). A retry cannot fix them, so they end the retries at once.
_REFUSALS = (
    (
        re.compile(r"SASL authentication error: (?P<cause>[^(]*)"),
        "SASL authentication failed ({cause}); check sasl.username, sasl.password and sasl.mechanism",
    ),
    (
        # "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker ..."
        re.compile(r"SSL handshake failed: (?P<cause>.*?)(?:: broker certificate|, verify that| \(after|$)"),
        "the TLS handshake failed ({cause}); check that ssl.ca.location is the CA that signed the "
        "broker's certificate and that the address matches that certificate",
    ),
    (
        # A TLS listener closes the connection on a plaintext client's first request.
        re.compile(r"Disconnected: connection closed by peer.*in state APIVERSION_QUERY"),
        "the broker closed the connection on the first request, as a TLS listener does to a plaintext "
        "client; check security.protocol (SSL or SASL_SSL) and the port",
    ),
)
# A plaintext client's disconnects can also be a broker going down: only repeated ones count.
_PLAINTEXT_ON_TLS_REPEATS = 3


class _QuietLibrdkafkaLog:
    """librdkafka's own log lines (e.g. "%3|...|FAIL|rdkafka#..." per failed connect) go to Python
    logging at DEBUG, never raw to stderr: an unreachable broker is reported once, by our error.

    It also remembers the first line that shows the broker refused the settings (`refusal`), so the
    caller can stop retrying and say why in one line."""

    _log = logging.getLogger("eos_ingest.librdkafka")

    def __init__(self) -> None:
        self.refusal: str | None = None
        self._disconnects = 0

    def log(self, level: int, msg: str, *args: object) -> None:
        # A `debug: conf` dump or a SASL error may quote a setting: redacted like every echo.
        text = redact_text(msg % args if args else msg)
        self._log.debug("%s", text)
        if self.refusal is None and "FAIL" in text:
            self.refusal = self._refusal(text)

    def _refusal(self, text: str) -> str | None:
        for index, (pattern, told) in enumerate(_REFUSALS):
            found = pattern.search(text)
            if found is None:
                continue
            if index == len(_REFUSALS) - 1:
                self._disconnects += 1
                if self._disconnects < _PLAINTEXT_ON_TLS_REPEATS:
                    return None
            return told.format(cause=found.groupdict().get("cause", "").strip())
        return None


@dataclass
class _Admin:
    """An AdminClient and the log watcher that knows whether the broker refused its settings."""

    client: AdminClient
    watch: _QuietLibrdkafkaLog

    def refusal(self) -> str | None:
        self.client.poll(0)  # serves the queued log lines to the watcher
        return self.watch.refusal


def admin_client(kafka_settings: Mapping[str, str], timeout_s: float = 15.0) -> AdminClient:
    """An AdminClient whose requests give up after `timeout_s` instead of librdkafka's minutes."""
    return _watched_admin(kafka_settings, timeout_s).client


def _watched_admin(kafka_settings: Mapping[str, str], timeout_s: float) -> _Admin:
    watch = _QuietLibrdkafkaLog()
    conf: dict[str, Any] = {"socket.timeout.ms": int(timeout_s * 1000), **kafka_settings}
    conf.setdefault("logger", watch)
    return _Admin(librdkafka_clients.build(AdminClient, conf), watch)


def transient(exc: BaseException) -> bool:
    """A KafkaException whose KafkaError means "the cluster did not answer (yet)"."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() in _TRANSIENT


def with_retries(
    what: str,
    bootstrap: str,
    call: Callable[[float], T],
    deadline_s: float,
    backoff_s: float,
    max_attempts: int | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    refusal: Callable[[], str | None] | None = None,
) -> T:
    """call(seconds left) until it succeeds or raises a non-transient error (raised as it is).

    All within deadline_s in total (and at most max_attempts), so an unreachable broker fails in
    deadline_s, not a sum of timeouts. Back-off backoff_s, then twice that, ..., cut short so the
    next attempt still has half a second before the deadline; the retries stop when less than that
    is left, so every sleep is followed by an attempt and the last attempt by none. Then
    KafkaUnavailableError naming the broker and the cause.

    `refusal` (see _Admin.refusal) tells a broker that answered but refused the settings (wrong
    password, unknown CA, plaintext on a TLS port) from one that did not answer: its failures are
    not retried but raised at once as KafkaAccessError saying what to check.
    """
    end = time.monotonic() + deadline_s

    def attempt(left_s: float) -> T:
        try:
            return call(left_s)
        except KafkaException:
            refused = refusal() if refusal is not None else None
            if refused is not None:
                raise KafkaAccessError(
                    f"Kafka at {bootstrap} refused the connection while {what}: {refused}; "
                    "the batch is unchanged."
                ) from None
            raise

    def left() -> float:
        return end - time.monotonic()

    def backoff(state: RetryCallState) -> float:
        return max(0.0, min(backoff_s * 2 ** (state.attempt_number - 1), left() - _LAST_TRY_S))

    def stop(state: RetryCallState) -> bool:
        out_of_attempts = max_attempts is not None and state.attempt_number >= max_attempts
        return out_of_attempts or left() < _LAST_TRY_S

    retrying = Retrying(stop=stop, wait=backoff, retry=retry_if_exception(transient), sleep=sleep)
    try:
        return retrying(lambda: attempt(max(left(), _LAST_TRY_S)))
    except RetryError as exc:
        attempts = exc.last_attempt.attempt_number
        last = exc.last_attempt.exception()
    error = last.args[0] if last is not None and last.args else last
    reason = error.str() if isinstance(error, KafkaError) else last
    raise KafkaUnavailableError(
        f"Kafka at {bootstrap} did not answer while {what} ({attempts} attempt(s) in {deadline_s - left():.0f} s: "
        f"{reason}); the batch is unchanged. Check that the broker is up and reachable from here and "
        "that bootstrap.servers is right, then run again."
    )


def topic_problems(
    topics: Sequence[str], errors: Mapping[str, KafkaError | None]
) -> tuple[list[str], KafkaError | None]:
    """(missing topics, first other metadata error) from each listed topic's metadata error.

    Only a topic absent from the metadata or reported UNKNOWN_TOPIC_OR_PART is missing; any other
    error (LEADER_NOT_AVAILABLE for a topic just created or a broker restarting, ...) is not proof
    that the topic is gone, so the caller retries it."""
    missing = [t for t in topics if t not in errors or _code(errors[t]) == KafkaError.UNKNOWN_TOPIC_OR_PART]
    other = next((errors[t] for t in topics if t not in missing and errors[t] is not None), None)
    return missing, other


def _code(error: KafkaError | None) -> int | None:
    return None if error is None else error.code()


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
        if other.code() not in _TRANSIENT:
            # Retried like a transport error: the topic exists, its metadata is not usable yet.
            other = KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"topic metadata error: {other.str()}")
        raise KafkaException(other)
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
    timeout_s: float = 10.0,
    deadline_s: float = 30.0,
    backoff_s: float = 1.0,
    attempts: int | None = None,
) -> list[PartitionOffsets]:
    """Log start and LSO of every partition of `topics`, partitions discovered now (new ones included).

    Transient errors are retried for deadline_s in total (at most `attempts` times when given),
    then KafkaUnavailableError."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    watched = _watched_admin(kafka_settings, timeout_s)
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
    timeout_s: float = 10.0,
    deadline_s: float = 30.0,
    backoff_s: float = 1.0,
    attempts: int | None = None,
) -> KafkaIdentity:
    """The cluster id (describe_cluster) and each topic's id (describe_topics), retried for
    deadline_s in total, then KafkaUnavailableError."""
    bootstrap = str(kafka_settings.get("bootstrap.servers", "?"))
    watched = _watched_admin(kafka_settings, timeout_s)
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


# -- the oldest unread record: how old the lag is ---------------------------------------------------


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
    watch = _QuietLibrdkafkaLog()
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
                    if error.code() not in _TRANSIENT:
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
