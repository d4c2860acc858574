"""Publishes whose outcome the job cannot know (issue 48): the publish is applied, its answer lost.

The harness picks an ingest run it does not kill and arms a fault for that run's publish; the
run must exit 75 with its batch still planned in the control DB, and the next attempt at the batch
must commit it. Each injection is an entry of the result's `unknown_publishes`; the end check asks
that every one fired, was retriable, stayed planned and was committed by the next attempt.

On a Delta table on s3a (DeltaCommitFaults) the fault is a TCP proxy's in front of PostgreSQL
(bench/tcp_fault_proxy.py, bench/chaos/delta_coordinator.py): the commit coordinator's connection
is closed right after its commit entry was written, and its retry refused.

On an Iceberg table in a REST catalog (RestPublishFaults) the fault is the proxy's
(bench/fault_proxy.py), in front of the real server, taking the commit that fast-forwards `main`
to the batch's branch: `drop` (the connection closed after the server applied it), `503` (a
gateway's answer instead of the server's) and `slow` (the server's answer after the client's
socket timeout), in turn.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bench import fault_proxy as proxies
from bench.chaos.delta_coordinator import REFUSE_S, commit_entry_of
from bench.chaos.procs import Job
from bench.tcp_fault_proxy import TcpFaultProxy

KINDS = ("drop", "503", "slow")
# The jobs' REST client gives up after CLIENT_TIMEOUT_MS; a `slow` answer comes SLOW_ANSWER_S late.
# Generous, since every REST call of every job has this timeout on a loaded 2-core machine.
CLIENT_TIMEOUT_MS, SLOW_ANSWER_S = 30_000, 40.0
RETRIABLE, FENCED = 75, 3


def spark_defaults(folder: Path, catalog: str) -> dict[str, str]:
    """A SPARK_CONF_DIR whose spark-defaults.conf gives the jobs' REST client CLIENT_TIMEOUT_MS (a
    `slow` answer must come after it); the environment that points spark-submit at it."""
    folder.mkdir(parents=True, exist_ok=True)
    key = f"spark.sql.catalog.{catalog}.rest.client.socket-timeout-ms"
    (folder / "spark-defaults.conf").write_text(f"{key} {CLIENT_TIMEOUT_MS}\n")
    return {"SPARK_CONF_DIR": str(folder)}


class UnknownPublishes:
    """The injections of one run and their outcomes; `arm` before a job starts publishing,
    `settle` when any job ends. Subclasses say how a fault is armed and whether it fired."""

    # Whether the harness must keep other writers of the table (backfills, maintain) away while a
    # fault is armed: a fault that cannot tell the armed job's commit from theirs.
    exclusive = False

    def __init__(self, quota: int, moments: list[float]) -> None:
        self.quota = quota
        self.moments = list(moments)  # the elapsed seconds from which the next one may be armed
        self.entries: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.armed_job: Job | None = None

    def due(self, elapsed: float) -> bool:
        with self.lock:
            fired = len(self.entries)
            return (
                self.armed_job is None
                and fired < self.quota
                and bool(self.moments)
                and elapsed >= self.moments[0]
            )

    def holds_writers(self) -> bool:
        """Whether other writers must wait now (an exclusive fault is armed)."""
        with self.lock:
            return self.exclusive and self.armed_job is not None

    def kind(self) -> str:
        return KINDS[len(self.entries) % len(KINDS)]

    def arm(self, job: Job, elapsed: float) -> bool:
        """Arm the next fault for `job`'s first publish, if one is due (True)."""
        if not self.due(elapsed):
            return False
        with self.lock:
            self.armed_job = job
        self._arm(job, self.kind())
        return True

    def _arm(self, job: Job, kind: str) -> None:
        raise NotImplementedError

    def _fired(self) -> dict[str, Any] | None:
        """What fired for the armed job since it was armed ({"kind", "batch_id"}), or None."""
        raise NotImplementedError

    def _disarm(self) -> None:
        raise NotImplementedError

    def settle(self, job: Job, batch_status: Any) -> None:
        """After `job` ended: record the armed job's fault and its exit, or the next attempt at a
        batch whose publish was faulted. batch_status(batch_id) reads the control DB's status."""
        with self.lock:
            armed = self.armed_job is job
            waiting = [e for e in self.entries if e.get("next_attempt") is None]
        if armed:
            self._disarm()
            fired = self._fired()
            with self.lock:
                self.armed_job = None
                if fired is not None:
                    self.moments.pop(0)
            if fired is not None:
                code = job.proc.returncode
                entry = {**fired, "job": job.log_path.name, "exit": code, "killed_in": job.killed_in,
                         "status_after": batch_status(fired["batch_id"]), "next_attempt": None}  # fmt: skip
                with self.lock:
                    self.entries.append(entry)
            return
        for entry in waiting:
            batch_id = entry["batch_id"]
            if batch_id not in job.committed_ids and job.batch_id != batch_id:
                continue
            interrupted = job.killed_in is not None or job.proc.returncode in (-9, FENCED)
            if interrupted and batch_id not in job.committed_ids:
                # Killed by the run, stopped by the end of the chaos phase, or fenced by a newer
                # attempt (a zombie pair's loser, whose twin is judged) before it committed the
                # batch: not an attempt that ran its course; the next one is judged.
                entry.setdefault("interrupted_attempts", []).append(job.log_path.name)
                continue
            entry["next_attempt"] = {"job": job.log_path.name, "kind": job.kind,
                                     "committed": batch_id in job.committed_ids,
                                     "killed_in": job.killed_in, "exit": job.proc.returncode}  # fmt: skip

    def report(self, batch_status: Any) -> dict[str, Any]:
        """The injections: each one's entry (and its batch's final status) and whether every one
        went as it must (fired, exit 75, planned after it, committed by the next attempt)."""
        for entry in self.entries:
            entry["status_at_end"] = batch_status(entry["batch_id"])
        good = [
            e
            for e in self.entries
            if e["exit"] == RETRIABLE
            and e["killed_in"] is None
            and e["status_after"] == "planned"
            and (e["next_attempt"] or {}).get("committed")
            and e["status_at_end"] == "committed"
        ]
        by_kind: dict[str, int] = {}
        for entry in self.entries:
            by_kind[entry["kind"]] = by_kind.get(entry["kind"], 0) + 1
        return {"quota": self.quota, "injected": len(self.entries), "by_kind": by_kind,
                "as_expected": len(good), "entries": self.entries}  # fmt: skip


