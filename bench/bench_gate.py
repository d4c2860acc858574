"""Benchmark of the quality gate alone, on one planned batch of a real topic (docs/quality.md, "Cost").

    python bench/bench_gate.py --bootstrap 127.0.0.1:9092 --records 1000000 --runs 3

Produces the topic (transactions of 5,000 records, every 20th aborted) unless --topic names one,
plans one batch of all of it, then --runs times: reads + parses + persists it as the Spark job does
and runs quality.gate on it, with the recount started before the read (quality.start_recount) when
the code has it. The first run is what a job pays (one batch per process, GX not imported yet);
run the script 3 times with --runs 1 for medians of that. Prints each run and a summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eos_ingest.cli import open_store, plan_batch  # noqa: E402
from eos_ingest.config.pipeline import load_pipeline  # noqa: E402
from eos_ingest.formats import parser  # noqa: E402
from eos_ingest.quality import gate as quality  # noqa: E402
from eos_ingest.spark.kafka_source import read_ranges  # noqa: E402
from eos_ingest.spark.session import build_session  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> int:
    """Transactions of 5,000 records; every 20th is aborted. Returns the committed records."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", "linger.ms": 20}
    )
    producer.init_transactions(30)
    committed = 0
    for n, first in enumerate(range(0, records, 5_000)):
        producer.begin_transaction()
        last = min(first + 5_000, records)
        for i in range(first, last):
            value = json.dumps(
                {"id": i, "name": f"user-{i % 1000}", "amount": i * 0.01, "ts": "2026-11-22T12:00:00Z"}
            )
            producer.produce(topic, value.encode(), partition=i % partitions)
            if i % 1000 == 0:
                producer.poll(0)
        if n % 20 == 19:
            producer.flush(60)  # on the broker, then aborted: offsets with gaps
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += last - first
    return committed


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--bootstrap", default="127.0.0.1:9092")
    args.add_argument("--records", type=int, default=1_000_000)
    args.add_argument("--partitions", type=int, default=6)
    args.add_argument("--runs", type=int, default=3)
    args.add_argument("--topic", default=None, help="an existing topic: produce nothing")
    args.add_argument("--sequential", action="store_true", help="recount inside the gate, after the read")
    opts = args.parse_args()
    topic = opts.topic or f"bench-gate-{uuid.uuid4().hex[:8]}"
    if opts.topic is None:
        started = time.monotonic()
        committed = produce(opts.bootstrap, topic, opts.records, opts.partitions)
        print(f"produced {committed} committed records to {topic} in {time.monotonic() - started:.1f} s")
    work = Path(tempfile.mkdtemp(prefix="bench-gate-"))
    doc = {
        "name": "bench_gate",
        "topics": [topic],
        "kafka": {"bootstrap.servers": opts.bootstrap},
        "start_from": "earliest",
        "max_records_per_partition": 10_000_000,
        "value": {"format": "json", "schema": "id BIGINT, name STRING, amount DOUBLE, ts STRING"},
        "output": {"path": str(work / "table")},
        "control_db_url": f"sqlite:///{work / 'control.db'}",
        "schedule": None,
    }
    (work / "bench_gate.yaml").write_text(yaml.safe_dump(doc))
    config = load_pipeline(work / "bench_gate.yaml")
    batch, _ = plan_batch(config, open_store(config))
    assert batch is not None
    spark = build_session("bench-gate", master="local[2]")
    spark.sparkContext.setLogLevel("WARN")
    from pyspark import StorageLevel

    # No GX warm-up here: the first run pays what a job (one batch per process) pays.
    concurrent = hasattr(quality, "start_recount") and not opts.sequential
    runs = []
    for _ in range(opts.runs):
        # As the job does: the recount starts before the Spark read when the hook exists.
        recount = quality.start_recount(config, batch) if concurrent else None
        started = time.monotonic()
        kafka_rows = read_ranges(spark, config.kafka_settings, batch.ranges)
        parsed = parser.parse(kafka_rows, config, batch.batch_id).persist(StorageLevel.MEMORY_AND_DISK)
        good, bad = parser.count_split(parsed)
        read = time.monotonic() - started
        started = time.monotonic()
        if recount is not None:  # how long the gate waits for the recount, apart from GX
            recount.result()
        wait = time.monotonic() - started
        kwargs = {"recount": recount} if concurrent else {}
        report = quality.gate(spark, config, batch, parser.output_rows(parsed, config), bad, **kwargs)
        gate = time.monotonic() - started  # includes the wait for the recount
        assert report["success"], report
        assert report["statistics"]["read_committed_records"] == good + bad
        parsed.unpersist(blocking=True)
        runs.append(
            {"read_parse_count": round(read, 2), "gate": round(gate, 2), "recount_wait": round(wait, 2)}
        )
        print(json.dumps(runs[-1]), flush=True)
    started = time.monotonic()
    quality.committed_record_count(config, batch)
    recount_alone = time.monotonic() - started
    gates = [r["gate"] for r in runs]
    totals = [r["read_parse_count"] + r["gate"] for r in runs]
    print(
        json.dumps(
            {
                "records": good + bad,
                "concurrent_recount": concurrent,
                "gate_median": statistics.median(gates),
                "read_parse_count_median": statistics.median(r["read_parse_count"] for r in runs),
                "gate_share_of_read_plus_gate": round(
                    statistics.median(gates) / statistics.median(totals), 3
                ),
                "recount_alone": round(recount_alone, 2),
                "runs": runs,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
