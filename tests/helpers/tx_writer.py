"""A transactional producer that keeps writing in a thread while a test breaks the cluster under it,
as an application's producer would: committed transactions and, every third one, an aborted one.

It rides out a broker's death the way librdkafka's transactional API asks: a retriable error of
commit_transaction is retried, an abortable one aborts, a fatal one (a fenced or broken producer)
makes a new producer of the same transactional id, whose init_transactions aborts whatever the old
one left open. So no transaction of this writer stays open after stop(), and the topic's last
stable offset is free for the test's last plan."""

from __future__ import annotations

import json
import threading
import time
import uuid

from confluent_kafka import KafkaException, Producer

RECORDS_PER_TRANSACTION = 150


class TransactionsInBackground:
    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.transactional_id = f"failover-{uuid.uuid4().hex}"
        self.committed = self.aborted = self.errors = 0
        self._stop = threading.Event()
        self._next_id = 0
        self.producer = self._new_producer()
        self.thread = threading.Thread(target=self._write, name="eos-test-tx-writer", daemon=True)

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": 20_000,
                "linger.ms": 5,
                "log_level": 2,  # nodes die on purpose: no connection-refused lines
            }
        )
        producer.init_transactions(60)
        return producer

    def start(self) -> TransactionsInBackground:
        self.thread.start()
        return self

    def wait_for(self, transactions: int, timeout_s: float = 60) -> None:
        """Until this writer has committed `transactions` transactions in all."""
        deadline = time.monotonic() + timeout_s
        while self.committed < transactions:
            assert self.thread.is_alive(), "the transactional writer died"
            assert time.monotonic() < deadline, f"{self.committed} transactions committed in {timeout_s} s"
            time.sleep(0.1)

    def stop(self, timeout_s: float = 120) -> None:
        self._stop.set()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the transactional writer did not end its transaction"

    def _write(self) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            try:
                self._one_transaction(commit=number % 3 != 0)
            except KafkaException as exc:
                self.errors += 1
                self._recover(exc)

    def _one_transaction(self, commit: bool) -> None:
        self.producer.begin_transaction()
        for _ in range(RECORDS_PER_TRANSACTION):
            self._next_id += 1
            value = {"id": self._next_id, "name": "failover", "amount": float(self._next_id % 100)}
            self.producer.produce(
                self.topic, json.dumps(value).encode(), partition=self._next_id % self.partitions
            )
        if not commit:
            self.producer.flush(60)  # on the broker, so the batch reads around aborted records
            self.producer.abort_transaction(60)
            self.aborted += 1
            return
        while True:
            try:
                self.producer.commit_transaction(60)
                self.committed += 1
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                time.sleep(0.2)  # a timed-out commit may have landed: commit again, never abort

    def _recover(self, exc: KafkaException) -> None:
        error = exc.args[0]
        if error.txn_requires_abort():
            try:
                self.producer.abort_transaction(60)
                return
            except KafkaException:
                pass
        time.sleep(0.5)
        self.producer = self._new_producer()  # fences the old one and aborts what it left open
