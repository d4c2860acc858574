"""The "Iceberg's Kafka Connect sink" section of bench/README.md, from the latest lines of
results/iceberg_connect.jsonl (python -m bench.iceberg_connect)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results" / "iceberg_connect.jsonl"

HEAD = """### The peer on Iceberg: Iceberg's Kafka Connect sink (issue 34, item 4, the peer's side)

`python -m bench.iceberg_connect --records N --kills K` starts its own broker on free ports,
produces the bench's workload (bench/workload.py: ~200 B JSON values, 6 partitions, transactions
of up to 5,000 records, every 20th aborted), reads Kafka's read_committed view of it (every
partition/offset), then runs Apache Iceberg's own sink (`iceberg-kafka-connect` 1.12.0 in a
standalone Kafka Connect 4.3 worker, jars from `jvm/iceberg-connect/pom.xml`, fetched by
`bench/iceberg_connect/jars.sh` on first use) twice, each into a fresh table: once clean, once
SIGKILLing the worker's JVM `K` times (each at a random moment 30-90% of the clean run's time after
its (re)start, while the table is incomplete) and restarting it at once. The sink: Iceberg's JDBC
catalog on SQLite, a local warehouse, `iceberg.tables.auto-create-enabled`, commit interval 1 s,
JsonConverter without schemas, `KafkaMetadataTransform` for the partition and offset columns,
`isolation.level=read_committed`, `session.timeout.ms=10000`, `tasks.max=1`. `seconds` is the
commit time of the first snapshot holding every committed record less the worker's start (JVM
start-up included); the table is read without a JVM (catalog row, metadata JSON, Avro manifests,
Parquet) and compared with the read_committed view, again 5 s after that. eos-ingest on Iceberg is
not in this table yet: it is being built.
"""


def _latest(count: int = 2) -> list[dict[str, Any]]:
    if not RESULTS.exists():
        return []
    lines = [line for line in RESULTS.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines[-count:]]


def _row(doc: dict[str, Any], run: dict[str, Any]) -> str:
    final = run["final"]
    kills = len(run["kills"])
    secs = "-" if run["seconds"] is None else f"{run['seconds']:.1f}"
    rate = "-" if run["records_per_s"] is None else f"{run['records_per_s']:,}"
    return (
        f"| {doc['records_committed']:,} | {run['kind']} | {kills} | {secs} | {rate} | {final['rows']:,} | "
        f"{final['duplicates']:,} | {final['missing']:,} | {final['unexpected']:,} | {run['snapshots']} |"
    )


def render() -> str:
    docs = _latest()
    if not docs:
        return HEAD + "\nNo run yet.\n"
    lines = [
        HEAD,
        "| committed records | run | SIGKILLs | seconds | records/s | rows | duplicates | missing | unexpected | snapshots |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for doc in docs:
        lines += [_row(doc, run) for run in doc["runs"]]
    lines += [""]
    for doc in docs:
        lines += [
            f"- {doc['at']}, commit {doc['commit']}, {doc['cpus']} cores, load average {doc['load_1m_after']} "
            f"after; Connect {doc['versions']['kafka_connect']}, Iceberg {doc['versions']['iceberg']}. {doc['note']}"
        ]
    return "\n".join([*lines, ""])
