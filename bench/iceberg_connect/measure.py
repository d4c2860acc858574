"""Times Iceberg's Kafka Connect sink to a table holding every committed record, and checks it.

One run: a fresh worker, catalog and warehouse; the worker starts, and the table's current snapshot
is polled (its summary's total-records) every `POLL_S`. Once it counts at least the committed
records, every row's (partition, offset) is read and compared with Kafka's read_committed view:
done when none is missing. `seconds` is the commit time of that snapshot (its timestamp-ms) less
the worker's start, so it includes the JVM's start-up, as the bench's Spark systems include theirs.
The worker then runs `settle_s` more (a late commit would show there) before the final read.

With `worker_running`, the worker starts without the connector and the clock starts once it is
ready, at the REST request that adds the sink (`make bench`'s (j)): users keep a Connect worker
running and give it a connector, so its JVM's start is not the ingest's.

A chaos run SIGKILLs the worker's process group `kills` times, each at a random moment in
`kill_window` seconds after its (re)start, as long as the table is not complete, and restarts it
at once.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.iceberg_connect import table
from bench.iceberg_connect.worker import NAMESPACE, ConnectWorker, SinkConfig
from bench.measure import RssPoller

POLL_S = 0.25


def committed_keys(bootstrap: str, topic: str) -> np.ndarray:
    """Kafka's read_committed view of the topic: one key (partition << SHIFT | offset) per record."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-view-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    at_end: set[int] = set()
    keys: list[int] = []
    while len(at_end) < len(partitions):
        for message in consumer.consume(10_000, timeout=1.0):
            error = message.error()
            if error is None:
                keys.append((int(message.partition() or 0) << table.SHIFT) | int(message.offset() or 0))
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(int(message.partition() or 0))
            else:
                raise RuntimeError(f"consume {topic}: {error}")
    consumer.close()
    return np.array(keys, dtype=np.int64)


def committed_view(bootstrap: str, topic: str, committed: int) -> np.ndarray:
    """committed_keys, refused when it does not hold what the producer committed: every side's
    duplicates and missing records are counted against it."""
    keys = committed_keys(bootstrap, topic)
    if keys.size != committed:
        raise RuntimeError(f"read_committed view has {keys.size} records, the producer committed {committed}")
    return keys


def create_control_topic(config: SinkConfig) -> None:
    """The sink's control topic, one partition, before its worker starts (not timed)."""
    admin = AdminClient({"bootstrap.servers": config.bootstrap})
    control = config.control_topic
    admin.create_topics([NewTopic(control, 1, 1)])[control].result(timeout=60)


def compare(rows: np.ndarray, expected: np.ndarray) -> dict[str, int]:
    """rows: the table's keys; expected: Kafka's (distinct) committed keys."""
    distinct = np.unique(rows)
    return {
        "rows": int(rows.size),
        "duplicates": int(rows.size - distinct.size),  # rows beyond the first of each key
        "missing": int(np.setdiff1d(expected, distinct, assume_unique=True).size),
        "unexpected": int(np.setdiff1d(distinct, expected, assume_unique=True).size),
    }


@dataclass
class Run:
    """What one run saw."""

    kind: str
    started_wall: float = 0.0
    seconds: float | None = (
        None  # worker start (or connector created) -> commit of the first complete snapshot
    )
    seconds_observed: float | None = None  # worker start -> this harness saw it complete
    kills: list[dict[str, float]] = field(default_factory=list)
    unexpected_exits: int = 0
    at_complete: dict[str, int] = field(default_factory=dict)
    final: dict[str, int] = field(default_factory=dict)
    snapshots: int = 0
    data_files: int = 0
    peak_rss_jvm_mb: float = 0.0  # the worker's, from its start to the complete table
    errors: list[str] = field(default_factory=list)

    def as_dict(self, committed: int, value_bytes: int) -> dict[str, Any]:
        secs = self.seconds
        return {
            "kind": self.kind,
            "seconds": None if secs is None else round(secs, 2),
            "seconds_observed": None if self.seconds_observed is None else round(self.seconds_observed, 2),
            "records_per_s": None if not secs else round(committed / secs),
            "mb_per_s": None if not secs else round(value_bytes / secs / 1e6, 2),
            "kills": self.kills,
            "unexpected_exits": self.unexpected_exits,
            "at_complete": self.at_complete,
            "final": self.final,
            "snapshots": self.snapshots,
            "data_files": self.data_files,
            "peak_rss_jvm_mb": round(self.peak_rss_jvm_mb) or None,
            "errors": self.errors,
        }


