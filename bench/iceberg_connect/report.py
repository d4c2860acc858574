"""The "Iceberg's Kafka Connect sink" section of bench/README.md, from the latest lines of
results/iceberg_connect.jsonl (python -m bench.iceberg_connect)."""

from __future__ import annotations

import json
import statistics
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
Parquet) and compared with the read_committed view, again 5 s after that. The clean comparison
of issue 52 is `make bench`'s (i) and (j) above (`make bench BENCH_ARGS="--systems ij"`): the same
sink and reader, on the bench's topic, with the sink's worker started before the clock; this tool
remains the one for the runs with SIGKILLs.

`--sides connect,eos` (the default) runs eos-ingest on the same topic the same two ways
(bench/iceberg_connect/eos_side.py): `eos-ingest run --until-caught-up --master local[2]` on an
`output.format: iceberg` pipeline (the JDBC catalog on its SQLite control DB, a local warehouse,
one batch of everything), and a run whose process group is SIGKILLed `K` times in the same kind of
window and started again at once (the next process takes the planned batch over with a new fence,
as an Airflow retry does). Its `seconds` is the commit time of the snapshot that made the table
complete less the first process's start; the same JVM-free reader checks its table.

What running the sink took, seen here:

- Connect 4.3, not the broker's 4.4: the sink 1.12.0 calls `org.apache.kafka.common.utils.AppInfoParser`,
  which Kafka 4.4 moved to `utils.internals`; on a 4.4 worker the task dies at start
  (NoClassDefFoundError). A 4.3 worker works against the 4.4 broker.
- `plugin.discovery=service_load`: the default reflective scan of the 100 jars took 21 s at every
  start on this machine (every jar has its ServiceLoader manifest).
- `tasks.max=1`: with 2 tasks on a fresh JDBC catalog both tasks auto-create the namespace (or,
  with `jdbc.schema-version=V1`, upgrade the catalog's schema) at once; one fails (`INSERT INTO
  iceberg_namespace_properties`, or SQLite's `duplicate column name: iceberg_type`) and that task is
  dead until restarted by hand. 20k smoke runs: the namespace race hit both runs (clean and chaos)
  and 1,000 of 19,000 records were still missing after 900 s; the schema race hit 1 of 2 runs, and
  that table still completed (the other task took the partitions).
- After a SIGKILL the new worker waits for the dead consumer's session to expire (10 s here, 45 s
  by default) before it gets its partitions back, and its first commit round can time out
  (`iceberg.control.commit.timeout-ms`, 30 s) and commit nothing: in the 1M chaos run the last
  restart reached a complete table 67 s after the last kill, 30 s of it in such a round.
"""


def _latest(count: int = 3) -> list[dict[str, Any]]:
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
        f"| {run.get('side', 'connect')} | {doc['records_committed']:,} | {run['kind']} | {kills} | {secs} | {rate} | {final['rows']:,} | "
        f"{final['duplicates']:,} | {final['missing']:,} | {final['unexpected']:,} | {run['snapshots']} |"
    )


def _versions(doc: dict[str, Any]) -> str:
    versions = doc.get("versions") or {}
    if not versions:
        return "eos-ingest only"
    return f"Connect {versions['kafka_connect']}, Iceberg {versions['iceberg']}"


def medians(docs: list[dict[str, Any]]) -> list[str]:
    """One row per size, side and kind over `docs`: the median seconds and records/s, the worst
    counts."""
    groups: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    for doc in docs:
        for run in doc["runs"]:
            key = (doc["records_committed"], run.get("side", "connect"), run["kind"])
            groups.setdefault(key, []).append(run)
    rows = [
        "| committed records | side | run | runs | median seconds | median records/s | most duplicates | most missing |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for (records, side, kind), runs in groups.items():
        secs = [r["seconds"] for r in runs if r["seconds"] is not None]
        rates = [r["records_per_s"] for r in runs if r["records_per_s"] is not None]
        rows.append(
            f"| {records:,} | {side} | {kind} | {len(runs)} | {statistics.median(secs):.1f} | {statistics.median(rates):,.0f} | "
            f"{max(r['final']['duplicates'] for r in runs):,} | {max(r['final']['missing'] for r in runs):,} |"
            if secs and rates
            else f"| {records:,} | {side} | {kind} | {len(runs)} | - | - | - | - |"
        )
    return rows


def render() -> str:
    docs = _latest()
    if not docs:
        return HEAD + "\nNo run yet.\n"
    lines = [
        HEAD,
        *medians(docs),
        "",
        "Each run:",
        "",
        "| side | committed records | run | SIGKILLs | seconds | records/s | rows | duplicates | missing | unexpected | snapshots |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for doc in docs:
        lines += [_row(doc, run) for run in doc["runs"]]
    lines += [""]
    for doc in docs:
        lines += [
            f"- {doc['at']}, commit {doc['commit']}, {doc['cpus']} cores, load average {doc['load_1m_after']} "
            f"after; {_versions(doc)}. {doc['note']}"
        ]
    return "\n".join([*lines, ""])
