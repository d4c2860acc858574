"""The chaos run's bookkeeping of publishes whose outcome is unknown (bench/chaos/unknown_outcomes.py):
which batch a REST publish names, that a run's injections count as expected only when each one
exited 75, left its batch planned and was committed by the next attempt, and that an attempt
killed or stopped before it committed is not that attempt (real subprocesses as the jobs)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.chaos.procs import Job
from bench.chaos.unknown_outcomes import UnknownPublishes
from bench.fault_proxy import published_batch, publishes_main


def publish_body(branch: str) -> bytes:
    """A commit of Iceberg's REST protocol as the publish sends it: main to the branch's head, the
    branch removed."""
    return json.dumps(
        {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}],
            "updates": [
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 2},
                {"action": "remove-snapshot-ref", "ref-name": branch},
            ],
        }
    ).encode()


def test_a_publish_names_its_batch_and_is_told_from_other_commits() -> None:
    body = publish_body("eos_batch17_f3")
    assert publishes_main("events")("POST", "/v1/namespaces/chaos/tables/events", body)
    assert not publishes_main("events")("POST", "/v1/namespaces/chaos/tables/events_quarantine", body)
    assert published_batch(body) == 17
    assert published_batch(publish_body("other_branch")) is None


def entry(**changes: Any) -> dict[str, Any]:
    good = {"kind": "503", "batch_id": 4, "exit": 75, "killed_in": None, "status_after": "planned",
            "next_attempt": {"committed": True}}  # fmt: skip
    return {**good, **changes}


def test_an_injection_counts_as_expected_only_when_retriable_planned_and_committed_next() -> None:
    faults = UnknownPublishes(quota=5, moments=[])
    faults.entries = [
        entry(),
        entry(exit=1, status_after="failed"),  # the job failed the batch
        entry(next_attempt={"committed": False}),  # the next attempt did not commit it
        entry(killed_in="read"),
        entry(next_attempt=None),  # no attempt after it
    ]
    report = faults.report(lambda batch_id: "committed")
    assert (report["injected"], report["as_expected"]) == (5, 1)
    assert faults.report(lambda batch_id: "planned")["as_expected"] == 0  # never committed


class FiresOnArm(UnknownPublishes):
    """Its fault fires for every armed job, on batch 4 (the proxies' part is tested with them)."""

    def _arm(self, job: Job, kind: str) -> None:
        self.kind_armed = kind

    def _fired(self) -> dict[str, Any] | None:
        return {"kind": self.kind_armed, "batch_id": 4}

    def _disarm(self) -> None:
        return


def job(tmp_path: Path, name: str, stderr: str, code: int = 0, sleep_s: float = 0.0) -> Job:
    """A real subprocess that logs `stderr` (the job's phase lines) and exits `code`."""
    script = f"import sys, time; sys.stderr.write({stderr!r}); sys.stderr.flush(); time.sleep({sleep_s}); sys.exit({code})"
    return Job("run", [sys.executable, "-c", script], dict(os.environ), tmp_path / name, "start")


def test_the_next_attempt_is_the_first_that_ran_its_course(tmp_path: Path) -> None:
    faults = FiresOnArm(quota=1, moments=[0.0])
    status = {4: "planned"}
    faulted = job(tmp_path, "0-run.log", "batch 4: phase write\n", code=75)
    assert faults.arm(faulted, elapsed=1.0)
    faulted.wait(30)
    faults.settle(faulted, status.get)
    assert not faults.due(elapsed=2.0)  # its quota is used

    killed = job(tmp_path, "1-run.log", "batch 4: phase read\n", sleep_s=30)
    assert killed.wait_phase({"read"}, 30) and killed.kill() == "read"
    killed.wait(30)
    faults.settle(killed, status.get)
    fenced = job(tmp_path, "1b-zombie.log", "batch 4: phase submit\n", code=3)  # a zombie pair's loser
    fenced.wait(30)
    faults.settle(fenced, status.get)
    committed = job(tmp_path, "2-run.log", "batch 4: phase commit\nbatch 4 committed: BatchResult()\n")
    committed.wait(30)
    faults.settle(committed, status.get)

    status[4] = "committed"
    report = faults.report(status.get)
    (entry,) = report["entries"]
    assert (entry["exit"], entry["status_after"], entry["interrupted_attempts"]) == (
        75,
        "planned",
        ["1-run.log", "1b-zombie.log"],
    )
    assert entry["next_attempt"]["job"] == "2-run.log" and report["as_expected"] == 1
