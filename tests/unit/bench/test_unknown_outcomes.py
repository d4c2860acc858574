"""The chaos run's bookkeeping of publishes whose outcome is unknown (bench/chaos/unknown_outcomes.py):
which batch a REST publish names, and that a run's injections count as expected only when each
one exited 75, left its batch planned and was committed by the next attempt."""

from __future__ import annotations

import json
from typing import Any

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
