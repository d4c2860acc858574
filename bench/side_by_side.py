"""`make bench`: eos-ingest side by side with what a user would run instead, on the same data.

    make bench                                         # 1M records, medians of 3, every system
    make bench BENCH_ARGS="--records 100000 --runs 1"  # a smaller run
    make bench BENCH_ARGS=--small                      # the 10k-record comparison: (b), (d) and (g)
    make bench BENCH_ARGS=--catch-up                   # a 5M backlog: (b) and (h) in 5 batches of 1M

It produces the workload itself (JSON values of ~200 B over 6 partitions, transactions of 5,000
records, 5% aborted), then runs each system `--runs` times, each into a fresh table (and a fresh
control DB for eos-ingest): (a) a raw read_committed consume, (b) a plain Spark batch job, (c)
Structured Streaming AvailableNow, (d) `eos-ingest run`, (e) the same with the gate off, (f) the
audit of (d)'s batch, (g) the ingest DAG through airflow standalone, (h) `eos-ingest run
--until-caught-up` in `--catch-up-batches` batches, (i) `eos-ingest run` into an Iceberg table, (j)
Iceberg's own Kafka Connect sink on a worker started before the clock (bench/iceberg_systems.py).
Every Spark system runs on local[2].

The result goes to bench/results/bench-<stamp>.json; bench/README.md and bench/charts/*.png are
regenerated from the latest full, small and catch-up results. See bench/README.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import growth_report, iceberg_systems, object_storage_report, report  # noqa: E402
from bench.iceberg_connect import report as iceberg_connect_report  # noqa: E402
from bench.iceberg_connect.measure import committed_view  # noqa: E402
from bench.measure import Measured, RssPoller, run_measured  # noqa: E402
from bench.workload import SCHEMA, Workload, produce  # noqa: E402
from eos_ingest import paths  # noqa: E402
from eos_ingest.control.store import ControlStore  # noqa: E402
from eos_ingest.spark.session import DELTA_CONF, LOCAL_CONF, local_jars, spark_submit_binary, spark_submit_env  # noqa: E402  # noqa: E402

MASTER = "local[2]"
RESULTS = REPO / "bench" / "results"
CHARTS = REPO / "bench" / "charts"
AIRFLOW_SH = REPO / "scripts" / "airflow.sh"
ALL_SYSTEMS = "abcdefghij"
# A result with these is a complete one, the README's main table: results from before (i) and (j)
# were systems of the bench have only these.
COMPLETE_SYSTEMS = "abcdefgh"
SMALL_SYSTEMS = "bdg"
CATCH_UP_SYSTEMS = "bh"  # --catch-up: a backlog drained in one Spark session vs plain Spark
TIMEOUT_S = 3600


def log(message: str) -> None:
    print(f"bench [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def spark_argv(*args: str) -> list[str]:
    """spark-submit of bench/plain_spark_job.py with the settings the eos-ingest job gets."""
    argv = [
        spark_submit_binary(),
        "--master",
        MASTER,
        "--driver-memory",
        "2g",
        "--jars",
        ",".join(local_jars()),
    ]
    for key, val in {**DELTA_CONF, "spark.log.level": "WARN", **LOCAL_CONF}.items():
        argv += ["--conf", f"{key}={val}"]
    return [*argv, str(REPO / "bench" / "plain_spark_job.py"), *args]


def delta_rows(table: Path) -> int:
    """Rows appended to a Delta table, from its log's operation metrics (no Spark needed)."""
    total = 0
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info:
                total += int(info.get("operationMetrics", {}).get("numOutputRows", 0))
    return total


def pipeline_doc(name: str, topic: str, bootstrap: str, home: Path, per_partition: int) -> dict[str, Any]:
    return {
        "name": name,
        "topics": [topic],
        "kafka": {"bootstrap.servers": bootstrap},
        "kafka_conn_id": None,
        "max_records_per_partition": per_partition,
        "value": {"format": "json", "schema": SCHEMA},
        "output": {"path": str(home / "table")},
        "control_db_url": f"sqlite:///{home}/control.db",
        "schedule": None,
    }