class RestPublishFaults(UnknownPublishes):
    """The fault proxy takes the armed job's publish of `table` (its name in the namespace)."""

    def __init__(self, proxy: proxies.FaultProxy, table: str, quota: int, moments: list[float]) -> None:
        super().__init__(quota, moments)
        self.proxy = proxy
        self.publishes = proxies.publishes_main(table)
        self.hit: dict[str, Any] | None = None

    def _arm(self, job: Job, kind: str) -> None:
        self.hit = None

        def match(method: str, path: str, body: bytes) -> bool:
            # The job's own batch (a backfill's publish beside it is not this job's).
            batch_id = proxies.published_batch(body)
            if not self.publishes(method, path, body) or batch_id is None or batch_id != job.batch_id:
                return False
            self.hit = {"kind": kind, "batch_id": batch_id, "at": time.strftime("%H:%M:%S")}
            return True

        self.proxy.arm(kind, match, delay_s=SLOW_ANSWER_S)

    def _fired(self) -> dict[str, Any] | None:
        return self.hit

    def _disarm(self) -> None:
        self.proxy.disarm()


class DeltaCommitFaults(UnknownPublishes):
    """The PostgreSQL proxy (a TcpFaultProxy's `drop`) takes the next commit entry of the
    Delta table `table` (s3a://...) while the armed run is the table's only writer: the harness
    starts no backfill nor maintain while a fault is armed (`exclusive`), since the entry names no
    batch."""

    exclusive = True

    def __init__(self, dropper: TcpFaultProxy, table: str, quota: int, moments: list[float]) -> None:
        super().__init__(quota, moments)
        self.dropper = dropper
        self.table = table
        self.hit: dict[str, Any] | None = None

    def _arm(self, job: Job, kind: str) -> None:
        self.hit = None

        def fired() -> None:
            self.hit = {"kind": "dropped, then refused", "batch_id": job.batch_id,
                        "at": time.strftime("%H:%M:%S")}  # fmt: skip

        self.dropper.arm("drop", commit_entry_of(self.table), refuse_s=REFUSE_S, on_fire=fired)

    def _fired(self) -> dict[str, Any] | None:
        return self.hit

    def _disarm(self) -> None:
        self.dropper.disarm()
