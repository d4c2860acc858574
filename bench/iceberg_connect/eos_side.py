"""eos-ingest on Iceberg, measured as the sink is (measure.py), on the same topic.

One run: a fresh control DB (SQLite, which holds the JDBC catalog too) and warehouse, then
`eos-ingest run --until-caught-up` until it exits with every batch committed. `seconds` runs from
the first process's start to the commit of the snapshot that made the table complete (its
timestamp-ms), so it includes the JVM's start-up as the sink's does. The table is read by the same
JVM-free reader (table.read_keys) and compared with Kafka's read_committed view.

A chaos run SIGKILLs the run's process group `kills` times, each at a random moment in
`kill_window` seconds after its (re)start, and starts it again at once: the next process takes the
batch over with a new fence (what an Airflow retry does), and its replace of the batch's ranges
leaves one copy whatever the killed one had published.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.iceberg_connect import table
from bench.iceberg_connect.measure import Run, compare
from bench.iceberg_connect.worker import NAMESPACE
from bench.workload import SCHEMA

REPO = Path(__file__).resolve().parents[2]
TABLE = "events"
COLUMNS = ("kafka_partition", "kafka_offset")


def pipeline(home: Path, bootstrap: str, topic: str, per_partition: int) -> Path:
    """The pipeline file of one run: its table bench.events in the JDBC catalog on the control DB."""
    home.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "name": "bench_iceberg",
        "topics": [topic],
        "kafka": {"bootstrap.servers": bootstrap},
        "kafka_conn_id": None,
        "max_records_per_partition": per_partition,
        "value": {"format": "json", "schema": SCHEMA},
        "output": {"format": "iceberg", "table": f"{NAMESPACE}.{TABLE}", "path": str(home / "warehouse")},
        "control_db_url": f"sqlite:///{home}/control.db",
        "schedule": None,
    }
    path = home / "bench_iceberg.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "eos_ingest.cli", "run", "--config", str(config), "--until-caught-up"]
    argv += ["--master", "local[2]"]
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=out, cwd=REPO, start_new_session=True)


def run(
    home: Path,
    bootstrap: str,
    topic: str,
    expected: np.ndarray,
    kills: int = 0,
    kill_window: tuple[float, float] = (5.0, 15.0),
    per_partition: int = 1_000_000,
    timeout_s: float = 900.0,
    seed: int = 34,
) -> Run:
    """One run of eos-ingest into a fresh table; `kills` > 0 makes it a chaos run."""
    rng = random.Random(seed)
    result = Run("chaos" if kills else "clean")
    config = pipeline(home, bootstrap, topic, per_partition)
    log = home / "run.log"
    started = time.monotonic()
    result.started_wall = time.time()
    proc = _start(config, log)
    next_kill = started + rng.uniform(*kill_window) if kills else None
    try:
        while True:
            now = time.monotonic()
            if now - started > timeout_s:
                result.errors.append(f"not complete after {timeout_s:.0f} s")
                break
            code = proc.poll()
            if code is not None:
                if code == 0:
                    break
                result.unexpected_exits += 1
                if result.unexpected_exits > 3:
                    result.errors.append(f"eos-ingest run exited {code} 4 times (see {log})")
                    break
                proc = _start(config, log)
            elif next_kill is not None and now >= next_kill:
                total, _ = table.total_records(home / "control.db", NAMESPACE, TABLE)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                result.kills.append({"at_s": round(now - started, 2), "table_records": total})
                proc = _start(config, log)
                next_kill = (
                    time.monotonic() + rng.uniform(*kill_window) if len(result.kills) < kills else None
                )
            time.sleep(0.25)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    result.seconds_observed = time.monotonic() - started
    check = check_table(home, expected)
    result.final = result.at_complete = check.counts
    result.snapshots, result.data_files = check.snapshots, check.data_files
    if check.published_wall is not None and not result.errors:
        result.seconds = check.published_wall - result.started_wall
    return result


@dataclass(frozen=True)
class TableCheck:
    """A run's table read back (table.read_keys) and compared with Kafka's read_committed view."""

    counts: dict[str, int]  # rows, duplicates, missing, unexpected (measure.compare)
    snapshots: int
    data_files: int
    published_wall: float | None  # the current snapshot's commit time, seconds since the epoch


def check_table(home: Path, expected: np.ndarray) -> TableCheck:
    """The table of the pipeline written by `pipeline(home, ...)`, as it is now."""
    read = table.read_keys(home / "control.db", NAMESPACE, TABLE, COLUMNS)
    snap = table.current_snapshot(table.metadata(home / "control.db", NAMESPACE, TABLE))
    published = None if snap is None else snap["timestamp-ms"] / 1000
    return TableCheck(compare(read.keys, expected), read.snapshots, read.data_files, published)