def write_pipeline(folder: Path, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class Bench:
    def __init__(self, args: argparse.Namespace, workload: Workload, tmp: Path) -> None:
        self.args, self.w, self.tmp = args, workload, tmp
        self.runs: dict[str, list[dict[str, Any]]] = {k: [] for k in args.systems}
        self.d_configs: dict[int, tuple[Path, int]] = {}
        self.errors: list[dict[str, Any]] = []

    @functools.cached_property
    def expected(self) -> np.ndarray:
        """Kafka's read_committed view of the topic (every partition and offset), read once, untimed:
        (i) and (j)'s tables are compared with it."""
        return committed_view(self.args.bootstrap, self.w.topic, self.w.records_committed)

    @functools.cached_property
    def sink_jars(self) -> Path:
        """The Connect worker's classpath, fetched (Maven) before the first (j), untimed."""
        return iceberg_systems.sink_jars()

    def attempt(self, key: str, n: int, step: Any, *args: Any) -> None:
        """Run one system once; a failure is kept (key, run, message) and the bench goes on."""
        try:
            step(*args)
        except (RuntimeError, OSError, TimeoutError, ValueError, KeyError) as exc:
            log(f"({key}) run {n + 1} FAILED: {str(exc)[-2000:]}")
            self.errors.append({"system": key, "run": n + 1, "error": str(exc)[-4000:]})

    def record(self, key: str, measured: Measured, records: int, **extra: Any) -> None:
        if records != self.w.records_committed:
            raise RuntimeError(
                f"({key}) handled {records} records, but {self.w.records_committed} were committed to "
                f"{self.w.topic}: the comparison would be wrong"
            )
        figures = {
            **measured.figures(),
            **report.throughput(records, self.w.value_bytes, measured.seconds),
            "records": records,
            **extra,
        }
        self.runs[key].append(figures)
        log(f"({key}) {figures['seconds']:.1f} s, {figures['records_per_s']:,.0f} records/s")

    def home(self, key: str, n: int) -> Path:
        path = self.tmp / f"{key}{n}"
        path.mkdir()
        return path

    def run_a(self, n: int) -> None:
        m = run_measured(
            [sys.executable, "-m", "bench.workload", "consume", "--bootstrap", self.args.bootstrap,
             "--topic", self.w.topic],
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        self.record("a", m, json.loads(m.stdout)["records"])

    def run_plain(self, key: str, n: int) -> None:
        home = self.home(key, n)
        args = ["--bootstrap", self.args.bootstrap, "--topic", self.w.topic, "--schema", SCHEMA]
        args += ["--output", str(home / "table")]
        if key == "c":
            args += ["--streaming", "--checkpoint", str(home / "checkpoint")]
        m = run_measured(spark_argv(*args), env=spark_submit_env(), timeout_s=TIMEOUT_S)
        self.record(key, m, delta_rows(home / "table"))

    def eos_run(
        self,
        key: str,
        n: int,
        per_partition: int,
        *extra: str,
        command: str = "eos_ingest.cli",
        iceberg: bool = False,
    ) -> None:
        """`eos-ingest run` (or bench.ungated's run without the gate: `command`), whole process;
        into a Delta table, or with `iceberg` an Iceberg one, read back and checked afterwards."""
        home = self.home(key, n)
        if iceberg:
            config = iceberg_systems.eos_pipeline(home, self.args.bootstrap, self.w.topic, per_partition)
        else:
            config = write_pipeline(
                home, pipeline_doc("bench", self.w.topic, self.args.bootstrap, home, per_partition)
            )
        argv = [
            sys.executable,
            "-m",
            command,
            *(["run"] if command == "eos_ingest.cli" else []),
            "--config",
            str(config),
            "--master",
            MASTER,
            *extra,
        ]
        started_wall = time.time()
        m = run_measured(argv, env={**os.environ, "EOS_LOG_LEVEL": "INFO"}, timeout_s=TIMEOUT_S)
        summary = json.loads(m.stdout)
        batches = summary.get("batches", [summary])
        if any(b["status"] != "committed" for b in batches):
            raise RuntimeError(f"({key}) not every batch committed: {batches}")
        records = sum(b["records_read"] for b in batches)
        phases = report.phase_seconds(m.lines, m.seconds)
        per_batch = {"read_per_batch": report.seconds_per_batch(m.lines, m.seconds, "read")}
        table = iceberg_systems.eos_table(home, self.expected, started_wall) if iceberg else {}
        self.record(key, m, records, phases=phases, batches=len(batches), **per_batch, **table)
        if iceberg:
            iceberg_systems.refuse_unless_exactly_once(key, table)
        if key == "d":
            self.d_configs[n] = (config, batches[0]["batch_id"])

    def run_j(self, n: int, jars: Path) -> None:
        """Iceberg's Kafka Connect sink into a fresh table, its worker started before the clock."""
        home = self.home("j", n)
        m, table = iceberg_systems.run_sink(
            home, self.args.bootstrap, self.w.topic, self.expected, jars, free_port()
        )
        self.record("j", m, int(self.expected.size) - table["missing"], **table)
        iceberg_systems.refuse_unless_exactly_once("j", table)

    def run_f(self, n: int) -> None:
        if n not in self.d_configs:
            raise RuntimeError(f"(f) audits (d)'s batch, and (d) did not commit one in run {n + 1}")
        config, batch_id = self.d_configs[n]
        argv = [
            sys.executable,
            "-m",
            "eos_ingest.cli",
            "audit",
            "--config",
            str(config),
            "--batch-id",
            str(batch_id),
        ]
        m = run_measured(argv, env={**os.environ}, timeout_s=TIMEOUT_S)
        audit = json.loads(m.stdout)
        if not audit.get("success"):
            raise RuntimeError(f"(f) the audit of batch {batch_id} failed: {m.stdout[-2000:]}")
        self.record("f", m, self.w.records_committed)

    def run_once(self, n: int) -> None:
        big = self.w.records_produced  # one batch of everything
        # Offsets, not records: each transaction also leaves a marker offset in every partition.
        offsets = self.w.records_produced + self.w.transactions * self.w.partitions
        per_batch = math.ceil(offsets / self.w.partitions / self.args.catch_up_batches)
        for key in self.args.systems.replace("g", ""):  # (g) runs after the others, airflow started once
            log(f"run {n + 1}/{self.args.runs}: ({key}) {report.SYSTEMS[key]}")
            if key == "a":
                self.attempt(key, n, self.run_a, n)
            elif key in "bc":
                self.attempt(key, n, self.run_plain, key, n)
            elif key == "d":
                self.attempt(key, n, self.eos_run, "d", n, big)
            elif key == "e":
                self.attempt(key, n, lambda: self.eos_run("e", n, big, command="bench.ungated"))
            elif key == "f":
                self.attempt(key, n, self.run_f, n)
            elif key == "h":
                self.attempt(key, n, self.eos_run, "h", n, per_batch, "--until-caught-up")
            elif key == "i":
                self.attempt(key, n, lambda: self.eos_run("i", n, big, iceberg=True))
            elif key == "j":
                self.attempt(key, n, lambda: self.run_j(n, self.sink_jars))

    def run_dag(self) -> None:
        """(g): one airflow standalone, a pipeline (own table and control DB) per run, each triggered."""
        from tests.e2e.airflow_api import AirflowApi

        state = self.tmp / "airflow-state"
        state.mkdir()
        paths.share_setup_state(state)  # the jars and the jobs' class-data archive
        pipelines = self.tmp / "pipelines"
        names = []
        for n in range(self.args.runs):
            home = self.home("g", n)
            doc = pipeline_doc(
                f"bench_g{n}", self.w.topic, self.args.bootstrap, home, self.w.records_produced
            )
            write_pipeline(pipelines, doc)
            names.append(doc["name"])
        password = secrets.token_urlsafe(12)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
        env.update(
            EOS_STATE_DIR=str(state),
            EOS_AIRFLOW_HOME=str(state / "airflow"),
            EOS_AIRFLOW_PORT=str(port),
            EOS_AIRFLOW_ADMIN_PASSWORD=password,
            EOS_PIPELINES_DIR=str(pipelines),
            EOS_KAFKA_BOOTSTRAP=self.args.bootstrap,
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": MASTER}),
        )
        log("(g) airflow standalone: starting")
        up = subprocess.run([str(AIRFLOW_SH), "up"], env=env, text=True, capture_output=True, timeout=600)
        if up.returncode != 0:
            raise RuntimeError(f"airflow.sh up failed:\n{up.stdout}\n{up.stderr}")
        try:
            api = AirflowApi(f"http://127.0.0.1:{port}", "admin", password)
            pid = int((state / "airflow" / "standalone.pid").read_text())
            for n, name in enumerate(names):
                dag = f"eos_ingest__{name}"
                api.wait_for_dag(dag, timeout_s=300)
                log(f"run {n + 1}/{self.args.runs}: (g) {dag}")
                with RssPoller(pid) as poller:
                    started = time.monotonic()
                    run_id = api.run(dag)
                    # Polled every 0.2 s: the tests' 1 s would add half a second to the median.
                    state_now = api.wait_for_run(dag, run_id, TIMEOUT_S, poll_s=0.2)
                    seconds = time.monotonic() - started
                if state_now != "success":
                    raise RuntimeError(
                        f"(g) {dag} run {run_id} is {state_now}: {api.task_states(dag, run_id)}"
                    )
                m = Measured([dag], 0, seconds, poller.peak_jvm_mb, poller.peak_python_mb)
                batches = ControlStore(f"sqlite:///{self.tmp / f'g{n}'}/control.db").list_batches(name)
                if any(b.status.value != "committed" for b in batches):
                    raise RuntimeError(f"(g) {dag}: not every batch committed: {batches}")
                records = sum(b.records_read or 0 for b in batches)
                timeline = dag_run_timeline(api, dag, run_id)
                log(f"(g) timeline: {timeline}")
                self.record(
                    "g", m, records, note="RSS: every process of airflow standalone", timeline=timeline
                )
        finally:
            subprocess.run([str(AIRFLOW_SH), "down"], env=env, text=True, capture_output=True, timeout=300)


def dag_run_timeline(api: Any, dag_id: str, run_id: str) -> dict[str, Any]:
    """Where a DAG run's seconds went, from Airflow's own dates: per task, seconds from the run's
    queueing to the task's queueing, start and end, and the gaps between tasks (the scheduler's and
    the task process's start), to tell Airflow's share of (g) from the batch's."""
    run = api.get(f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")
    origin = datetime.fromisoformat(run["queued_at"])

    def since(value: str | None) -> float | None:
        return None if value is None else round((datetime.fromisoformat(value) - origin).total_seconds(), 2)

    tasks = {
        task: {
            "queued": since(ti.get("queued_when")),
            "start": since(ti["start_date"]),
            "end": since(ti["end_date"]),
        }
        for task, ti in api.task_instances(dag_id, run_id).items()
    }
    return {"run_start": since(run["start_date"]), "run_end": since(run["end_date"]), "tasks": tasks}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine_facts() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
    }


def git_commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


def latest(mode: str, *, complete: bool | None = None) -> dict[str, Any] | None:
    """The newest result of `mode`; with complete=True only a run of every system of
    COMPLETE_SYSTEMS, (a)-(h), with or without (i) and (j); with complete=False only one of fewer
    systems (--systems)."""
    for path in sorted(RESULTS.glob("bench-*.json"), reverse=True):
        result = json.loads(path.read_text())
        if result.get("mode") != mode:
            continue
        if complete is not None and (set(result.get("systems") or "") >= set(COMPLETE_SYSTEMS)) != complete:
            continue
        return dict(result)
    return None


def write_charts(result: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    CHARTS.mkdir(parents=True, exist_ok=True)
    med = result["medians"]
    keys = [k for k in report.SYSTEMS if med.get(k, {}).get("records_per_s")]
    fig, ax = plt.subplots(figsize=(8, 4))
    short = {"a": "consume", "b": "plain Spark", "c": "AvailableNow", "d": "eos run", "e": "gate off",
             "f": "audit", "g": "DAG run", "h": "catch-up", "i": "eos run, Iceberg",
             "j": "Iceberg's Connect sink"}  # fmt: skip
    colors = ["#1f77b4" if k in "defghi" else "#999999" for k in keys]
    keys.reverse()  # (a) on top
    bars = ax.barh(
        [f"({k}) {short[k]}" for k in keys], [med[k]["records_per_s"] for k in keys], color=colors[::-1]
    )
    ax.bar_label(bars, fmt="{:,.0f}", fontsize=8, padding=2)
    ax.margins(x=0.12)
    ax.set_xlabel("records/s (median, whole process)")
    label = result["label"].split(":")[0]
    ax.set_title(
        f"records/s per system, {result['records_committed']:,} committed records ({label})", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(CHARTS / "throughput.png", dpi=100)
    plt.close(fig)
    written = ["charts/throughput.png"]
    phased = [k for k in report.PHASED_SYSTEMS if med.get(k, {}).get("phases")]
    if phased:
        fig, ax = plt.subplots(figsize=(8, 4))
        bottom = [0.0] * len(phased)
        for phase in report.PHASES:
            values = [med[k]["phases"].get(phase) or 0.0 for k in phased]
            ax.barh([f"({k})" for k in phased], values, left=bottom, label=phase)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_xlabel("seconds (median)")
        what = {"d": "(d) gate on", "e": "(e) gate off", "h": "(h) catch-up", "i": "(i) Iceberg"}
        ax.set_title("phases of eos-ingest run: " + ", ".join(what[k] for k in phased), fontsize=9)
        ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.18))
        fig.tight_layout()
        fig.savefig(CHARTS / "phases.png", dpi=100)
        plt.close(fig)
        written.append("charts/phases.png")
    return written


README_HEAD = """# make bench: eos-ingest side by side

Generated by `make bench` (bench/side_by_side.py) from the latest results in `bench/results/`;
do not edit by hand, edit `README_HEAD` in bench/side_by_side.py.

```bash
make bench                                         # >= 1M records, medians of 3, systems (a)-(j)
make bench BENCH_ARGS="--records 100000 --runs 1"  # smaller; --systems abd picks systems
make bench BENCH_ARGS="--systems ij"               # the Iceberg side by side only: (i) and (j), their ratio
make bench BENCH_ARGS=--small                      # 10k records: (b), (d) and (g), for the small-batch targets
make bench BENCH_ARGS=--no-dag                     # without (g) (no airflow standalone)
```

One run produces its own workload on the broker of `make stack-up` (`--bootstrap`, default
`$EOS_KAFKA_BOOTSTRAP` or 127.0.0.1:`$KAFKA_PORT`, 9092): `--records` JSON values of about 200 B,
round-robin over 6 partitions, from a transactional producer in transactions of 5,000 records (or
fewer, so that a small run still has 20), every 20th aborted (5%). Every system then reads that same topic, `--runs` times (default 3), each time into a fresh
Delta table ((i) and (j): a fresh Iceberg table and catalog), and a fresh SQLite control DB for eos-ingest; the figures are medians. Every Spark
system runs with `--master local[2]`, driver memory 2g, the same jars and Delta settings. The
eos-ingest job's driver JVM ((d), (e), (g), (h), (i)) maps the class-data archive `make setup` wrote
(`eos_ingest/spark/class_archive.py`) and runs the parallel collector
(the driver JVM profile "two-core", `spark_session.DRIVER_JVM_PROFILES`), as it does for any user of eos-ingest on a local
master; (b) and (c) are a user's own spark-submit with the JVM's defaults. The same archive given
to (b) took it from 13.7 to 10.1 s on 10k records and from 21.0 to 17.2 s on 1M (A/B on one
machine, 2026-11-26, with G1).

| | what is timed |
|---|---|
| (a) | `python -m bench.workload consume`: a read_committed consumer counting records and bytes, whole process |
| (b) | spark-submit of `bench/plain_spark_job.py`: Kafka read (read_committed, earliest to latest), `from_json`, Delta append, whole process |
| (c) | the same script with `--streaming`: Trigger.AvailableNow into Delta with a checkpoint, whole process |
| (d) | `eos-ingest run --master local[2]`, one batch of everything (gate included), whole process |
| (e) | (d) without the gate: `python -m bench.ungated`, the same plan and spark-submit with the job's gate step replaced by one that checks nothing (`bench/ungated.py`), for reference only |
| (f) | `eos-ingest audit --config ... --batch-id N` on (d)'s batch, whole process (delta-rs and GX on pandas: no JVM) |
| (g) | the ingest DAG (spark_ingest + validate + publish) through airflow standalone: REST trigger to success; airflow starts once (in a temporary folder) and each run has its own pipeline |
| (h) | `eos-ingest run --until-caught-up` in `--catch-up-batches` batches (default 5), whole process |
| (i) | (d) into an Iceberg table: `output.format: iceberg` (bench/iceberg_connect/eos_side.py's pipeline: the JDBC catalog on the run's SQLite control DB, a local warehouse), one batch of everything, gate included, whole process |
| (j) | Apache Iceberg's own Kafka Connect sink (`iceberg-kafka-connect` 1.12.0, standalone Connect 4.3 worker, bench/iceberg_connect/worker.py) into a fresh table: from the REST request that creates the connector on a worker already running to the commit time of the first snapshot holding every committed record |

(i) against (j) is issue 52's comparison as a user would make it: users keep a Connect worker
running and give it a connector, so (j)'s worker starts (JVM, plugins) before the clock and the
clock starts at `POST /connectors`; eos-ingest is timed from its command to its process's end
(after the publish; the publish itself, `published_s`, is in the result file). The sink runs as
bench/iceberg_connect describes below (JDBC catalog on SQLite, commit interval 1 s, `tasks.max=1`,
read_committed, `KafkaMetadataTransform`), its jars fetched by `bench/iceberg_connect/jars.sh`
(Maven) before its first run. Both tables are read back without a JVM (catalog row, metadata JSON,
Avro manifests, Parquet) and compared with Kafka's read_committed view of the topic (read once,
untimed): a duplicate, a missing or an unexpected record fails the run. The
clock of `python -m bench.iceberg_connect` (below) starts at the worker's start instead (JVM
start-up included); it remains the tool for the runs with SIGKILLs.

records/s and MB/s (value bytes of the committed records) are over the whole process. Peak RSS is
the largest sum, sampled every 0.2 s over the process tree, of the `java` processes (the driver
JVM; local mode has no other) and of the Python processes (CLI, pyspark driver); for (g) the tree
is all of airflow standalone, for (j) the worker's JVM (sampled every 0.25 s from its start). The phases of (d), (e), (h) and (i) come from the log lines
`batch N: phase X` (job) and `phase plan` / `phase submit` (CLI, `EOS_LOG_LEVEL=INFO`), stamped on
arrival: `start` (process start to the first line), `plan`, `spark_start` (spark-submit to the
read: JVM, session, fence), `read` (read, parse, counts and the
table's staged files: one pass), `gate`, `write` (the table's commit, the quarantine
replace), `check`, `commit`, `finish` (after the commit: Spark stop, JVM exit, summary); a
catch-up sums them over its batches. Ratios are throughput ratios (records/s over records/s).
Every run checks its count: the Delta log's output rows for (b) and (c), the batch summary for
(d), (e), (h) and (i), the consumer's count for (a), the table read back for (i) and (j), against
the committed records.

The targets table of each result holds every target it can speak to (medians; a target whose
systems the result did not measure is left out): d/b >= 0.9 and the gate and the audit each <= 10%
of (d); issue 52's: (i)/(j) >= 1.0 (clean, gate on), the backlog (h)/(b) >= 0.9 on 5M in batches
of 1M (`--catch-up`), the DAG run of 1M (g) <= 1.2x the bare run (d) in seconds, (d)'s Python
peak RSS <= 300 MB, and with `--small` (d) <= 1.3x (b) in seconds and the DAG run of 10k <= 15 s
trigger to success. A run on fewer records than a target's says so in its note.

A system that fails is named in the result file (`errors`) and here, the others still run, and
`make bench` exits 1. `make bench BENCH_ARGS=--readme-only` regenerates this file and the charts from the results alone.
The rerun/replace figure of the former bench/bench_ingest.py (its results: `results/ingest.jsonl`)
is no longer measured; `results/chaos-*.json` are `make chaos`'s.
"""


def render_readme(
    full: dict[str, Any] | None,
    small: dict[str, Any] | None,
    catch_up: dict[str, Any] | None = None,
    partial: dict[str, Any] | None = None,
) -> str:
    parts = [README_HEAD, "## Results", ""]
    if full:
        parts += [
            report.render_result(full, "Side by side"),
            "![records/s per system](charts/throughput.png)",
            "",
        ]
        if any(full["medians"].get(k, {}).get("phases") for k in report.PHASED_SYSTEMS):
            parts += ["![phases of (d)](charts/phases.png)", ""]
    else:
        parts += ["No full run yet.", ""]
    if partial and (not full or partial["date"] > full["date"]):
        parts += [report.render_result(partial, f"Since then, systems {partial['systems']} only")]
    if small:
        parts += [report.render_result(small, "Small batch (--small)")]
    else:
        parts += ["No `--small` run yet.", ""]
    if catch_up:
        parts += [report.render_result(catch_up, "Backlog in one Spark session (--catch-up)")]
    else:
        parts += ["No `--catch-up` run yet.", ""]
    parts += [growth_report.render(), object_storage_report.render(), iceberg_connect_report.render()]
    return "\n".join(parts).rstrip() + "\n"


def write_readme() -> None:
    full, small, catch_up = latest("full", complete=True), latest("small"), latest("catch_up")
    partial = latest("full", complete=False)
    if full:
        write_charts(full)
    (REPO / "bench" / "README.md").write_text(render_readme(full, small, catch_up, partial))
    log("bench/README.md and bench/charts/ regenerated")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_bootstrap = (
        os.environ.get("EOS_KAFKA_BOOTSTRAP") or f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    )
    parser.add_argument("--bootstrap", default=default_bootstrap)
    parser.add_argument(
        "--records",
        type=int,
        help="records produced (default 1,000,000; 10,000 with --small; 5,000,000 with --catch-up)",
    )
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--catch-up-batches", type=int, default=5, help="batches of (h)")
    parser.add_argument(
        "--systems", help=f"which of {ALL_SYSTEMS} (default all; {SMALL_SYSTEMS} with --small)"
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--small", action="store_true", help="the 10k-record comparison: (b), (d), (g)")
    modes.add_argument(
        "--catch-up",
        action="store_true",
        help="the backlog comparison: (b) and (h) on 5M records, (h) in --catch-up-batches batches (1M each)",
    )
    parser.add_argument("--no-dag", action="store_true", help="leave out (g)")
    parser.add_argument("--label", default="", help="what this run is, shown in bench/README.md")
    parser.add_argument("--no-readme", action="store_true", help="write the result file only")
    parser.add_argument(
        "--readme-only", action="store_true", help="regenerate bench/README.md and charts, run nothing"
    )
    args = parser.parse_args()
    if args.readme_only:
        write_readme()
        return
    args.records = args.records or (10_000 if args.small else 5_000_000 if args.catch_up else 1_000_000)
    if "f" in (args.systems or "") and "d" not in args.systems:
        parser.error("(f) audits (d)'s batch: --systems needs d too")
    args.systems = "".join(
        k
        for k in ALL_SYSTEMS
        if k
        in (
            args.systems
            or (SMALL_SYSTEMS if args.small else CATCH_UP_SYSTEMS if args.catch_up else ALL_SYSTEMS)
        )
    )
    if args.no_dag:
        args.systems = args.systems.replace("g", "")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    load_before = os.getloadavg()
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    log(f"producing {args.records:,} records to {topic} on {args.bootstrap}")
    # Transactions of 5,000 records, or smaller so that a small run has 20 of them, one aborted.
    per_tx = max(1, min(5000, args.records // 20))
    workload = produce(args.bootstrap, topic, args.records, args.partitions, per_tx)
    log(f"produced in {workload.seconds:.1f} s: {workload.records_committed:,} committed")
    with tempfile.TemporaryDirectory(prefix="eos-bench-") as tmp:
        bench = Bench(args, workload, Path(tmp))
        for n in range(args.runs):
            bench.run_once(n)
        if "g" in args.systems:
            bench.attempt("g", 0, bench.run_dag)
    load_after = os.getloadavg()
    medians = {k: report.medians(v) for k, v in bench.runs.items() if v}
    result: dict[str, Any] = {
        "file": f"bench/results/bench-{stamp}.json",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "label": args.label
        or ("small-batch comparison" if args.small else "backlog" if args.catch_up else "side by side"),
        "mode": "small" if args.small else "catch_up" if args.catch_up else "full",
        "commit": git_commit(),
        "machine": {
            **machine_facts(),
            "load_before": round(load_before[0], 2),
            "load_after": round(load_after[0], 2),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
        },
        "master": MASTER,
        "runs": args.runs,
        "systems": args.systems,
        "partitions": workload.partitions,
        "records_produced": workload.records_produced,
        "records_committed": workload.records_committed,
        "aborted_records": workload.records_produced - workload.records_committed,
        "transactions": workload.transactions,
        "aborted_transactions": workload.aborted_transactions,
        "value_bytes": workload.value_bytes,
        "produce_seconds": round(workload.seconds, 2),
        "catch_up_batches": args.catch_up_batches,
        "medians": medians,
        "ratios": report.ratios(medians),
        "every_run": bench.runs,
        "errors": bench.errors,
    }
    result["targets"] = report.targets(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = REPO / result["file"]
    out.write_text(json.dumps(result, indent=2) + "\n")
    log(f"result: {out}")
    print(report.render_result(result, result["label"]))
    if not args.no_readme:
        write_readme()
    if bench.errors:
        raise SystemExit(
            f"bench: {len(bench.errors)} run(s) failed: {[(e['system'], e['run']) for e in bench.errors]}"
        )


if __name__ == "__main__":
    main()
