"""A write that loses a race to a concurrent writer is tried again from its start: the one policy
of both table formats' batch writes (storage/delta/writer.py, Delta's replace; storage/iceberg/format.py,
Iceberg's publish) and of maintain's compaction (storage/delta/maintenance.py).

Concurrent writers are normal here: an ingest beside a backfill, maintain beside both. Each format
says which of its errors is a lost race (Delta's concurrent-modification exceptions, Iceberg's
refused fast-forward); such a try changed nothing, so it is dropped whole and tried again after a
back-off (1, 2, 4 ... at most 16 times `backoff_s`, plus up to `backoff_s` of jitter so that two
losers of one race do not collide again), a bounded number of times; past them the caller's
retriable error (the batch stays planned, maintain says run it again).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from eos_ingest.errors import ConfigError, EosIngestError, WriteConflictError, WriteError
from eos_ingest.storage.table_format import StagedWrite

log = logging.getLogger(__name__)

# How many times one batch write is tried when a concurrent writer commits first (1 = no retry).
CONFLICT_ATTEMPTS_ENV = "EOS_WRITE_CONFLICT_ATTEMPTS"
DEFAULT_CONFLICT_ATTEMPTS = 5
DEFAULT_BACKOFF_S = 1.0

T = TypeVar("T")
S = TypeVar("S", bound=StagedWrite)


def conflict_attempts() -> int:
    """Tries per batch write, from $EOS_WRITE_CONFLICT_ATTEMPTS (default 5)."""
    raw = os.environ.get(CONFLICT_ATTEMPTS_ENV, "").strip()
    if not raw:
        return DEFAULT_CONFLICT_ATTEMPTS
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(
            f"{CONFLICT_ATTEMPTS_ENV} = {raw!r} is not valid; use a whole number >= 1 (tries per "
            f"table write when a concurrent writer commits first; default {DEFAULT_CONFLICT_ATTEMPTS})"
        )
    return int(raw)


def describe(exc: BaseException) -> str:
    """An error's class and the start of its first line (Delta's conflict messages run to pages)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


def retry_lost_races(
    attempt: Callable[[], T],
    *,
    lost: Callable[[BaseException], bool],
    tries: int,
    what: str,
    give_up: Callable[[BaseException, int], Exception],
    backoff_s: float = DEFAULT_BACKOFF_S,
) -> tuple[T, int]:
    """attempt() until it returns, up to `tries` times while its error is a lost race (`lost`);
    (its result, the tries made). Another error propagates as it came; the last lost race past the
    tries as give_up(error, tries made). `what` names the write in the log ("<what> lost to ...")."""
    made = 0

    def counted() -> T:
        nonlocal made
        made += 1
        return attempt()

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s lost to a concurrent writer (try %s of %s, %s): a write conflict, retried from the "
            "start in %.1f s",
            what, state.attempt_number, tries, describe(exc) if exc else "?", wait,
        )  # fmt: skip

    retrying = Retrying(
        stop=stop_after_attempt(tries),
        wait=wait_exponential_jitter(initial=backoff_s, max=backoff_s * 16, jitter=backoff_s),
        retry=retry_if_exception(lost),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        result = retrying(counted)
    except Exception as exc:
        if lost(exc):
            raise give_up(exc, made) from exc
        raise
    if made > 1:
        log.info("%s landed at try %s", what, made)
    return result, made


def commit_checked(
    stage_once: Callable[[], S],
    *,
    lost: Callable[[BaseException], bool],
    what: str,
    check: Callable[[S], None] | None = None,
    before_write: Callable[[], None] | None = None,
    before_commit: Callable[[], None] | None = None,
    after_lost: Callable[[S], None] | None = None,
    tries: int | None = None,
    backoff_s: float = DEFAULT_BACKOFF_S,
) -> tuple[S, int | None, int]:
    """Stage a batch's write (stage_once), `check` it (the gate), commit it; when the commit loses a
    race, all three again from a fresh stage, so every write that commits is one its own check
    passed, never a second write made after the check. (the staged write that committed, the
    version its commit returned or None, the tries made.)

    `before_write` (the caller's fence check: its error propagates, nothing is written) runs before
    each stage and again before each commit; `before_commit` before the first commit only (a test's
    fault point); `after_lost` with a try's staged write whose commit lost (what the format cleans
    up then). A stage's error (the Kafka read under it, a data loss) or the check's is raised as it
    came; a failed commit is a WriteError (a retriable error of the format's commit as it came); past the tries ($EOS_WRITE_CONFLICT_ATTEMPTS unless
    `tries`), the retriable WriteConflictError."""
    total = tries if tries is not None else conflict_attempts()
    first = True

    def once() -> tuple[S, int | None]:
        nonlocal first
        if before_write is not None:
            before_write()
        try:
            staged = stage_once()
        except Exception:
            # A newer attempt that took the batch meanwhile may be what broke this stage (Iceberg:
            # it removes the branches of older fences): say so (FencedError) rather than the error.
            if before_write is not None:
                before_write()
            raise
        try:
            if check is not None:
                check(staged)
            if before_write is not None:
                before_write()
            if before_commit is not None and first:
                before_commit()
            first = False
            try:
                return staged, staged.commit()
            except Exception as exc:
                if lost(exc):
                    if after_lost is not None:
                        after_lost(staged)
                    raise  # tried again from a fresh stage
                if isinstance(exc, EosIngestError) and exc.retriable:
                    raise  # the format's verdict: an unknown outcome, the batch stays planned
                raise WriteError(f"{what} failed: {exc}") from exc
        finally:
            staged.abort()  # what the stage made, unless its commit was tried

    def give_up(exc: BaseException, made: int) -> Exception:
        return WriteConflictError(
            f"{what} lost to a concurrent writer {made} times ({describe(exc)}); nothing of it was "
            f"published and the batch stays planned: run it again (raise {CONFLICT_ATTEMPTS_ENV} "
            "for more tries per job)"
        )

    (staged, version), made = retry_lost_races(
        once, lost=lost, tries=total, what=what, give_up=give_up, backoff_s=backoff_s
    )
    return staged, version, made