def run(
    config: SinkConfig,
    jars: Path,
    rest_port: int,
    expected: np.ndarray,
    kills: int = 0,
    kill_window: tuple[float, float] = (5.0, 15.0),
    settle_s: float = 5.0,
    timeout_s: float = 900.0,
    seed: int = 34,
    worker_running: bool = False,
) -> Run:
    """One run of the sink into a fresh table; `kills` > 0 makes it a chaos run; `worker_running`
    starts the clock at the connector's creation on a worker already up."""
    rng = random.Random(seed)
    result = Run("chaos" if kills else "clean")
    worker = ConnectWorker(config, jars, rest_port)
    want = int(expected.size)
    try:
        if worker_running:
            worker.start(with_connector=False)
            worker.wait_ready()
        else:
            worker.start()
        started = time.monotonic()
        result.started_wall = time.time()
        if worker_running:
            worker.create_connector()
        rss = _next_poller(None, worker.pid)
        next_kill = started + rng.uniform(*kill_window) if kills else None
        checked_snapshot: int | None = None
        while True:
            now = time.monotonic()
            if now - started > timeout_s:
                result.errors.append(f"not complete after {timeout_s:.0f} s")
                break
            if not worker.alive():
                result.unexpected_exits += 1
                if result.unexpected_exits > 3:
                    result.errors.append("the worker exited on its own 4 times")
                    break
                worker.start()
                rss = _next_poller(rss, worker.pid)
            rss.sample()
            total, _ = table.total_records(config.catalog_db, NAMESPACE, config.table)
            if next_kill is not None and now >= next_kill:
                worker.kill()
                result.kills.append({"at_s": round(now - started, 2), "table_records": total})
                worker.start()
                rss = _next_poller(rss, worker.pid)
                next_kill = (
                    time.monotonic() + rng.uniform(*kill_window) if len(result.kills) < kills else None
                )
            if total >= want:
                read = table.read_keys(config.catalog_db, NAMESPACE, config.table)
                if read.snapshot_id != checked_snapshot:
                    checked_snapshot = read.snapshot_id
                    seen = compare(read.keys, expected)
                    if seen["missing"] == 0:
                        result.seconds_observed = time.monotonic() - started
                        doc = table.metadata(config.catalog_db, NAMESPACE, config.table)
                        snap = table.current_snapshot(doc)
                        assert snap is not None
                        result.seconds = snap["timestamp-ms"] / 1000 - result.started_wall
                        result.at_complete = seen
                        break
            time.sleep(POLL_S)
        time.sleep(settle_s)
    finally:
        worker.stop()
    result.peak_rss_jvm_mb = rss.peak_jvm_mb
    read = table.read_keys(config.catalog_db, NAMESPACE, config.table)
    result.final = compare(read.keys, expected)
    result.snapshots, result.data_files = read.snapshots, read.data_files
    result.errors += worker.log_errors()
    return result


def _next_poller(previous: RssPoller | None, pid: int | None) -> RssPoller:
    """A poller of the (re)started worker, sampled by the run's loop, that keeps the peak seen
    before it."""
    assert pid is not None
    poller = RssPoller(pid)
    poller.peak_jvm_mb = previous.peak_jvm_mb if previous else 0.0
    return poller
