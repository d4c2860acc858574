"""The processes a chaos run starts: its own broker (stack/stack.sh), its own PostgreSQL
(scripts/postgres.sh) and job subprocesses, each job in a process group of its own.

Everything started here is registered in a `Processes` registry whose `cleanup()` kills every job
group and stops the broker and the database; the harness calls it in a `finally`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from bench.chaos.cluster import KafkaCluster, free_base

REPO = Path(__file__).resolve().parents[2]
STACK = REPO / "stack" / "stack.sh"
POSTGRES = REPO / "scripts" / "postgres.sh"

# "batch 7: phase read" (job and CLI), "pipeline chaos: phase plan" (CLI), "batch 7 committed: ...".
PHASE_LINE = re.compile(r"(?:batch (\d+)|pipeline \S+): phase (\w+)")
COMMITTED_LINE = re.compile(r"batch (\d+) committed")
# Delta conflicts that another part of the project retries: counted loosely, per line.
CONFLICT_LINE = re.compile(r"conflict.*retr|retr.*conflict", re.IGNORECASE)
# An attempt refused its fence while `maintain` holds the VACUUM lock (ControlStore.take_fence).
VACUUM_LOCK_LINE = re.compile(r"is vacuuming the tables of pipeline")


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: every socket is held until all are bound (closing each before
    the next bind could hand out one port twice, and the broker refuses two listeners on it)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. Zombies do not count: an orphaned JVM waiting
    for a parent that does not reap it (pid 1 of some containers) runs no code. Reads /proc; where
    there is none, kill(0) of the group answers (zombies included)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we looked
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class Job:
    """One subprocess in its own session (so SIGKILL of its group kills the JVM and Python
    driver too); stdout is kept, stderr is followed line by line for phase lines and copied to a
    log file."""

    def __init__(
        self,
        kind: str,
        argv: Sequence[str],
        env: dict[str, str],
        log_path: Path,
        first_phase: str,
        merge_output: bool = False,
    ) -> None:
        self.kind = kind
        self.merge_output = merge_output
        self.log_path = log_path
        self.phase = first_phase
        self.phases: list[str] = [first_phase]
        self.batch_id: int | None = None
        self.committed_ids: list[int] = []  # batches the job committed (a catch-up commits several)
        self.conflict_lines = 0
        self.vacuum_lock_lines = 0
        self.killed_in: str | None = None
        self.started = time.monotonic()
        self._phase_seen = threading.Condition()
        self._stdout: list[str] = []
        self.proc = subprocess.Popen(
            list(argv),
            env=env,
            cwd=str(REPO),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # spark-submit sends the Python driver's logging to its stdout: follow both as one.
            stderr=subprocess.STDOUT if merge_output else subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self._readers = [threading.Thread(target=self._follow, daemon=True)]
        if not merge_output:
            self._readers.append(threading.Thread(target=self._collect_stdout, daemon=True))
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _follow(self) -> None:
        stream = self.proc.stdout if self.merge_output else self.proc.stderr
        assert stream is not None
        with self.log_path.open("a") as log:
            for line in stream:
                log.write(line)
                if self.merge_output:
                    self._stdout.append(line)
                if CONFLICT_LINE.search(line):
                    self.conflict_lines += 1
                if VACUUM_LOCK_LINE.search(line):
                    self.vacuum_lock_lines += 1
                match = PHASE_LINE.search(line)
                committed = COMMITTED_LINE.search(line)
                if match or committed:
                    with self._phase_seen:
                        if match:
                            if match.group(1):
                                self.batch_id = int(match.group(1))
                            self.phase = match.group(2)
                        else:
                            self.phase = "committed"
                            self.committed_ids.append(int(committed.group(1)))
                        self.phases.append(self.phase)
                        self._phase_seen.notify_all()
        with self._phase_seen:
            self._phase_seen.notify_all()

    def _collect_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._stdout.append(line)

    def wait_phase(self, phases: set[str], timeout_s: float) -> bool:
        """Wait until the job reports one of `phases` (True), or exits or times out (False)."""
        deadline = time.monotonic() + timeout_s
        with self._phase_seen:
            while self.phase not in phases:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return self.phase in phases
                self._phase_seen.wait(min(left, 0.2))
            return True

    def kill(self) -> str | None:
        """SIGKILL the whole process group; returns the phase it hit (None if already gone)."""
        if self.proc.poll() is not None:
            return None
        with self._phase_seen:
            phase = self.phase
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        self.killed_in = phase
        return phase

    def wait(self, timeout_s: float) -> int:
        """Exit code; a job still running after timeout_s is killed (and reported as -9)."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait(timeout=30)
        for reader in self._readers:
            reader.join(timeout=10)
        return int(self.proc.returncode)

    @property
    def stdout(self) -> str:
        return "".join(self._stdout)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class Processes:
    """Registry of everything a run started, and its cleanup."""

    def __init__(self, home: Path, env: dict[str, str], brokers: int = 1, proxied: bool = False) -> None:
        self.home = home
        self.env = env
        self.jobs: list[Job] = []
        self.lock = threading.Lock()
        # Every port in one run below the ephemeral range (free_base): a port picked inside it was
        # taken by another process's client socket before the broker bound it, once in make test
        # ("Address already in use"). A cluster's nodes take 2 (4 with proxies) ports each.
        per_node = (4 if proxied else 2) if brokers > 1 else 0
        base = free_base(5 + per_node * brokers)
        self.kafka_port, self.controller_port, self.pg_port = base, base + 1, base + 2
        # proxied: each broker also has a PROXIED listener at proxied_port (+ i - 1 on a cluster)
        # that advertises advertised_port, where the fault proxy listens (bench/chaos/network.py).
        self.proxied: tuple[int, int] | None = (base + 3, base + 4) if proxied else None
        # More than one broker: a cluster of stack/cluster.sh (bench/chaos/cluster.py) instead.
        self.cluster: KafkaCluster | None = None
        if brokers > 1:
            first = base + 5
            if proxied:
                self.proxied = (first + 2 * brokers, first + 3 * brokers)
            self.cluster = KafkaCluster(
                home / "kafka-cluster",
                first,
                first + brokers,
                brokers,
                proxied_port=self.proxied[0] if self.proxied else None,
                proxied_advertised_port=self.proxied[1] if self.proxied else None,
            )
        self.broker_started = False
        self.killed_node = 0  # a cluster's node broker_kill9 killed, which broker_up starts again
        self.postgres_started = False

    # -- jobs -----------------------------------------------------------------------------------

    def start(
        self,
        kind: str,
        argv: Sequence[str],
        first_phase: str,
        extra_env: dict[str, str] | None = None,
        merge_output: bool = False,
    ) -> Job:
        with self.lock:
            number = len(self.jobs)
            log = self.home / "logs" / f"{number:05d}-{kind}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            job = Job(kind, argv, {**self.env, **(extra_env or {})}, log, first_phase, merge_output)
            self.jobs.append(job)
            return job

    def kill_jobs(self, spare: set[str] | None = None) -> None:
        """SIGKILL every job group still running, except jobs of the `spare` kinds."""
        with self.lock:
            jobs = [job for job in self.jobs if job.kind not in (spare or set())]
        for job in jobs:
            if job.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.proc.pid, signal.SIGKILL)
        for job in jobs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.proc.wait(timeout=30)

    # -- broker ---------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap if self.cluster else f"127.0.0.1:{self.kafka_port}"

    def _stack(self, command: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        env = {
            **self.env,
            "KAFKA_PORT": str(self.kafka_port),
            "KAFKA_CONTROLLER_PORT": str(self.controller_port),
            "KAFKA_HOME_DIR": str(self.home / "kafka"),
        }
        if self.proxied is not None:
            env["KAFKA_PROXIED_PORT"], env["KAFKA_PROXIED_ADVERTISED_PORT"] = map(str, self.proxied)
        return subprocess.run(
            [str(STACK), command], env=env, text=True, capture_output=True, timeout=timeout_s, check=False
        )

    def broker_up(self) -> None:
        self.broker_started = True
        if self.cluster is None:
            done = self._stack("up")
        elif self.killed_node:  # only that node: a failed `up` would stop the whole cluster
            done = self.cluster.run("start", str(self.killed_node))
        else:
            done = self.cluster.run("up")
        self.killed_node = 0
        if done.returncode != 0:
            raise RuntimeError(f"chaos: the broker did not start:\n{done.stdout}\n{done.stderr}")

    def broker_kill9(self, node: int = 1) -> None:
        """kill -9 of the broker's JVM (of a cluster's `node`; the data folder stays); broker_up()
        restarts it."""
        pid_file = (
            self.cluster.home / f"node-{node}" / "kafka.pid"
            if self.cluster
            else self.home / "kafka" / "kafka.pid"
        )
        pid = int(pid_file.read_text().strip())
        self.killed_node = node if self.cluster else 0
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        # The zombie entry of a child of ours would keep kill -0 true: stack.sh checks the pid file.
        pid_file.unlink(missing_ok=True)

    def broker_down(self) -> None:
        if self.broker_started:
            self.cluster.run("down", timeout_s=90) if self.cluster else self._stack("down", timeout_s=60)

    # -- PostgreSQL -----------------------------------------------------------------------------

    def _postgres(self, command: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "EOS_PG_PORT": str(self.pg_port)}
        return subprocess.run(
            [str(POSTGRES), command], env=env, text=True, capture_output=True, timeout=timeout_s, check=False
        )

    def postgres_up(self) -> str:
        self.postgres_started = True
        done = self._postgres("up")
        if done.returncode != 0:
            raise RuntimeError(f"chaos: PostgreSQL did not start:\n{done.stdout}\n{done.stderr}")
        return self._postgres("url").stdout.strip()

    def postgres_down(self) -> None:
        if self.postgres_started:
            done = self._postgres("down", timeout_s=90)
            if done.returncode != 0:
                raise RuntimeError(f"chaos: PostgreSQL did not stop:\n{done.stderr}")

    def cleanup(self) -> list[str]:
        """Kill every job group, stop the broker and PostgreSQL; returns what went wrong."""
        problems: list[str] = []
        self.kill_jobs()
        for name, stop in (("broker", self.broker_down), ("postgres", self.postgres_down)):
            try:
                stop()
            except Exception as exc:  # cleanup goes on with the others
                problems.append(f"{name}: {exc}")
        return problems
