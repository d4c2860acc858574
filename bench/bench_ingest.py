"""Benchmark: end-to-end `eos-ingest run` (plan + spark-submit + commit) and the replace of a rerun.

    make bench                       # against the broker of `make stack-up`
    python bench/bench_ingest.py --records 200000 --partitions 6 --runs 3

Each run ingests the same topic into a fresh table and control DB, so runs are comparable; the
figures are medians. Results are appended to bench/results/ingest.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
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

from eos_ingest.config import load_pipeline  # noqa: E402
from eos_ingest.control_store import ControlStore  # noqa: E402
from eos_ingest.submit import spark_submit_argv, spark_submit_env  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the future resolves
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", "linger.ms": 20}
    )
    producer.init_transactions(30)
    started = time.monotonic()
    per_tx = 10_000
    for first in range(0, records, per_tx):
        producer.begin_transaction()
        for i in range(first, min(first + per_tx, records)):
            value = json.dumps(
                {"id": i, "name": f"user-{i % 1000}", "amount": i * 0.01, "ts": "2026-11-22T12:00:00Z"}
            )
            producer.produce(topic, value.encode(), partition=i % partitions)
            if i % 1000 == 0:
                producer.poll(0)
        producer.commit_transaction(60)
    return time.monotonic() - started


def run_cli(*args: str) -> tuple[float, dict]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "eos_ingest.cli", *args], capture_output=True, text=True, check=False
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"eos-ingest {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    return elapsed, json.loads(done.stdout)


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default=os.environ.get("EOS_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    topic = f"bench_{uuid.uuid4().hex[:8]}"
    produce_s = produce(args.bootstrap, topic, args.records, args.partitions)
    runs = []
    with tempfile.TemporaryDirectory(prefix="eos-bench-") as tmp:
        for n in range(args.runs):
            home = Path(tmp) / f"run{n}"
            home.mkdir()
            config_path = home / "bench.yaml"
            config_path.write_text(
                yaml.safe_dump(
                    {
                        "name": "bench",
                        "topics": [topic],
                        "kafka": {"bootstrap.servers": args.bootstrap},
                        "max_records_per_partition": args.records,
                        "value": {
                            "format": "json",
                            "schema": "id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP",
                        },
                        "output": {"path": str(home / "table")},
                        "control_db_url": f"sqlite:///{home}/control.db",
                        "schedule": None,
                    }
                )
            )
            seconds, batch = run_cli("run", "--config", str(config_path), "--master", "local[2]")
            # A rerun of the same ranges (what a retry or a backfill does): replace, not append.
            config = load_pipeline(config_path)
            store = ControlStore(config.control_db_url)
            ranges = store.get_batch(batch["batch_id"]).ranges
            backfill = store.create_backfill("bench", ranges, reason="bench rerun")
            rerun_started = time.monotonic()
            code = subprocess.run(
                spark_submit_argv(config_path, backfill.batch_id, master="local[2]"),
                env=spark_submit_env(),
                capture_output=True,
                check=False,
            ).returncode
            rerun_s = time.monotonic() - rerun_started
            if code != 0:
                raise SystemExit(f"rerun of batch {backfill.batch_id} failed with {code}")
            runs.append(
                {
                    "seconds": round(seconds, 2),
                    "records_per_s": round(batch["records_read"] / seconds),
                    "rerun_seconds": round(rerun_s, 2),
                    "table_mb": round(folder_mb(home / "table"), 2),
                }
            )
            print(json.dumps(runs[-1]), flush=True)
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "records": args.records,
        "partitions": args.partitions,
        "produce_seconds": round(produce_s, 2),
        "median_seconds": statistics.median(r["seconds"] for r in runs),
        "median_records_per_s": statistics.median(r["records_per_s"] for r in runs),
        "median_rerun_seconds": statistics.median(r["rerun_seconds"] for r in runs),
        "table_mb": runs[-1]["table_mb"],
        "runs": runs,
    }
    print(json.dumps(result, indent=2))
    with (REPO / "bench" / "results" / "ingest.jsonl").open("a") as out:
        out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
