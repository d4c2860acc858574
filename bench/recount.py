"""The gate's independent count, old and new, on the benchmark's workload: CPU and wall seconds.

    python -m bench.recount --bootstrap 127.0.0.1:9092 [--topic T | --records 1000000]

Without --topic it produces the workload first (bench/workload.py: 6 partitions, transactions of
5,000 records, 5% aborted). Then it counts the whole topic, read_committed, (1) record by record
with librdkafka (count_by_records, the count before) and (2) from the record-batch headers
(kafka/header_counts.py), each in this process, and prints JSON: records, CPU seconds
(time.process_time, every thread of the process) and wall seconds of each. Both must agree.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from bench.workload import produce
from eos_ingest.kafka.committed_counts import count_by_records
from eos_ingest.kafka.header_counts import count_from_headers
from eos_ingest.kafka.python_settings import kafka_python_config


def committed_ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions
        }
    finally:
        consumer.close()


def timed(count: Callable[[], dict[tuple[str, int], int]]) -> dict[str, float]:
    cpu, wall = time.process_time(), time.monotonic()
    records = sum(count().values())
    return {"records": records, "cpu_s": time.process_time() - cpu, "wall_s": time.monotonic() - wall}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic")
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    topic = args.topic
    produced = None
    if topic is None:
        topic = f"bench-recount-{uuid.uuid4().hex[:8]}"
        workload = produce(args.bootstrap, topic, args.records)
        produced = {
            "records_produced": workload.records_produced,
            "records_committed": workload.records_committed,
        }
    settings = {"bootstrap.servers": args.bootstrap}
    spans = {(topic, p): [(0, end)] for p, end in committed_ends(args.bootstrap, topic).items()}
    old = timed(lambda: count_by_records(settings, spans, 30.0))
    new = timed(lambda: count_from_headers(kafka_python_config(settings), spans, 30.0))
    if old["records"] != new["records"]:
        raise SystemExit(
            f"the counts disagree: {old['records']} record by record, {new['records']} from headers"
        )
    print(
        json.dumps(
            {"topic": topic, **(produced or {}), "record_by_record": old, "from_headers": new}, indent=2
        )
    )


if __name__ == "__main__":
    main()
