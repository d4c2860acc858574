"""Demo data: transactional writes to ``demo_events``, with aborted transactions and bad records.

    python -m eos_ingest.demo_stream [--bootstrap 127.0.0.1:9092] [--topic demo_events]

Creates the topic (3 partitions) when it is missing, then appends, in this order: committed
transactions of valid events, an aborted transaction (its records reach the broker and must never
reach the table), and a committed transaction of malformed values (not JSON, wrong types) that
must land in the quarantine table. Each run appends new events with new ids, so a second demo
has new data to ingest. Prints a JSON summary of what it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ACTIONS = ("view", "click", "add_to_cart", "purchase", "refund")
# Values the demo schema (event_id BIGINT, user_id STRING, action STRING, amount DOUBLE,
# event_time TIMESTAMP) must refuse: each goes to the quarantine table with its reason.
MALFORMED: tuple[bytes, ...] = (
    b"not json at all",
    b'{"event_id": "seven", "user_id": "u1", "action": "view", "amount": 1.0}',
    b'{"event_id": 1, "user_id": "u1", "action": "view", "amount": "a lot"}',
    b"[1, 2, 3]",
    b'{"event_id": 2, "user_id": "u2", "action": "click", "amount": 3.5, "event_time": "yesterday-ish"}',
)


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> bool:
    """Create `topic` if it does not exist; True when this call created it."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000)})
    if topic in admin.list_topics(timeout=timeout_s).topics:
        return False
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another producer won the race
            raise
        return False
    deadline = time.monotonic() + timeout_s
    while topic not in admin.list_topics(timeout=timeout_s).topics:  # metadata follows the create
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} was created but is not in the metadata after {timeout_s}s")
        time.sleep(0.2)
    return True


def make_event(event_id: int, rng: random.Random) -> dict[str, Any]:
    """One valid demo event."""
    return {
        "event_id": event_id,
        "user_id": f"user-{rng.randint(1, 50):02d}",
        "action": rng.choice(ACTIONS),
        "amount": round(rng.uniform(1, 200), 2),
        "event_time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def produce(
    bootstrap: str,
    topic: str,
    *,
    transactions: int = 4,
    per_transaction: int = 250,
    aborted: int = 1,
    seed: int | None = None,
) -> dict[str, Any]:
    """Write the demo's transactions; returns counts by kind."""
    rng = random.Random(seed)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"eos-demo-{uuid.uuid4().hex}",
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    # Ids never repeat across runs: microseconds since the epoch, then a counter.
    next_id = time.time_ns() // 1000
    counts = {"committed_events": 0, "aborted_events": 0, "malformed_records": 0}

    def send(values: Sequence[bytes | dict[str, Any]]) -> None:
        for value in values:
            payload = json.dumps(value).encode() if isinstance(value, dict) else value
            key = value["user_id"].encode() if isinstance(value, dict) else None
            producer.produce(topic, payload, key=key)
            producer.poll(0)

    for i in range(transactions):
        events = [make_event(next_id + n, rng) for n in range(per_transaction)]
        next_id += per_transaction
        producer.begin_transaction()
        send(events)
        if i < aborted:
            # Flush first: librdkafka drops unsent records on abort, and the demo wants aborted
            # records on the broker, where read_committed readers must skip them.
            producer.flush(30)
            producer.abort_transaction(30)
            counts["aborted_events"] += len(events)
        else:
            producer.commit_transaction(30)
            counts["committed_events"] += len(events)
    producer.begin_transaction()
    send(MALFORMED)
    producer.commit_transaction(30)
    counts["malformed_records"] = len(MALFORMED)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: ensure the topic, produce, print a JSON summary."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default=os.environ.get("EOS_KAFKA_BOOTSTRAP") or "127.0.0.1:9092")
    parser.add_argument("--topic", default="demo_events")
    parser.add_argument("--partitions", type=int, default=3, help="when the topic is created")
    parser.add_argument("--transactions", type=int, default=4, help="transactions of valid events")
    parser.add_argument("--per-transaction", type=int, default=250)
    parser.add_argument("--aborted", type=int, default=1, help="how many of them are aborted")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    if not 0 <= args.aborted <= args.transactions:
        parser.error("--aborted must be between 0 and --transactions")
    created = ensure_topic(args.bootstrap, args.topic, args.partitions)
    counts = produce(
        args.bootstrap,
        args.topic,
        transactions=args.transactions,
        per_transaction=args.per_transaction,
        aborted=args.aborted,
        seed=args.seed,
    )
    print(json.dumps({"topic": args.topic, "bootstrap": args.bootstrap, "topic_created": created, **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
