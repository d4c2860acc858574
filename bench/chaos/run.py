"""Chaos run of eos-ingest on the real stack; see bench/chaos/__init__.py and README (make chaos).

One run: its own broker and PostgreSQL on free ports in a folder of its own; producers write
committed, aborted and long-open transactions while partitions are added; `eos-ingest run` loops,
backfills of overlapping committed ranges run beside it, audits follow commits, `eos-ingest
maintain` (OPTIMIZE, then VACUUM under the pipeline's lock) runs now and then; jobs are SIGKILLed
at random moments (their process group), the broker is kill -9'd and restarted, PostgreSQL is
restarted, and one planned batch is submitted twice at once (a zombie). Then, without chaos,
everything is ingested, `eos-ingest verify` runs and the run's own check (bench/chaos/check.py)
compares Kafka with the Delta tables.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from sqlalchemy.engine import make_url

from bench.chaos import check
from bench.chaos.cluster import kill_target
from bench.chaos.delta_coordinator import S3Store
from bench.chaos.network import NetworkFaults
from bench.chaos.procs import REPO, Job, Processes, free_ports, group_alive
from bench.chaos.produce import SCHEMA, ProduceStats, TxWriter
from bench.chaos.rest_catalog import CONN_ENV, CONN_ID, RestCatalog
from bench.chaos.unknown_outcomes import (
    DeltaCommitFaults,
    RestPublishFaults,
    UnknownPublishes,
    spark_defaults,
)
from bench.tcp_fault_proxy import TcpFaultProxy
from eos_ingest import paths

# Targeted kills go round these: a kill when the job reports the phase ("written" = between the
# Delta write and the commit, held there by the job's pause hook so the kill cannot miss it).
TARGETS = ("plan", "read", "gate", "write", "written", "commit")
PAUSE_ENV = "EOS_FAULT_PAUSE_BEFORE_COMMIT"
# maintain pauses here with its VACUUM lock held (eos_ingest.storage.maintain_deletes.PAUSE_UNDER_VACUUM_LOCK_ENV):
# a kill there leaves the lock behind, unless a batch was in flight and maintain took none.
MAINTAIN_PAUSE_ENV = "EOS_FAULT_PAUSE_UNDER_VACUUM_LOCK"
PIPELINE = "chaos"
# An Iceberg run's table (and <table>_quarantine), in the catalog eos-ingest names eos_<pipeline>.
ICEBERG_TABLE = "chaos.events"
# Publishes with a lost answer of a run on a REST catalog or s3a when --unknown-publishes is not given.
DEFAULT_UNKNOWN_PUBLISHES = 9
ICEBERG_CATALOG = f"eos_{PIPELINE}"
# How the result names the phases the jobs log ("start": the process started, no phase logged yet).
PHASE_NAMES = {
    "submit": "job start",  # spark-submit launched: JVM start, fence, Spark session
    "written": "between write and commit",
    "committed": "after commit",
}


@dataclass
class ChaosConfig:
    records: int = 1_000_000
    kills: int = 100
    broker_restarts: int = 5
    # More than 1: a cluster of that many nodes (replication 3, min.insync.replicas 2), whose broker
    # kills take a partition's leader, a writer's transaction coordinator and the controller in turn.
    brokers: int = 1
    # Faults of the network between the jobs and the brokers, through a proxy per broker
    # (bench/chaos/network.py): latency, connection resets, a black hole, a slow close in turn.
    network_faults: int = 0
    postgres_restarts: int = 1
    zombies: int = 3
    backfills: int = 10
    audits: int = 20
    # `eos-ingest maintain` runs (default retention) spread over the chaos phase; a killed one is
    # followed by one more that is not killed (what an operator does after a maintain died).
    maintains: int = 20
    maintain_kill_probability: float | None = None  # None: kill_probability
    partitions: int = 4
    added_partitions: int = 2
    batch_records: int = 50_000  # max_records_per_partition of the pipeline
    chaos_seconds: float = 3600.0  # how long producers and faults are spread over
    chaos_max_seconds: float = 0.0  # the chaos phase ends here even if quotas are not met (0: 2x)
    kill_probability: float = 0.6  # chance that a job is chosen for a kill (while kills are left)
    # Backfills and audits are at-least quotas: past them, both loops go on while kills are left
    # (every minute a backfill pair, an audit per commit), so kills do not hang on ingest alone.
    more_while_kills_left: bool = True
    max_minutes: float = 240.0  # the whole run, end check included
    job_timeout_s: float = 600.0
    master: str = "local[1]"
    seed: int = 0
    plant: str = "none"  # none | duplicate | missing
    table_format: str = "delta"  # the pipeline's output.format: delta | iceberg
    # An Iceberg table's catalog: jdbc (in the run's PostgreSQL) | rest (the project's REST catalog
    # server, behind the fault proxy).
    catalog: str = "jdbc"
    # A Delta table's storage: local (a folder) | s3a (an S3 server of the run's, Delta's commits
    # through the commit coordinator in the run's PostgreSQL, behind a TCP proxy).
    storage: str = "local"
    # Publishes whose outcome is unknown (bench/chaos/unknown_outcomes.py); None:
    # DEFAULT_UNKNOWN_PUBLISHES with a REST catalog or on s3a, else none.
    unknown_publishes: int | None = None
    home: Path | None = None
    results_dir: Path = REPO / "bench" / "results"
    keep_home: bool = False


@dataclass
class Tally:
    kills_by_phase: Counter[str] = field(default_factory=Counter)
    kills_by_kind: Counter[str] = field(default_factory=Counter)
    exits: Counter[str] = field(default_factory=Counter)
    broker_restarts: int = 0
    postgres_restarts: int = 0
    zombies: list[dict[str, Any]] = field(default_factory=list)
    batches_committed: set[int] = field(default_factory=set)
    runs: int = 0
    backfills: list[dict[str, Any]] = field(default_factory=list)
    audits: Counter[str] = field(default_factory=Counter)
    maintains: list[dict[str, Any]] = field(default_factory=list)
    vacuum_locks_released: int = 0  # locks of a killed maintain the harness released (the operator)
    backfills_abandoned: int = 0  # killed backfills' batches abandoned, as an operator does
    conflict_lines: int = 0
    vacuum_lock_lines: int = 0  # log lines of attempts refused a fence while maintain held the lock
    partitions_added: int = 0
    job_seconds: list[float] = field(default_factory=list)
    # Seconds of the jobs of each kind that ended on their own with exit 0: a random kill moment
    # is drawn over the duration of the kind's own jobs (an audit takes seconds, a run a minute).
    seconds_by_kind: dict[str, list[float]] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def kills(self) -> int:
        return sum(self.kills_by_phase.values())

    def note(self, text: str) -> None:
        with self.lock:
            self.events.append(f"{time.strftime('%H:%M:%S')} {text}")
        print(f"chaos: {text}", file=sys.stderr, flush=True)


class ChaosRun:
    def __init__(self, cfg: ChaosConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.stamp = stamp
        state = Path(os.environ.get("EOS_STATE_DIR") or REPO / ".state").resolve()
        self.home = (cfg.home or state / f"chaos-{stamp}-{os.getpid()}").resolve()
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        # The run's own state folder (GX, PostgreSQL, broker), sharing the jars of `make setup` and
        # its class-data archive of the job's driver JVM: without it each job of the run loaded and
        # verified its ~23,000 classes anew, ~3.5 s of CPU per start.
        paths.share_setup_state(self.home)
        self.env = {**os.environ, "EOS_STATE_DIR": str(self.home), "EOS_LOG_LEVEL": "INFO"}
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        self.procs = Processes(self.home, self.env, self.cfg.brokers, proxied=cfg.network_faults > 0)
        self.tally = Tally()
        self.stats = ProduceStats()
        self.stop = threading.Event()  # ends the chaos phase
        self.producing_done = threading.Event()
        self.records_reached = threading.Event()
        self.audit_queue: Queue[int] = Queue()
        self.started = time.monotonic()
        self.deadline = self.started + cfg.max_minutes * 60
        self.topic = f"chaos_{self.rng.randrange(16**8):08x}"
        self.kills_planned = 0
        self.lock = threading.Lock()
        self.thread_errors: list[str] = []
        self.quotas_were_met = False
        self.zombie_running = threading.Event()  # broker restarts wait for a zombie pair
        self.chaos_ended = 0.0
        self._lock_db: Any = None  # (SQLAlchemy engine, ControlStore) for the VACUUM lock, once needed
        self.rest: RestCatalog | None = None
        self.s3: S3Store | None = None
        self.dropper: TcpFaultProxy | None = None
        self.unknown: UnknownPublishes | None = None
        self.network: NetworkFaults | None = None

    # -- helpers --------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "eos_ingest.cli", *args, "--config", str(self.pipeline_file)]

    def take_kill(self) -> bool:
        """Reserve one of the kills still to do."""
        with self.lock:
            if self.kills_planned >= self.cfg.kills:
                return False
            self.kills_planned += 1
            return True

    def kills_left(self) -> bool:
        with self.lock:
            return self.kills_planned < self.cfg.kills

    def want_more(self, done: int, quota: int) -> bool:
        """Another backfill or audit: below its quota, or, past it, while kills are left."""
        return done < quota or (self.cfg.more_while_kills_left and quota > 0 and self.kills_left())

    def give_back_kill(self) -> None:
        with self.lock:
            self.kills_planned -= 1

    def typical_job_s(self, kind: str | None = None) -> float:
        """Median seconds of a successful ingest run, or of a job of `kind` once one has ended."""
        with self.tally.lock:
            done = list(self.tally.seconds_by_kind.get(kind or "", [])) or list(self.tally.job_seconds)
        return statistics.median(done) if done else 25.0

    def finish(self, job: Job, timeout_s: float | None = None) -> int:
        code = job.wait(timeout_s or self.cfg.job_timeout_s)
        if job.killed_in:
            label = "killed"
        elif code == -9 and self.stop.is_set():
            label = "stopped"  # ended by the end of the chaos phase
        else:
            label = str(code)
        with self.tally.lock:
            self.tally.exits[f"{job.kind}:{label}"] += 1
            self.tally.conflict_lines += job.conflict_lines
            self.tally.vacuum_lock_lines += job.vacuum_lock_lines
            if label == "0":
                self.tally.seconds_by_kind.setdefault(job.kind, []).append(time.monotonic() - job.started)
        if self.unknown is not None:
            self.unknown.settle(job, self.batch_status)
        return code

    def may_arm(self) -> bool:
        """Whether an unknown outcome may be armed now: not when the fault cannot tell the run's
        commit from another writer's and a backfill or maintain runs. The first run may be armed:
        it is never killed, so a short run on a loaded machine still gets its injection early."""
        if self.unknown is None:
            return False
        if not self.unknown.exclusive:
            return True
        with self.procs.lock:
            jobs = [j for j in self.procs.jobs if j.kind in ("backfill", "maintain")]
        return all(j.proc.poll() is not None for j in jobs)

    def wait_for_armed_fault(self) -> None:
        """A backfill or maintain waits while an exclusive fault is armed (may_arm)."""
        while self.unknown is not None and self.unknown.holds_writers() and not self.stop.is_set():
            self.stop.wait(0.5)

    def batch_status(self, batch_id: int) -> str | None:
        """The batch's status in the control DB now (None if it did not answer in a minute)."""
        from eos_ingest.control.store import ControlStore

        for _ in range(30):  # PostgreSQL may be restarting
            try:
                store = ControlStore(self.db_url)
                try:
                    return str(store.get_batch(batch_id).status.value)
                finally:
                    store.close()
            except Exception as exc:
                self.tally.note(f"batch {batch_id}: control DB: {exc!r}")
                time.sleep(2.0)
        return None

    def record_kill(self, job: Job, phase: str | None) -> bool:
        """Count a kill (True); a kill that missed gives its place back (False)."""
        if phase is None or self.stop.is_set():  # it had exited, or the chaos phase ended it
            self.give_back_kill()
            return False
        phase = PHASE_NAMES.get(phase, phase)
        with self.tally.lock:
            self.tally.kills_by_phase[phase] += 1
            self.tally.kills_by_kind[job.kind] += 1
        self.tally.note(f"killed {job.kind} (batch {job.batch_id}) in phase {phase}")
        return True

    def run_with_chaos(self, kind: str, argv: list[str], first_phase: str, may_kill: bool = True) -> Job:
        """Start a job; maybe kill it at a random moment, or when it reaches a chosen phase."""
        kill = (
            may_kill
            and not self.stop.is_set()
            and self.rng.random() < self.cfg.kill_probability
            and self.take_kill()
        )
        target = None
        extra_env: dict[str, str] = {}
        if kill and kind != "audit" and self.rng.random() < 0.4:
            # Only `eos-ingest run` logs its plan phase.
            target = self.rng.choice([t for t in TARGETS if kind == "run" or t != "plan"])
            if target == "written":
                extra_env[PAUSE_ENV] = str(self.home / f"pause-{time.monotonic_ns()}")
        job = self.procs.start(kind, argv, first_phase, extra_env)
        if not kill:
            # Only an ingest run: the next run resumes its batch (nothing reruns a backfill here).
            if (
                kind == "run"
                and self.unknown is not None
                and self.may_arm()
                and self.unknown.arm(job, self.elapsed())
            ):
                self.tally.note(f"run {job.log_path.name}: its publish will have an unknown outcome")
            self.finish(job)
            return job
        if target is None:
            delay = self.rng.uniform(0.2, 1.2 * self.typical_job_s(kind))
            try:
                job.proc.wait(timeout=delay)
            except Exception:
                self.record_kill(job, job.kill())
            else:
                self.give_back_kill()
        elif target == "written":
            pause = Path(extra_env[PAUSE_ENV])
            deadline = time.monotonic() + self.cfg.job_timeout_s
            while not pause.exists() and job.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if pause.exists():
                self.record_kill(job, job.kill())
                pause.unlink(missing_ok=True)
            else:
                self.give_back_kill()
        else:
            if job.wait_phase({target}, self.cfg.job_timeout_s):
                time.sleep(self.rng.uniform(0, 0.3))
                self.record_kill(job, job.kill())
            else:
                self.give_back_kill()
        self.finish(job)
        return job

    # -- setup ----------------------------------------------------------------------------------

    def setup(self) -> None:
        self.procs.broker_up()
        db_url = self.procs.postgres_up()
        jobs_bootstrap = self.procs.bootstrap
        if self.procs.proxied is not None:
            proxied_port, advertised_port = self.procs.proxied
            self.network = NetworkFaults(
                self.home, self.cfg.brokers, proxied_port, advertised_port, free_ports(1)[0],
                random.Random(self.cfg.seed + 3),
            )  # fmt: skip
            self.network.up()
            jobs_bootstrap = self.network.bootstrap
        admin = AdminClient({"bootstrap.servers": self.procs.bootstrap, "log_level": 2})
        replicas = min(self.cfg.brokers, 3)
        admin.create_topics([NewTopic(self.topic, self.cfg.partitions, replicas)])[self.topic].result(60)
        self.pipeline_file = self.home / "chaos.yaml"
        self.output = self.home / "tables" / "chaos"
        self.db_url = db_url
        output: dict[str, Any] = {"path": str(self.output), "partition_by": ["event_date"]}
        if self.cfg.table_format == "iceberg":  # its catalog: the JDBC catalog in the control DB
            output.update(format="iceberg", table=ICEBERG_TABLE)
        quota = (
            DEFAULT_UNKNOWN_PUBLISHES if self.cfg.unknown_publishes is None else self.cfg.unknown_publishes
        )
        moments = spread(quota, self.cfg.chaos_seconds * 0.8)
        control_db_url = db_url
        if self.cfg.table_format == "delta" and self.cfg.storage == "s3a":
            self.s3 = S3Store(self.home / "s3", self.env)
            table = f"{self.s3.up()}/chaos"
            self.env.update(self.s3.aws_env)
            output["path"] = table
            self.output = self.s3.local(table)  # the folder the end check reads
            # Every job's control DB connection (the commit coordinator's too) through the proxy.
            self.dropper = TcpFaultProxy(self.procs.pg_port)
            control_db_url = (
                make_url(db_url).set(port=self.dropper.port).render_as_string(hide_password=False)
            )
            self.unknown = DeltaCommitFaults(self.dropper, table, quota, moments)
        if self.cfg.table_format == "iceberg" and self.cfg.catalog == "rest":
            self.rest = RestCatalog(self.home / "iceberg-rest", self.env)
            output["catalog"] = {"type": "rest", "uri": self.rest.up(), "conn_id": CONN_ID}
            del output["path"]  # the server places the tables
            # Every job started from here on (spark-submit's too) signs in and has the REST timeout.
            self.env[CONN_ENV] = self.rest.connection()
            self.env.update(spark_defaults(self.home / "spark-conf", ICEBERG_CATALOG))
            assert self.rest.proxy is not None
            self.unknown = RestPublishFaults(self.rest.proxy, ICEBERG_TABLE.split(".")[-1], quota, moments)
        self.pipeline_file.write_text(
            yaml.safe_dump(
                {
                    "name": PIPELINE,
                    "topics": [self.topic],
                    "kafka": {"bootstrap.servers": jobs_bootstrap},
                    "start_from": "earliest",
                    "max_records_per_partition": self.cfg.batch_records,
                    "value": {"format": "json", "schema": SCHEMA},
                    "output": output,
                    "control_db_url": control_db_url,
                    "schedule": None,
                }
            )
        )
        rest = f", REST catalog {self.rest.server_uri} behind {output['catalog']['uri']}" if self.rest else ""
        if self.dropper is not None:
            rest = f", tables at {output['path']}, PostgreSQL behind the proxy at {self.dropper.port}"
        if self.network is not None:
            rest += f", the jobs' Kafka clients through the fault proxies at {jobs_bootstrap}"
        self.tally.note(
            f"home {self.home}, broker {self.procs.bootstrap}, postgres port {self.procs.pg_port}, "
            f"topic {self.topic}{rest}"
        )

    # -- threads --------------------------------------------------------------------------------

    def guarded(self, name: str, body) -> threading.Thread:  # type: ignore[no-untyped-def]
        def run() -> None:
            try:
                body()
            except Exception as exc:
                self.thread_errors.append(f"{name}: {type(exc).__name__}: {exc}")
                self.tally.note(f"thread {name} failed: {exc!r}")

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread

    def produce_loop(self) -> None:
        cfg = self.cfg
        writer = TxWriter(self.procs.bootstrap, self.topic, self.stats, random.Random(cfg.seed + 1))
        window = cfg.chaos_seconds * 0.7
        tx_size = max(50, min(2000, cfg.records // 200))
        rate = cfg.records / max(window, 1.0)
        added = False
        try:
            # --records is reached over 70% of --chaos-seconds; production goes on at a twentieth
            # of that rate until the chaos phase ends, so later kills still hit batches with records.
            while not self.stop.is_set():
                if self.stats.committed >= cfg.records:
                    self.records_reached.set()
                if not added and self.stats.committed >= cfg.records * 0.4 and cfg.added_partitions:
                    self.add_partitions()
                    added = True
                commit = self.rng.random() >= 0.1
                writer.run_transaction(tx_size, commit=commit, stop=self.stop, malformed_rate=0.001)
                # Pace: committed records follow the rate over the window, then a twentieth of it.
                done, extra_rate = self.stats.committed, rate / 20
                due_at = done / rate if done < cfg.records else window + (done - cfg.records) / extra_rate
                ahead = due_at - self.elapsed()
                if ahead > 0:
                    self.stop.wait(min(ahead, 5))
        finally:
            writer.close()
            self.producing_done.set()

    def hold_loop(self) -> None:
        """A second producer: transactions held open several seconds (across batch plans)."""
        writer = TxWriter(self.procs.bootstrap, self.topic, self.stats, random.Random(self.cfg.seed + 2))
        hold = max(3.0, min(30.0, self.cfg.chaos_seconds / 20))
        while not self.producing_done.is_set() and not self.stop.is_set():
            writer.run_transaction(
                self.rng.randint(20, 100), commit=True, stop=self.producing_done, hold_s=hold
            )
            self.producing_done.wait(self.rng.uniform(0, hold))
        writer.close()

    def add_partitions(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.procs.bootstrap, "log_level": 2})
        total = self.cfg.partitions + self.cfg.added_partitions
        admin.create_partitions([NewPartitions(self.topic, total)])[self.topic].result(60)
        self.tally.partitions_added = self.cfg.added_partitions
        self.tally.note(f"partitions of {self.topic}: {self.cfg.partitions} -> {total}")

    def ingest_loop(self) -> None:
        """`eos-ingest run --until-caught-up` again and again; at spread moments a zombie pair
        instead. No run is killed before the first batch commits, nor after a killed one that
        committed nothing, so batches commit and backfills find committed ranges."""
        zombie_times = spread(self.cfg.zombies, self.cfg.chaos_seconds, offset=0.3)
        tries = 0
        may_kill = False
        while not self.stop.is_set():
            if zombie_times and self.elapsed() >= zombie_times[0] and self.tally.batches_committed:
                tries += 1
                if self.zombie():
                    zombie_times.pop(0)
                    tries = 0
                elif tries >= 3:
                    # Nothing to plan (caught up), or an inconclusive pair, three times running:
                    # try again a minute later. Dropping the moment left the zombie quota unmet,
                    # and the chaos phase then ran on to its cap.
                    zombie_times[0] = self.elapsed() + 60.0
                    tries = 0
                continue
            argv = self.cli("run", "--master", self.cfg.master, "--until-caught-up")
            job = self.run_with_chaos("run", argv, "start", may_kill=may_kill)
            # A first run that found nothing to plan (the producers had not begun) does not open the
            # kills: a kill of the next one put the first commit, which the zombie pair, the
            # backfills and maintain wait for, a whole run later.
            self.after_run(job)
            may_kill = bool(self.tally.batches_committed) and (
                job.killed_in is None or bool(job.committed_ids)
            )
            if job.killed_in is None and job.proc.returncode == 0 and '"batch": null' in job.stdout:
                self.stop.wait(1.0)  # nothing new: do not spin
            elif job.proc.returncode not in (0, -9):
                self.stop.wait(1.0)

    def after_run(self, job: Job) -> None:
        with self.tally.lock:
            self.tally.runs += 1
        # A catch-up commits batch after batch: those before a kill count, and are audited.
        with self.tally.lock:
            self.tally.batches_committed.update(job.committed_ids)
            if job.killed_in is None and job.proc.returncode == 0 and job.committed_ids:
                self.tally.job_seconds.append(time.monotonic() - job.started)
        for batch_id in job.committed_ids:
            self.audit_queue.put(batch_id)
        if job.killed_in is None and job.proc.returncode != 0 and not self.stop.is_set():
            self.tally.note(f"{job.kind} exited {job.proc.returncode}: {job.tail(300)!r}")

    def zombie(self) -> bool:
        """Plan a batch and submit it twice at once: one attempt must commit, the other be
        fenced (exit 3) or find it committed already. True when it was tried."""
        from eos_ingest.config.pipeline import load_pipeline
        from eos_ingest.control.store import ControlStore
        from eos_ingest.service.operations import job_argv
        from eos_ingest.spark.session import spark_submit_env

        plan = self.procs.start("plan", self.cli("plan"), "plan")
        if self.finish(plan, 120) != 0:
            return False
        batch = json.loads(plan.stdout).get("batch")
        if not batch:
            return False
        batch_id = int(batch["batch_id"])
        # The service's own command (job_argv), so the pair gets the jars its table format needs.
        config = load_pipeline(self.pipeline_file)
        store = ControlStore(config.control_db_url)
        try:
            argv = job_argv(config, store.get_batch(batch_id), self.cfg.master, driver_memory="1g")
        finally:
            store.close()
        env = spark_submit_env(self.env)
        self.zombie_running.set()
        try:
            pair = [self.procs.start("zombie", argv, "submit", env, merge_output=True) for _ in range(2)]
            codes = sorted(self.finish(job) for job in pair)
        finally:
            self.zombie_running.clear()
        logs = " ".join(job.tail(20000) for job in pair)
        # A backfill never takes this batch's fence; "fenced" needs one attempt to end with exit 3.
        if codes == [0, 0]:
            outcome = "BOTH COMMITTED"
        elif 3 in codes:
            outcome = "fenced"
        elif 2 in codes and "not planned" in logs:
            outcome = "skipped"  # it took its fence after another attempt had committed
        elif codes == [0, 1] and "Concurrent" in logs:
            outcome = "lost a Delta conflict"  # its replace lost to the other's: nothing committed
        else:
            outcome = f"inconclusive {codes}"
        with self.tally.lock:
            self.tally.zombies.append({"batch_id": batch_id, "exit_codes": codes, "outcome": outcome})
            if 0 in codes:
                self.tally.batches_committed.add(batch_id)
        self.tally.note(f"zombie pair on batch {batch_id}: exits {codes} -> {outcome}")
        if 0 in codes:
            self.audit_queue.put(batch_id)
        return not outcome.startswith("inconclusive")

    def backfill_loop(self) -> None:
        from eos_ingest.control.store import ControlStore

        cfg = self.cfg
        times = spread(max(1, (cfg.backfills + 1) // 2), cfg.chaos_seconds)
        store = ControlStore(yaml.safe_load(self.pipeline_file.read_text())["control_db_url"])
        done = 0
        try:
            while self.want_more(done, cfg.backfills) and not self.stop.is_set():
                if not times and done >= cfg.backfills:
                    times.append(self.elapsed() + 60.0)  # past the quota: a pair a minute
                if not times or self.elapsed() < times[0]:
                    self.stop.wait(1.0)
                    continue
                try:
                    committed = {
                        tp.partition: o for tp, o in store.committed_offsets("chaos").items() if o > 1
                    }
                except Exception as exc:  # the database may be restarting
                    self.tally.note(f"backfill: control DB: {exc!r}")
                    self.stop.wait(2.0)
                    continue
                if not committed:
                    self.stop.wait(2.0)
                    continue
                times.pop(0)
                self.wait_for_armed_fault()
                partition = self.rng.choice(sorted(committed))
                end = committed[partition]
                # Two overlapping ranges at once (when two are left), beside the ingest loop.
                count = min(2, cfg.backfills - done) if done < cfg.backfills else 2
                threads = []
                start = self.rng.randrange(0, end - 1)
                stop_at = self.rng.randrange(start + 1, end + 1)
                for _ in range(count):
                    threads.append(
                        self.guarded(
                            "backfill-job", lambda p=partition, s=start, e=stop_at: self.one_backfill(p, s, e)
                        )
                    )
                    done += 1
                    # The second range overlaps the first: it starts inside it.
                    start = self.rng.randrange(start, stop_at)
                    stop_at = self.rng.randrange(start + 1, end + 1)
                for thread in threads:
                    thread.join(self.cfg.job_timeout_s + 60)
        finally:
            store.close()

    def one_backfill(self, partition: int, start: int, end: int) -> None:
        argv = self.cli(
            "backfill",
            "--topic", self.topic, "--partitions", str(partition),
            "--start-offset", str(start), "--end-offset", str(end),
            "--reason", "chaos: overlapping backfill", "--master", self.cfg.master,
        )  # fmt: skip
        job = self.run_with_chaos("backfill", argv, "start")
        entry = {
            "partition": partition,
            "start": start,
            "end": end,
            "exit": job.proc.returncode,
            "killed_in": job.killed_in,
        }
        with self.tally.lock:
            self.tally.backfills.append(entry)
        self.tally.note(f"backfill {partition} [{start}, {end}) -> {entry['exit']}")
        if job.killed_in is None and job.proc.returncode == 0 and job.batch_id is not None:
            self.audit_queue.put(job.batch_id)
        if job.killed_in is not None and job.batch_id is not None:
            entry["abandoned"] = self.abandon_killed_backfill(job)

    def abandon_killed_backfill(self, job: Job) -> bool:
        """What a CLI user does after a backfill died: `eos-ingest abandon` its batch (the Airflow
        DAG retries the same batch instead). Left planned, it would count as in flight for ever,
        and every VACUUM would keep its files. A batch the killed job had already committed stays
        committed (abandon refuses it, exit 1). True when the batch was abandoned."""
        deadline = time.monotonic() + 30
        while group_alive(job.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        argv = self.cli(
            "abandon", "--batch-id", str(job.batch_id), "--reason", "chaos: its backfill was killed"
        )
        for _ in range(10):  # PostgreSQL may be restarting
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
            if done.returncode == 0:
                with self.tally.lock:
                    self.tally.backfills_abandoned += 1
                self.tally.note(f"backfill batch {job.batch_id} (killed) abandoned")
                return True
            if "nothing to abandon" in done.stderr:
                return False
            time.sleep(3.0)
        self.tally.note(f"backfill batch {job.batch_id} (killed): abandon failed: {done.stderr[-300:]!r}")
        return False

    def audit_loop(self) -> None:
        done = 0
        while not self.stop.is_set() and self.want_more(done, self.cfg.audits):
            try:
                batch_id = self.audit_queue.get(timeout=1.0)
            except Empty:
                continue
            argv = [
                sys.executable,
                "-m",
                "eos_ingest.cli",
                "audit",
                "--config",
                str(self.pipeline_file),
                "--batch-id",
                str(batch_id),
            ]
            job = self.run_with_chaos("audit", argv, "audit")
            if self.stop.is_set() and not job.killed_in:
                return  # ended by the end of the chaos phase: no verdict
            done += 1
            with self.tally.lock:
                if job.killed_in:
                    self.tally.audits["killed"] += 1
                else:
                    self.tally.audits[{0: "passed", 1: "failed"}.get(job.proc.returncode, "error")] += 1
            if job.killed_in is None and job.proc.returncode == 1:
                self.tally.note(f"audit of batch {batch_id} FAILED: {job.stdout[-2000:]}")
            # Skip to the newest commits: an audit takes as long as a batch.
            while self.audit_queue.qsize() > 1:
                self.audit_queue.get_nowait()

    def maintain_loop(self) -> None:
        """`eos-ingest maintain` with the default retention at moments spread over the chaos phase
        (once a batch is committed), beside the ingest runs, backfills and audits; some are killed.
        A killed maintain is followed, after its lock is dealt with (release_dead_maintain_lock),
        by one that is not killed: what an operator does after a maintain died."""
        cfg = self.cfg
        rng = random.Random(cfg.seed + 3)
        chance = (
            cfg.kill_probability if cfg.maintain_kill_probability is None else cfg.maintain_kill_probability
        )
        wants = [rng.random() < chance for _ in range(cfg.maintains)]
        # One kill is held for the next maintain to be killed: ingest runs and backfills start
        # earlier and more often, and would otherwise use up a short run's few kills before the
        # first maintain. Holding the kills of every maintain from the start (as this did until
        # 2026-11-28) left a long run's other jobs without kills while maintains were still to
        # come: two full runs ended at their cap 2 kills short, both reserved for maintains.
        held = False

        def hold_next() -> None:
            nonlocal held
            if not held and any(wants):
                held = self.take_kill()

        times = spread(cfg.maintains, cfg.chaos_seconds, offset=0.6)
        # Killed maintains alternate: at the pause under the VACUUM lock, then at a random moment.
        under_lock = True
        try:
            hold_next()
            while wants and not self.stop.is_set():
                if self.elapsed() < times[0] or not self.tally.batches_committed:
                    self.stop.wait(1.0)
                    continue
                times.pop(0)
                if not wants.pop(0):
                    kill = False  # a held kill waits for the next maintain to be killed
                elif held:
                    kill, held = True, False
                else:
                    kill = self.take_kill()
                self.wait_for_armed_fault()
                entry = self.one_maintain(rng, kill=kill, under_lock=under_lock)
                under_lock ^= kill
                if entry["outcome"] == "killed" and not self.stop.is_set():
                    self.wait_for_armed_fault()
                    self.one_maintain(rng, kill=False, under_lock=False, follow_up=True)
                hold_next()
        finally:
            if held:
                self.give_back_kill()
            self.close_lock_db()

    def one_maintain(
        self, rng: random.Random, *, kill: bool, under_lock: bool, follow_up: bool = False
    ) -> dict[str, Any]:
        """One `eos-ingest maintain`; with `kill`, SIGKILLed at its pause under the VACUUM lock
        (`under_lock`) or at a random moment. Its entry goes to tally.maintains."""
        started_at = self.elapsed()
        pause = self.home / f"maintain-pause-{time.monotonic_ns()}" if kill and under_lock else None
        extra_env = {MAINTAIN_PAUSE_ENV: str(pause)} if pause else {}
        job = self.procs.start("maintain", self.cli("maintain"), "maintain", extra_env)
        holder = maintain_holder(job)
        killed, held_when_killed = False, None
        if kill:
            if pause is not None:
                deadline = time.monotonic() + self.cfg.job_timeout_s
                while not pause.exists() and job.proc.poll() is None and time.monotonic() < deadline:
                    if self.stop.wait(0.1):
                        break
                reached = pause.exists()
                if reached:
                    self.stop.wait(rng.uniform(0.5, 3.0))  # batch attempts meet the lock meanwhile
            else:
                try:
                    job.proc.wait(timeout=rng.uniform(0.2, 1.2 * self.typical_job_s("maintain")))
                    reached = False
                except subprocess.TimeoutExpired:
                    reached = True
            if reached:
                held_when_killed = self.vacuum_lock_holder() == holder
                where = "under the VACUUM lock" if held_when_killed else (
                    "at VACUUM, no lock taken (a batch in flight)" if pause else "before or without the VACUUM lock"
                )  # fmt: skip
                killed = self.record_kill(job, f"maintain {where}" if job.kill() else None)
            else:
                self.give_back_kill()
            if pause is not None:
                pause.unlink(missing_ok=True)
        code = self.finish(job)
        if killed:
            outcome = "killed"
        elif code == -9 and self.stop.is_set():
            outcome = "stopped"  # ended by the end of the chaos phase
        elif job.killed_in is not None:
            outcome = "timeout"  # killed by finish() after --job-timeout
        else:
            outcome = str(code)
        entry: dict[str, Any] = {
            "at": round(started_at, 1),
            "seconds": round(time.monotonic() - job.started, 1),
            "follow_up": follow_up,
            "outcome": outcome,
            "exit": code,
            "killed_holding_lock": held_when_killed if killed else None,
            "lock_released_by_harness": False,
        }
        if outcome not in ("0", "75", "killed", "stopped"):
            # Not expected of maintain: a finding, reported like a run's unexpected exit.
            entry["tail"] = job.tail(1500)
            self.tally.note(f"maintain exited {outcome} without being killed (a finding): {job.tail(300)!r}")
        if outcome in ("killed", "stopped", "timeout"):
            entry["lock_released_by_harness"] = self.release_dead_maintain_lock(
                job, wait_s=0.0 if self.stop.is_set() else rng.uniform(2.0, 8.0)
            )
        with self.tally.lock:
            self.tally.maintains.append(entry)
        self.tally.note(f"maintain{' (follow-up)' if follow_up else ''} -> {outcome}")
        return entry

    def release_dead_maintain_lock(self, job: Job, wait_s: float) -> bool:
        """A shortcut of the harness when a maintain died holding the pipeline's VACUUM lock: an
        operator waits out its lease (10 minutes, maintain_deletes.VACUUM_LOCK_LEASE; batch attempts exit
        75 and are retried meanwhile); the harness, which knows that the holder's process (and
        Spark's JVM, in its process group) is gone, so nothing can still delete files, releases that
        holder's lock (ControlStore.end_vacuum) so the run is not held up. Waiting `wait_s` first
        lets attempts meet the lock meanwhile.

        A new maintain does not do it by itself: begin_vacuum deletes the pipeline's lock row and
        inserts its own only when no batch is in flight, and the batch an attempt was refused a
        fence for stays planned, so with the ingest loop running a new maintain finds a batch in
        flight, takes no lock, and leaves the dead one's in place.
        True when a lock was released."""
        holder = maintain_holder(job)
        deadline = time.monotonic() + 30
        while group_alive(job.pid):
            if time.monotonic() > deadline:
                self.tally.note(f"maintain pid {job.pid}: its process group outlived the kill; lock left")
                return False
            time.sleep(0.2)
        if self.vacuum_lock_holder(attempts=30) != holder:
            return False
        self.stop.wait(wait_s)
        for attempt in range(30):  # PostgreSQL may be restarting
            try:
                _, store = self.lock_db()
                store.end_vacuum(PIPELINE, holder)
                break
            except Exception as exc:
                if attempt == 29:
                    self.tally.note(f"VACUUM lock of {holder}: not released: {exc!r}")
                    return False
                time.sleep(2.0)
        with self.tally.lock:
            self.tally.vacuum_locks_released += 1
        self.tally.note(f"VACUUM lock of the killed maintain ({holder}) released after {wait_s:.1f} s")
        return True

    def release_locks_of_dead_maintains(self) -> None:
        """Before the final ingest: a lock left by any maintain of this run (all are gone by now)."""
        with self.procs.lock:
            jobs = [job for job in self.procs.jobs if job.kind == "maintain" and job.proc.poll() is not None]
        holder = self.vacuum_lock_holder(attempts=30) if jobs else None
        for job in jobs:
            if holder == maintain_holder(job):
                self.release_dead_maintain_lock(job, wait_s=0.0)

    def lock_db(self) -> tuple[Any, Any]:
        """An engine of our own to read the lock row, and a ControlStore to release it."""
        from sqlalchemy import create_engine

        from eos_ingest.control.store import ControlStore

        with self.lock:
            if self._lock_db is None:
                url = yaml.safe_load(self.pipeline_file.read_text())["control_db_url"]
                timeout = {"connect_timeout": 5} if url.startswith("postgresql") else {}
                engine = create_engine(url, pool_pre_ping=True, connect_args=timeout)
                self._lock_db = (engine, ControlStore(url))
            return self._lock_db

    def close_lock_db(self) -> None:
        with self.lock:
            if self._lock_db is not None:
                engine, store = self._lock_db
                engine.dispose()
                store.close()
                self._lock_db = None

    def vacuum_lock_holder(self, attempts: int = 1) -> str | None:
        """The holder of the pipeline's VACUUM lock row (expired or not); None if there is none or
        the database did not answer."""
        from sqlalchemy import select

        from eos_ingest.control.schema import vacuum_locks

        for attempt in range(attempts):
            try:
                engine, _ = self.lock_db()
                with engine.connect() as conn:
                    query = select(vacuum_locks.c.holder).where(vacuum_locks.c.pipeline == PIPELINE)
                    return conn.execute(query).scalar_one_or_none()
            except Exception as exc:
                if attempt + 1 == attempts:
                    self.tally.note(f"VACUUM lock: control DB: {exc!r}")
                    return None
                time.sleep(2.0)
        return None

    def fault_loop(self) -> None:
        cfg = self.cfg
        plan = sorted(
            [(t, "broker") for t in spread(cfg.broker_restarts, cfg.chaos_seconds)]
            + [(t, "postgres") for t in spread(cfg.postgres_restarts, cfg.chaos_seconds, offset=0.5)]
            + [(t, "network") for t in spread(cfg.network_faults, cfg.chaos_seconds, offset=0.25)]
        )
        for at, what in plan:
            # Not before the first commit: the zombie pair, the backfills and maintain wait for it,
            # so a restart under the first run held all of them back (the short run's first commit
            # came at 65 to 120 s); after it, a restart meets those jobs and the runs alike.
            while (self.elapsed() < at or not self.tally.batches_committed) and not self.stop.is_set():
                self.stop.wait(0.5)
            # A zombie pair should reach its commits: a restart waits for it a little (30 s).
            waited = time.monotonic()
            while self.zombie_running.is_set() and time.monotonic() - waited < 30 and not self.stop.is_set():
                self.stop.wait(0.5)
            if self.stop.is_set():
                return
            if what == "network":
                assert self.network is not None
                done = self.network.inject(len(self.network.injected), self.stop)
                self.tally.note(f"network fault #{len(self.network.injected)}: {done}")
            elif what == "broker":
                node, role = kill_target(self.procs.cluster, self.topic, self.tally.broker_restarts, self.rng)
                self.procs.broker_kill9(node)
                self.stop.wait(self.rng.uniform(1, 5))
                self.procs.broker_up()
                self.tally.broker_restarts += 1
                self.tally.note(f"broker kill -9 ({role}) and restart #{self.tally.broker_restarts}")
            else:
                self.procs.postgres_down()
                self.stop.wait(self.rng.uniform(1, 3))
                self.procs.postgres_up()
                self.tally.postgres_restarts += 1
                self.tally.note(f"postgres restart #{self.tally.postgres_restarts}")

    # -- the run --------------------------------------------------------------------------------

    def quotas_met(self) -> bool:
        cfg, t = self.cfg, self.tally
        with t.lock:
            zombies = sum(1 for z in t.zombies if not z["outcome"].startswith("inconclusive"))
            backfills = len(t.backfills)
            # Scheduled maintains that ended (killed or not). The follow-up of a killed one is not
            # waited for: it takes as long as a maintain, and the end of the chaos phase may stop it
            # (the final ingest then releases a lock it left, release_locks_of_dead_maintains).
            maintains = sum(1 for m in t.maintains if not m["follow_up"] and m["outcome"] != "stopped")
        return (
            self.records_reached.is_set()
            and t.kills >= cfg.kills
            and t.broker_restarts >= cfg.broker_restarts
            and t.postgres_restarts >= cfg.postgres_restarts
            and zombies >= cfg.zombies
            and backfills >= cfg.backfills
            and maintains >= cfg.maintains
            and (self.unknown is None or len(self.unknown.entries) >= self.unknown.quota)
            and (self.network is None or len(self.network.injected) >= cfg.network_faults)
        )

    def chaos_phase(self) -> None:
        threads = [
            self.guarded("produce", self.produce_loop),
            self.guarded("hold", self.hold_loop),
            self.guarded("ingest", self.ingest_loop),
            self.guarded("backfill", self.backfill_loop),
            self.guarded("audit", self.audit_loop),
            self.guarded("maintain", self.maintain_loop),
            self.guarded("faults", self.fault_loop),
        ]
        # The chaos phase may run past chaos_seconds to reach its quotas, up to a reserve of the
        # overall cap kept for the end check.
        cap = self.cfg.chaos_max_seconds or 2 * self.cfg.chaos_seconds
        cap = min(cap, self.cfg.max_minutes * 60 - max(120.0, 0.25 * self.cfg.max_minutes * 60))
        while not (self.elapsed() >= self.cfg.chaos_seconds and self.quotas_met()):
            if self.elapsed() > cap:
                self.tally.note(f"chaos phase ends at its cap ({cap:.0f} s) before every quota was met")
                break
            time.sleep(0.5)
        self.quotas_were_met = self.quotas_met()
        self.stop.set()
        self.chaos_ended = time.monotonic()
        # In-flight jobs end here (not counted as kills), but a zombie pair runs to its verdict.
        self.procs.kill_jobs(spare={"zombie", "plan"})
        for thread in threads:
            thread.join(timeout=self.cfg.job_timeout_s + 60)

    def catch_up(self) -> dict[str, Any]:
        """No chaos: make sure broker and DB are up, then `eos-ingest run` until nothing is new."""
        if self.network is not None:
            self.network.clear()
        self.procs.broker_up()
        self.procs.postgres_up()
        self.release_locks_of_dead_maintains()
        self.close_lock_db()
        runs = 0
        while time.monotonic() < self.deadline:
            argv = self.cli("run", "--master", self.cfg.master, "--until-caught-up")
            job = self.procs.start("final-run", argv, "plan")
            code = self.finish(job, max(60.0, min(self.cfg.job_timeout_s, self.deadline - time.monotonic())))
            runs += 1
            if code == 0 and '"batch": null' in job.stdout:
                open_partitions = check.open_transactions(self.procs.bootstrap, self.topic)
                if not open_partitions:
                    return {"final_runs": runs}
                # A transaction of a producer that failed is still open: wait for its timeout.
                self.tally.note(f"final run: transactions still open on partitions {open_partitions}")
                time.sleep(5)
                continue
            with self.tally.lock:
                self.tally.batches_committed.update(job.committed_ids)
            if code != 0:
                self.tally.note(f"final run exited {code}: {job.tail(500)!r}")
                time.sleep(2)
        raise TimeoutError("chaos: the final ingest did not catch up before --max-minutes")

    def end_check(self) -> dict[str, Any]:
        planted = 0
        iceberg = self.cfg.table_format == "iceberg"
        catalog = self.rest.pyiceberg_properties() if self.rest else self.db_url
        if self.cfg.plant != "none" and iceberg:
            planted = check.plant_iceberg(catalog, ICEBERG_CATALOG, ICEBERG_TABLE, self.cfg.plant)
        elif self.cfg.plant == "duplicate":
            planted = check.plant_duplicate(self.output)
        elif self.cfg.plant == "missing":
            planted = check.plant_missing(self.output)
        verify_job = self.procs.start("verify", self.cli("verify"), "verify")
        code = self.finish(verify_job, 900)
        try:
            verify = json.loads(verify_job.stdout)
        except json.JSONDecodeError:
            verify = {"error": verify_job.tail(2000)}
        verify["exit"] = code
        expected = check.committed_identities(self.procs.bootstrap, self.topic)
        if iceberg:
            tables = [ICEBERG_TABLE, f"{ICEBERG_TABLE}_quarantine"]
            found = check.iceberg_identities(catalog, ICEBERG_CATALOG, tables)
        else:
            found = check.table_identities([self.output, Path(f"{self.output}_quarantine")])
        own = check.compare(expected, found)
        per_partition = Counter(p for _, p, _ in expected)
        own["per_partition"] = {str(p): n for p, n in sorted(per_partition.items())}
        outcome = {"planted_rows": planted, "verify": verify, "independent": own}
        if self.unknown is not None:
            outcome["unknown_publishes"] = self.unknown.report(self.batch_status)
        if self.network is not None:
            outcome["network_faults"] = self.network.report()
        return outcome

    def result(self, outcome: dict[str, Any]) -> dict[str, Any]:
        t = self.tally
        own = outcome.get("independent", {})
        verify = outcome.get("verify", {})
        zombies_fenced = sum(1 for z in t.zombies if z["outcome"] == "fenced")
        return {
            "date": self.stamp,
            "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.cfg).items()},
            "wall_seconds": round(self.elapsed(), 1),
            "chaos_seconds": round(self.chaos_ended - self.started, 1) if self.chaos_ended else None,
            "quotas_met": self.quotas_were_met,
            "records": {**self.stats.to_dict(), "kafka_read_committed": own.get("expected")},
            "kills": t.kills,
            "kills_by_phase": dict(sorted(t.kills_by_phase.items())),
            "kills_by_kind": dict(t.kills_by_kind),
            "broker_restarts": t.broker_restarts,
            "postgres_restarts": t.postgres_restarts,
            "partitions_added": t.partitions_added,
            "zombies": t.zombies,
            "zombies_fenced": zombies_fenced,
            "zombies_skipped": sum(1 for z in t.zombies if z["outcome"] == "skipped"),
            "zombies_conflicted": sum(1 for z in t.zombies if z["outcome"] == "lost a Delta conflict"),
            "conflicts_retried": t.conflict_lines,
            "runs": t.runs,
            "batches": len(t.batches_committed),
            "backfills": t.backfills,
            "audits": dict(t.audits),
            "maintains": maintain_counts(t.maintains),
            "maintain_runs": t.maintains,
            "vacuum_locks_released": t.vacuum_locks_released,
            "backfills_abandoned": t.backfills_abandoned,
            "attempts_refused_by_vacuum_lock_lines": t.vacuum_lock_lines,
            "exits": dict(sorted(t.exits.items())),
            "median_job_seconds": round(self.typical_job_s(), 1),
            "duplicates": max(own.get("duplicates", 0), verify.get("duplicates", 0)),
            "missing": max(own.get("missing", 0), verify.get("missing", 0)),
            "unexpected": max(own.get("unexpected", 0), verify.get("unexpected", 0)),
            **outcome,
            "thread_errors": self.thread_errors,
            "events": t.events[-200:],
            "home": str(self.home),
        }


def maintain_holder(job: Job) -> str:
    """The holder name maintain_tables writes into the VACUUM lock: host and the CLI's pid."""
    return f"{socket.gethostname()} pid {job.pid}"


def maintain_counts(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Maintains started, and how they ended: 0, 75 (retriable: VACUUM skipped for a batch in
    flight, an OPTIMIZE that kept losing, the database), killed by the run, stopped by the end of
    the chaos phase, any other exit (a finding), and the kills that left the VACUUM lock."""
    outcomes = Counter(str(e["outcome"]) for e in entries)
    return {
        "started": len(entries),
        "finished": outcomes["0"],
        "retriable": outcomes["75"],
        "killed": outcomes["killed"],
        "killed_holding_lock": sum(1 for e in entries if e.get("killed_holding_lock")),
        "stopped": outcomes["stopped"],
        "other_exits": {
            k: n for k, n in sorted(outcomes.items()) if k not in ("0", "75", "killed", "stopped")
        },
    }


def spread(count: int, seconds: float, offset: float = 1.0) -> list[float]:
    """`count` moments spread evenly over `seconds` (none at 0 or at the end)."""
    return [seconds * (i + offset) / (count + 1) for i in range(count)]


def ok(result: dict[str, Any]) -> bool:
    verify = result.get("verify", {})
    unknown = result.get("unknown_publishes") or {"quota": 0, "injected": 0, "as_expected": 0}
    network = result.get("network_faults") or {"injected": 0}
    return (
        result.get("error") is None
        and network["injected"] >= result["config"]["network_faults"]
        and unknown["injected"] >= unknown["quota"]
        and unknown["as_expected"] == unknown["injected"]
        and result["duplicates"] == 0
        and result["missing"] == 0
        and result["unexpected"] == 0
        and verify.get("ok") is True
        and not any(z["outcome"] == "BOTH COMMITTED" for z in result["zombies"])
    )


def run_chaos(cfg: ChaosConfig) -> dict[str, Any]:
    """One chaos run; returns the result (also written to results_dir/chaos-<stamp>.json)."""
    run = ChaosRun(cfg)
    outcome: dict[str, Any] = {}
    try:
        run.setup()
        run.chaos_phase()
        outcome.update(run.catch_up())
        outcome.update(run.end_check())
    except BaseException as exc:
        outcome["error"] = f"{type(exc).__name__}: {exc}"
        run.stop.set()
        if not isinstance(exc, Exception):
            raise
    finally:
        run.stop.set()
        problems = run.procs.cleanup()
        if run.dropper is not None:
            run.dropper.close()
        if run.network is not None:
            run.network.down()
        if run.s3 is not None:
            try:
                run.s3.down()
            except Exception as exc:
                problems.append(f"s3: {exc}")
        if run.rest is not None:
            try:
                run.rest.down()
            except Exception as exc:
                problems.append(f"iceberg-rest: {exc}")
        if problems:
            outcome["cleanup_problems"] = problems
        result = run.result(outcome)
        result["ok"] = ok(result)
        cfg.results_dir.mkdir(parents=True, exist_ok=True)
        path = cfg.results_dir / f"chaos-{run.stamp}.json"
        path.write_text(json.dumps(result, indent=2, default=str))
        summary = {
            k: result.get(k)
            for k in ("date", "ok", "wall_seconds", "kills", "kills_by_phase", "broker_restarts",
                      "postgres_restarts", "zombies_fenced", "batches", "maintains", "duplicates", "missing",
                      "unexpected")
        }  # fmt: skip
        if "unknown_publishes" in result:
            summary["unknown_publishes"] = {
                k: result["unknown_publishes"][k] for k in ("injected", "by_kind", "as_expected")
            }
        summary["catalog"] = cfg.catalog if cfg.table_format == "iceberg" else None
        if "network_faults" in result:
            summary["network_faults"] = result["network_faults"]["by_kind"]
        summary["brokers"] = cfg.brokers
        summary["records"] = cfg.records
        summary["file"] = path.name
        with (cfg.results_dir / "chaos.jsonl").open("a") as out:
            out.write(json.dumps(summary) + "\n")
        result["result_file"] = str(path)
        if result["ok"] and not cfg.keep_home:
            shutil.rmtree(run.home, ignore_errors=True)
    return result


def parse_args(argv: list[str] | None = None) -> ChaosConfig:
    d = ChaosConfig()
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    p.add_argument(
        "--records",
        type=int,
        default=d.records,
        help="committed records to produce at least (then a twentieth of the rate until the chaos phase ends)",
    )
    p.add_argument(
        "--kills", type=int, default=d.kills, help="SIGKILLs of jobs (run, backfill, audit, maintain)"
    )
    p.add_argument("--broker-restarts", type=int, default=d.broker_restarts)
    p.add_argument("--brokers", type=int, default=d.brokers,
                   help="Kafka nodes: more than 1 runs a cluster (stack/cluster.sh) whose broker kills "
                   "take leaders, coordinators and the controller in turn")  # fmt: skip
    p.add_argument("--network-faults", type=int, default=d.network_faults,
                   help="faults of the network between the jobs and the brokers, through a proxy per "
                   "broker: latency, connection resets, a black hole and a slow close in turn")  # fmt: skip
    p.add_argument("--postgres-restarts", type=int, default=d.postgres_restarts)
    p.add_argument("--zombies", type=int, default=d.zombies, help="planned batches submitted twice at once")
    p.add_argument("--backfills", type=int, default=d.backfills, help="backfills to run at least")
    p.add_argument(
        "--quotas-only",
        dest="more_while_kills_left",
        action="store_false",
        help="no backfills or audits past their quotas (by default both go on while kills are left)",
    )
    p.add_argument("--audits", type=int, default=d.audits, help="audits to run at least (after commits)")
    p.add_argument("--maintains", type=int, default=d.maintains,
                   help="`eos-ingest maintain` runs (default retention) spread over the chaos phase; "
                   "a killed one is followed by one more")  # fmt: skip
    p.add_argument("--maintain-kill-probability", type=float, default=d.maintain_kill_probability,
                   help="chance that a maintain is killed (default --kill-probability); its kills "
                   "come out of --kills")  # fmt: skip
    p.add_argument("--partitions", type=int, default=d.partitions)
    p.add_argument("--added-partitions", type=int, default=d.added_partitions)
    p.add_argument(
        "--batch-records", type=int, default=d.batch_records, help="max records per partition a batch"
    )
    p.add_argument("--chaos-seconds", type=float, default=d.chaos_seconds, help="length of the chaos phase")
    p.add_argument("--chaos-max-seconds", type=float, default=d.chaos_max_seconds,
                   help="end the chaos phase here even if quotas are not met (default 2x --chaos-seconds)")  # fmt: skip
    p.add_argument("--kill-probability", type=float, default=d.kill_probability)
    p.add_argument("--max-minutes", type=float, default=d.max_minutes, help="cap of the whole run")
    p.add_argument("--job-timeout", type=float, default=d.job_timeout_s, dest="job_timeout_s")
    p.add_argument("--master", default=d.master)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--plant", choices=("none", "duplicate", "missing"), default=d.plant,
                   help="break the table before the end check, to prove it catches it")  # fmt: skip
    p.add_argument(
        "--format",
        choices=("delta", "iceberg"),
        default=d.table_format,
        dest="table_format",
        help="the pipeline's output.format (iceberg: in the catalog --catalog names)",
    )
    p.add_argument("--catalog", choices=("jdbc", "rest"), default=d.catalog,
                   help="an Iceberg table's catalog: jdbc (the run's PostgreSQL) or rest (the REST "
                   "catalog server behind the fault proxy)")  # fmt: skip
    p.add_argument("--unknown-publishes", type=int, default=d.unknown_publishes,
                   help="publishes of ingest runs whose answer is lost (the proxy's drop, 503, slow in "
                   "turn; on s3a, the commit coordinator's connection dropped after its entry; "
                   f"default {DEFAULT_UNKNOWN_PUBLISHES} with --catalog rest or --storage s3a, else 0)")  # fmt: skip
    p.add_argument("--storage", choices=("local", "s3a"), default=d.storage,
                   help="a Delta table's storage: a local folder, or s3a on the run's own S3 server "
                   "with the commit coordinator in its PostgreSQL (behind a TCP proxy)")  # fmt: skip
    p.add_argument("--home", type=Path, help="run folder (default .state/chaos-<stamp>-<pid>)")
    p.add_argument("--results-dir", type=Path, default=d.results_dir)
    p.add_argument("--keep-home", action="store_true", help="keep the run folder after a clean run")
    return ChaosConfig(**vars(p.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    import signal

    # Ctrl-C and SIGTERM both unwind through run_chaos's cleanup.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    result = run_chaos(parse_args(argv))
    brief = {k: result.get(k) for k in ("ok", "wall_seconds", "kills", "kills_by_phase", "broker_restarts",
                                        "postgres_restarts", "zombies_fenced", "batches", "maintains",
                                        "duplicates", "missing", "unexpected", "unknown_publishes",
                                        "network_faults", "error", "result_file")}  # fmt: skip
    if brief.get("unknown_publishes"):
        brief["unknown_publishes"] = {k: v for k, v in brief["unknown_publishes"].items() if k != "entries"}
    if brief.get("network_faults"):
        brief["network_faults"] = {k: v for k, v in brief["network_faults"].items() if k != "faults"}
    print(json.dumps(brief, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
