"""The benchmark's workload and its raw consumer (system (a)).

    python -m bench.workload consume --bootstrap 127.0.0.1:9092 --topic T   # (a): count, print JSON

`produce` writes JSON values of about 200 bytes round-robin over the partitions, from one
transactional producer, in transactions of `per_tx` records; every 20th transaction (5%) is aborted.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SCHEMA = "id BIGINT, name STRING, country STRING, amount DOUBLE, ts TIMESTAMP, status STRING, note STRING"
ABORT_EVERY = 20  # 1 transaction in 20: 5% aborted
COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "NG", "AU")
STATUSES = ("placed", "paid", "shipped", "delivered", "returned")


def value(i: int) -> bytes:
    """One record's JSON value, about 200 bytes."""
    return json.dumps(
        {
            "id": i,
            "name": f"customer-{i % 100_000:06d}",
            "country": COUNTRIES[i % len(COUNTRIES)],
            "amount": round((i % 100_000) * 0.37, 2),
            "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}Z",
            "status": STATUSES[i % len(STATUSES)],
            "note": f"order {i:010d} for the benchmark, padded to about two hundred bytes",
        },
        separators=(",", ":"),
    ).encode()


@dataclass(frozen=True)
class Workload:
    topic: str
    partitions: int
    records_produced: int
    records_committed: int
    value_bytes: int  # of the committed records
    transactions: int
    aborted_transactions: int
    seconds: float


def produce(bootstrap: str, topic: str, records: int, partitions: int = 6, per_tx: int = 5000) -> Workload:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex}",
            "linger.ms": 20,
            "compression.type": "none",
        }
    )
    producer.init_transactions(60)
    started = time.monotonic()
    committed = value_bytes = transactions = aborted = 0
    for first in range(0, records, per_tx):
        transactions += 1
        abort = transactions % ABORT_EVERY == 0
        producer.begin_transaction()
        size = 0
        for i in range(first, min(first + per_tx, records)):
            payload = value(i)
            size += len(payload)
            while True:
                try:
                    producer.produce(topic, payload, key=str(i).encode(), partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.1)
            if i % 1000 == 0:
                producer.poll(0)
        if abort:
            # Flush first: librdkafka purges unsent messages on abort, and the aborted records must
            # be on the broker for the readers to skip.
            producer.flush(60)
            producer.abort_transaction(60)
            aborted += 1
        else:
            producer.commit_transaction(60)
            committed += min(first + per_tx, records) - first
            value_bytes += size
    return Workload(
        topic, partitions, records, committed, value_bytes, transactions, aborted, time.monotonic() - started
    )


def consume(bootstrap: str, topic: str) -> dict[str, int]:
    """(a): read the whole topic read_committed from its start; count records and value bytes."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    at_end: set[int] = set()
    records = value_bytes = 0
    while len(at_end) < len(partitions):
        for message in consumer.consume(10_000, timeout=1.0):
            error = message.error()
            if error is None:
                records += 1
                value_bytes += len(message.value() or b"")
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(int(message.partition() or 0))
            else:
                raise RuntimeError(f"consume {topic}: {error}")
    consumer.close()
    return {"records": records, "value_bytes": value_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("consume",))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    args = parser.parse_args()
    print(json.dumps(consume(args.bootstrap, args.topic)), flush=True)


if __name__ == "__main__":
    main()
