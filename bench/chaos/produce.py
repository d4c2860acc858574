"""Transactional producers for a chaos run: committed and aborted transactions, and a second
producer that holds a transaction open across batch boundaries and commits it later."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Producer

SCHEMA = "id BIGINT, name STRING, amount DOUBLE, pad STRING"
PAD = "x" * 120  # with the other fields: about 200 bytes a record


@dataclass
class ProduceStats:
    committed: int = 0  # records in transactions whose commit returned
    aborted: int = 0  # records in transactions we aborted
    uncertain: int = 0  # records of transactions whose outcome the producer could not tell
    malformed: int = 0  # committed records that are not JSON (they go to quarantine)
    transactions: int = 0
    held_open: int = 0  # transactions kept open across at least one wait
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)

    def error(self, text: str) -> None:
        with self.lock:
            if len(self.errors) < 20:
                self.errors.append(text)

    def to_dict(self) -> dict[str, object]:
        return {
            "committed": self.committed,
            "aborted": self.aborted,
            "uncertain": self.uncertain,
            "malformed": self.malformed,
            "transactions": self.transactions,
            "held_open": self.held_open,
            "errors": self.errors,
        }


# Every transactional id a producer of this process took, the newest last: a cluster run's broker
# kills aim at the newest one's coordinator (bench/chaos/cluster.py).
TRANSACTIONAL_IDS: list[str] = []


def _producer(bootstrap: str) -> Producer:
    TRANSACTIONAL_IDS.append(f"chaos-{uuid.uuid4().hex}")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TRANSACTIONAL_IDS[-1],
            "transaction.timeout.ms": 60_000,  # a lost producer's transaction ends within a minute
            "linger.ms": 20,
            # New partitions of the topic are seen within a few seconds.
            "topic.metadata.refresh.interval.ms": 2000,
            "message.timeout.ms": 55_000,
            "log_level": 2,  # broker restarts are expected: no connection-refused lines
        }
    )
    producer.init_transactions(120)
    return producer


def _value(n: int, rng: random.Random, malformed_rate: float) -> tuple[bytes, bool]:
    if rng.random() < malformed_rate:
        return f"not json {n}".encode(), True
    record = {"id": n, "name": f"user-{n % 997}", "amount": round(rng.random() * 1000, 2), "pad": PAD}
    return json.dumps(record).encode(), False


class TxWriter:
    """Writes whole transactions with one transactional producer, surviving broker restarts: an
    abortable error aborts the transaction, a fatal one makes a new producer."""

    def __init__(self, bootstrap: str, topic: str, stats: ProduceStats, rng: random.Random) -> None:
        self.bootstrap, self.topic, self.stats, self.rng = bootstrap, topic, stats, rng
        self.producer: Producer | None = None
        self.next_id = 0

    def _ensure(self, stop: threading.Event) -> Producer:
        while self.producer is None:
            try:
                self.producer = _producer(self.bootstrap)
            except KafkaException as exc:
                self.stats.error(f"init_transactions: {exc}")
                if stop.wait(2):
                    raise
        return self.producer

    def run_transaction(
        self,
        size: int,
        *,
        commit: bool,
        stop: threading.Event,
        hold_s: float = 0.0,
        malformed_rate: float = 0.0,
    ) -> None:
        """One transaction of `size` records: committed, aborted, or held open `hold_s` first."""
        producer = self._ensure(stop)
        malformed = 0
        try:
            producer.begin_transaction()
            for _ in range(size):
                value, bad = _value(self.next_id, self.rng, malformed_rate)
                malformed += bad
                self.next_id += 1
                while True:
                    try:
                        producer.produce(self.topic, value, key=str(self.next_id).encode())
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
            if hold_s > 0:
                producer.flush(60)
                self.stats.add(held_open=1)
                stop.wait(hold_s)
            if commit:
                self._finish(producer.commit_transaction)
                self.stats.add(committed=size, malformed=malformed, transactions=1)
            else:
                producer.flush(60)
                self._finish(producer.abort_transaction)
                self.stats.add(aborted=size, transactions=1)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.txn_requires_abort():
                try:
                    producer.abort_transaction(120)
                    self.stats.add(aborted=size, transactions=1)
                    return
                except KafkaException as abort_exc:
                    self.stats.error(f"abort after {error}: {abort_exc}")
            self.stats.error(f"transaction: {error}")
            self.stats.add(uncertain=size)
            self.producer = None  # fatal or unknown state: start over with a new producer

    def _finish(self, call) -> None:  # type: ignore[no-untyped-def]
        # Retriable errors (a broker restart) are retried; the call is idempotent per transaction.
        deadline = time.monotonic() + 180
        while True:
            try:
                call(60)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.retriable() and time.monotonic() < deadline:
                    time.sleep(0.5)
                    continue
                raise

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(30)
