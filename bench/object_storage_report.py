"""The "Object storage" section of bench/README.md, from the latest line of
results/object_storage.jsonl (bench/object_storage.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "object_storage.jsonl"

HEAD = """### Object storage: the commit coordinator's cost, and a batch on a local vs an s3a table

`python -m bench.object_storage` (20 commits per arm, 100,000 records, 3 runs by default) starts
its own broker, s3proxy (filesystem provider) and PostgreSQL on 127.0.0.1 and appends a line to
`results/object_storage.jsonl`.

- Cost per commit: two Spark applications (`bench/object_storage_commits_app.py`) each make the
  commits of one small file to a new s3a table and time only `OptimisticTransaction.commit` (the
  Parquet file is written before, untimed): one with Delta's default s3a log store, one with the
  control DB as the coordinator (per commit: a SELECT of the previous entry, the INSERT ... ON
  CONFLICT, the copy of the temporary file, the UPDATE to complete, the cleanup DELETE).
- Commits that race (`--race-rounds`, 40 by default): two Spark applications
  (`bench/object_storage_race_app.py`) add a row each to one s3a table per round and commit at the
  same instant. Without the coordinator they stop at the first round where both got the same
  version, then as many rounds run with it; the commits lost are those reported as a success that
  delta-rs does not find in the table.
- One batch: 100,000 records produced (5% in aborted transactions, ~200 B JSON values, 6
  partitions), then `eos-ingest run --master local[2]` of the whole topic as one batch, on a local
  table and on an s3a table, alternately (PostgreSQL control DB for both).
"""


def _latest() -> dict[str, Any] | None:
    if not RESULTS.exists():
        return None
    lines = [line for line in RESULTS.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def _ms(values: list[float]) -> str:
    return f"{min(values):,.0f} / {max(values):,.0f}"


def _race(doc: dict[str, Any]) -> list[str]:
    if doc.get("race_rounds_without_coordinator") is None:
        return []  # a run before --race-rounds, or one with --race-rounds 0
    rounds_without, rounds_with = doc["race_rounds_without_coordinator"], doc["race_rounds_with_coordinator"]
    return [
        f"Commits that race: without the coordinator {doc['race_commits_lost_without_coordinator']} of "
        f"{2 * rounds_without} commits were lost in {rounds_without} rounds (each reported as a success); "
        f"with it {doc['race_commits_lost_with_coordinator']} of {2 * rounds_with} in {rounds_with} rounds.",
        "",
    ]


def render() -> str:
    doc = _latest()
    if doc is None:
        return HEAD + "\nNo run yet.\n"
    runs = ", ".join
    return "\n".join(
        [
            HEAD,
            f"Latest run: {doc['at']}, commit {doc['commit']}, {doc['cpus']} cores, load average "
            f"{doc['load_1m_before']} before and {doc['load_1m_after']} after; {doc.get('note') or ''}",
            "",
            "| figure | without coordinator | with coordinator |",
            "|---|---:|---:|",
            f"| Delta commit to s3a, median of {doc['commits_per_arm']} (ms) | "
            f"{doc['commit_ms_median_without_coordinator']:,.0f} | {doc['commit_ms_median_with_coordinator']:,.0f} |",
            f"| the same, min / max (ms) | {_ms(doc['commit_ms_without'])} | {_ms(doc['commit_ms_with'])} |",
            "",
            f"The coordinator's cost per commit (difference of the medians): {doc['coordinator_ms_per_commit']:,.0f} ms.",
            "",
            *_race(doc),
            f"| one batch of {doc['batch_records_produced']:,} records ({doc['batch_records_committed']:,} committed) "
            "| local table | s3a table |",
            "|---|---:|---:|",
            f"| `eos-ingest run`, median of {doc['batch_runs']} (s) | {doc['batch_seconds_median_local']} | "
            f"{doc['batch_seconds_median_s3a']} |",
            f"| the runs (s) | {runs(str(s) for s in doc['batch_seconds_local'])} | "
            f"{runs(str(s) for s in doc['batch_seconds_s3a'])} |",
            "",
        ]
    )
