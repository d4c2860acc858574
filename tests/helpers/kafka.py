"""Producing and consuming test data with plain confluent-kafka clients (no project code)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType


class TxProducer:
    """A transactional producer that writes whole transactions, committed or aborted."""

    def __init__(self, bootstrap: str, transaction_timeout_ms: int = 60_000) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"test-{uuid.uuid4().hex}",
                "transaction.timeout.ms": transaction_timeout_ms,
                "linger.ms": 5,
            }
        )
        self.producer.init_transactions(30)
        self.bootstrap = bootstrap
        self.sent: dict[tuple[str, int], int] = {}  # the transaction's last offset per partition

    def begin(self) -> None:
        self.sent = {}
        self.producer.begin_transaction()

    def _delivered(self, err, msg) -> None:
        if err is None:
            key = (msg.topic(), msg.partition())
            self.sent[key] = max(self.sent.get(key, -1), msg.offset())

    def send(
        self,
        topic: str,
        values: Iterable[bytes | str | dict],
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Send `values` (a dict as JSON) to `partition`, or the partitioner's; with `timestamp_ms`
        each record carries that CreateTime instead of now (its event_date with it)."""
        where: dict = {} if partition is None else {"partition": partition}
        if timestamp_ms is not None:
            where["timestamp"] = timestamp_ms
        for value in values:
            payload = json.dumps(value).encode() if isinstance(value, dict) else value
            self.producer.produce(topic, payload, on_delivery=self._delivered, **where)
            self.producer.poll(0)

    def commit(self) -> None:
        """Commit, then wait (at most 5 s) until a read_committed reader sees the records: the
        coordinator writes the commit markers after commit_transaction returns, so a plan made at
        once could end a partition before them (its last stable offset not moved yet). An open
        transaction of another producer holds the LSO back for longer; then this returns anyway."""
        self.producer.commit_transaction(30)
        waiting = dict(self.sent)
        if not waiting:
            return
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
        )
        try:
            deadline = time.monotonic() + 5
            while waiting and time.monotonic() < deadline:
                for (topic, partition), last in list(waiting.items()):
                    if consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)[1] > last:
                        del waiting[(topic, partition)]
                if waiting:
                    time.sleep(0.05)
        finally:
            consumer.close()

    def abort(self) -> None:
        # Flush first: librdkafka purges unsent messages on abort, and a test of aborted
        # transactions needs the aborted records to be on the broker.
        self.producer.flush(30)
        self.producer.abort_transaction(30)

    def transaction(
        self, topic: str, values: Iterable[bytes | str | dict], *, commit: bool, partition: int | None = None
    ) -> None:
        self.begin()
        self.send(topic, values, partition)
        if commit:
            self.commit()
        else:
            self.abort()


def read_committed(
    bootstrap: str, topic: str, partitions: int, ends: dict[int, int] | None = None
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every committed record from offset 0 to each end (default: the LSO)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-reader-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        if ends is None:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)
            }
        todo = {p for p in range(partitions) if ends.get(p, 0) > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in todo])
        out: list[tuple[int, int, bytes]] = []
        while todo:
            msg = consumer.poll(10)
            if msg is None:
                raise TimeoutError(
                    f"no record within 10 s while reading {topic}; partitions left: {sorted(todo)}"
                )
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    todo.discard(msg.partition())
                    continue
                raise RuntimeError(msg.error())
            if msg.offset() < ends[msg.partition()]:
                out.append((msg.partition(), msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                todo.discard(msg.partition())
        return sorted(out)
    finally:
        consumer.close()


def stable_end(bootstrap: str, topic: str, partition: int, timeout_s: float = 30.0) -> int:
    """The partition's last stable offset once every transaction written to it is resolved: its
    read_committed high watermark caught up with the log's end. A producer's commit_transaction
    returns before the coordinator has written the commit markers, so the LSO read right after it
    may still stop before that transaction (seen in a test that then expected its records)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stable = watermarks(bootstrap, topic, partition, "read_committed")[1]
        if stable == watermarks(bootstrap, topic, partition, "read_uncommitted")[1]:
            return stable
        assert time.monotonic() < deadline, (
            f"{topic}[{partition}]: transactions still open after {timeout_s}s"
        )
        time.sleep(0.1)


def watermarks(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple[int, int]:
    """(low, high) watermark of one partition as seen with the given isolation level."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


@contextmanager
def cleaner_backoff(admin: AdminClient, ms: int) -> Iterator[None]:
    """The brokers' log cleaner looks for work every `ms` instead of its default 15 s, while inside:
    a test that waits for a compaction then waits for the compaction, not for the cleaner's sleep.
    A dynamic setting of each broker (log.cleaner.backoff.ms), removed on exit."""
    brokers = sorted(admin.list_topics(timeout=30).brokers)

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry("log.cleaner.backoff.ms", value, incremental_operation=op)
        resources = [
            ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[entry]) for b in brokers
        ]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)

    alter(AlterConfigOpType.SET, str(ms))
    try:
        yield
    finally:
        alter(AlterConfigOpType.DELETE, None)
