"""(i) and (j) of `make bench`: eos-ingest into an Iceberg table and Apache Iceberg's own Kafka
Connect sink, on the bench's topic, each into a fresh table, each table read back without a JVM and
compared with Kafka's read_committed view (every partition and offset).

The running and the reading are bench/iceberg_connect's (its worker and measure for the sink,
eos_side's pipeline and table check for eos-ingest), so that `python -m bench.iceberg_connect`
and `make bench` measure the same way; this module turns them into side_by_side's figures.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.iceberg_connect import eos_side, measure
from bench.iceberg_connect.worker import SinkConfig, jars_dir
from bench.measure import Measured
from eos_ingest import paths

# The sink reaches a complete table of 1M in about 20 s here; a stuck one is not waited for an hour.
SINK_TIMEOUT_S = 900.0


def sink_jars() -> Path:
    """The Connect worker's classpath, fetched by bench/iceberg_connect/jars.sh on first use."""
    try:
        return jars_dir(paths.state_dir())
    except subprocess.CalledProcessError as exc:  # a failed (j), not a failed bench
        raise RuntimeError(f"bench/iceberg_connect/jars.sh exited with {exc.returncode}") from exc


def table_figures(counts: Mapping[str, int]) -> dict[str, int]:
    """What a run keeps of its table's comparison with the read_committed view."""
    return {key: int(counts[key]) for key in ("duplicates", "missing", "unexpected")}


def refuse_unless_exactly_once(key: str, counts: Mapping[str, int]) -> None:
    """A table with a duplicate, a missing or an unexpected record fails its system's run (after
    the run's figures are kept, so that the result shows the counts)."""
    wrong = {k: v for k, v in table_figures(counts).items() if v}
    if wrong:
        raise RuntimeError(f"({key}) the table is not the read_committed view of the topic: {wrong}")


def eos_pipeline(home: Path, bootstrap: str, topic: str, per_partition: int) -> Path:
    """(i)'s pipeline file: output.format iceberg, the JDBC catalog on the run's SQLite control DB."""
    return eos_side.pipeline(home, bootstrap, topic, per_partition)


def eos_table(home: Path, expected: np.ndarray, started_wall: float) -> dict[str, Any]:
    """(i)'s table after its run: the counts, and `published_s`, from the process's start to the
    commit of the table's current snapshot (the run's `seconds` go on to the process's end)."""
    check = eos_side.check_table(home, expected)
    published = None if check.published_wall is None else round(check.published_wall - started_wall, 2)
    return {**table_figures(check.counts), "snapshots": check.snapshots, "published_s": published}


def run_sink(
    home: Path, bootstrap: str, topic: str, expected: np.ndarray, jars: Path, rest_port: int
) -> tuple[Measured, dict[str, Any]]:
    """(j): one run of the sink into a fresh table (its own catalog, warehouse, connector name and
    control topic) on a worker started before the clock; timed from the REST request that creates
    the connector to the commit of the first snapshot holding every committed record."""
    name = f"bench_{uuid.uuid4().hex[:8]}"  # the table, the connector (its consumer group), the control topic
    config = SinkConfig(bootstrap, topic, name, home / "sink")
    measure.create_control_topic(config)
    started = time.monotonic()
    run = measure.run(config, jars, rest_port, expected, timeout_s=SINK_TIMEOUT_S, worker_running=True)
    if run.errors or run.seconds is None:
        raise RuntimeError(
            f"(j) the sink did not complete the table in {time.monotonic() - started:.0f} s: {run.errors}"
        )
    measured = Measured(["iceberg-kafka-connect", name], 0, run.seconds, run.peak_rss_jvm_mb, 0.0)
    extra = {
        **table_figures(run.final),
        "snapshots": run.snapshots,
        "seconds_observed": round(run.seconds_observed or 0, 2),
    }
    return measured, extra
