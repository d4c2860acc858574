"""The one retry of a write that lost a race (storage/lost_races.py), with plain callables for the
stage and its commit: what is tried again, how often, and which error ends it. The formats' own
races are in the integration tests (test_write_conflicts.py, delta/test_staged_write.py,
iceberg/test_format.py); this pins the loop's rules."""

from __future__ import annotations

import pytest

from eos_ingest.errors import FencedError, WriteConflictError, WriteError
from eos_ingest.storage.lost_races import commit_checked, retry_lost_races


class Lost(Exception):
    """A format's lost race."""


class Staged:
    """A staged write whose commit raises the next of `outcomes` (or returns it)."""

    skipped = False

    def __init__(self, log: list[str], outcome: object) -> None:
        self.log, self.outcome = log, outcome

    def commit(self) -> int | None:
        self.log.append("commit")
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome  # type: ignore[return-value]

    def abort(self) -> None:
        self.log.append("abort")


def stages(log: list[str], *outcomes: object):
    left = list(outcomes)

    def stage_once() -> Staged:
        log.append("stage")
        return Staged(log, left.pop(0))

    return stage_once


def test_a_lost_commit_is_staged_checked_and_committed_anew_and_before_commit_runs_once() -> None:
    log: list[str] = []
    _staged, version, made = commit_checked(
        stages(log, Lost(), 7),
        lost=lambda e: isinstance(e, Lost),
        what="test write",
        check=lambda s: log.append("check"),
        before_commit=lambda: log.append("pause"),
        after_lost=lambda s: log.append("lost"),
        tries=3,
        backoff_s=0.001,
    )
    assert (version, made) == (7, 2)
    assert log == ["stage", "check", "pause", "commit", "lost", "abort", "stage", "check", "commit", "abort"]


def test_past_its_tries_a_lost_race_is_a_retriable_write_conflict() -> None:
    with pytest.raises(WriteConflictError, match="lost to a concurrent writer 2 times") as raised:
        commit_checked(stages([], Lost("main moved"), Lost("main moved")), lost=lambda e: isinstance(e, Lost),
                       what="test write", tries=2, backoff_s=0.001)  # fmt: skip
    assert raised.value.retriable and "EOS_WRITE_CONFLICT_ATTEMPTS" in str(raised.value)


def test_a_failed_commit_that_is_not_a_lost_race_is_a_write_error_at_once() -> None:
    log: list[str] = []
    with pytest.raises(WriteError, match="test write failed: disk full"):
        commit_checked(stages(log, OSError("disk full"), 1), lost=lambda e: isinstance(e, Lost),
                       what="test write", tries=3, backoff_s=0.001)  # fmt: skip
    assert log == ["stage", "commit", "abort"]  # not tried again


def test_a_stage_broken_while_a_newer_attempt_took_the_batch_says_fenced() -> None:
    """Iceberg: a newer attempt removes the branches of older fences, which can break an older
    attempt's stage; that attempt must end as fenced (exit 3), not with the stage's error."""
    checks = iter([None, FencedError("batch 4: fence 1 was superseded by fence 2")])

    def fence_check() -> None:
        found = next(checks)
        if found is not None:
            raise found

    def broken_stage() -> Staged:
        raise RuntimeError("branch eos_batch4_f1 does not exist")

    with pytest.raises(FencedError, match="superseded"):
        commit_checked(
            broken_stage, lost=lambda e: False, what="test write", before_write=fence_check, tries=1
        )


def test_a_stage_error_with_the_fence_still_held_propagates_as_it_came() -> None:
    def broken_stage() -> Staged:
        raise RuntimeError("Kafka read failed")

    with pytest.raises(RuntimeError, match="Kafka read failed"):
        commit_checked(
            broken_stage, lost=lambda e: False, what="test write", before_write=lambda: None, tries=1
        )


def test_retry_lost_races_counts_its_tries_and_leaves_other_errors_alone() -> None:
    outcomes = [Lost(), Lost(), "done"]

    def attempt() -> str:
        found = outcomes.pop(0)
        if isinstance(found, BaseException):
            raise found
        return found

    assert retry_lost_races(attempt, lost=lambda e: isinstance(e, Lost), tries=3, what="x",
                            give_up=lambda e, n: RuntimeError(n), backoff_s=0.001) == ("done", 3)  # fmt: skip
    with pytest.raises(ValueError):
        retry_lost_races(lambda: (_ for _ in ()).throw(ValueError("no")), lost=lambda e: isinstance(e, Lost),
                         tries=3, what="x", give_up=lambda e, n: RuntimeError(n), backoff_s=0.001)  # fmt: skip
