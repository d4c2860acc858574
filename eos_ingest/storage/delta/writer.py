"""Delta replace of exactly a batch's offset ranges: a rerun or a backfill replaces, never appends twice.

Concurrent writers: the replace predicate names offsets, not the partition column, so Delta's
conflict check sees any two concurrent writes to one table as overlapping, even on disjoint ranges
(an ingest beside a backfill: the later commit fails with ConcurrentAppendException, every time
in our measurement). Narrowing the predicate to the partitions of the new rows would avoid that,
but would leave behind old rows of the same offsets that live in another partition (a recreated
topic, a backfill after a parser change moving a row to another date), and two writers of the same
offsets in different partitions would then both commit: duplicates. So the predicate stays wide
and a conflict is retried, with backoff, a bounded number of times (storage/lost_races.py).

Superseded attempts: each write carries Delta's idempotent-write options, txnAppId (pipeline,
batch, table) and txnVersion (the attempt's fence). Delta skips a write whose txnVersion is not
above the one the table already recorded for that app id, so a zombie with a lower fence cannot
overwrite a newer attempt's rows, and a repeat of the same attempt is skipped as already written.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from eos_ingest.errors import CatalogAccessError, PartialWriteError, WriteError
from eos_ingest.storage.commit_outcomes import (
    delta_outcome_unknown,
    delta_refused_state,
    describe,
    is_delta_conflict,
)
from eos_ingest.storage.delta.staged_write import StagedReplace, stage_replace
from eos_ingest.storage.lost_races import DEFAULT_BACKOFF_S, commit_checked
from eos_ingest.storage.object_stores import COORDINATOR_TABLE, delta_rs_uri, storage_options
from eos_ingest.storage.replace_predicate import ranges_predicate
from eos_ingest.storage.table_format import Replace, ReplaceResult, Txn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Commits searched for a batch's marker; a replace finds its own among the newest few.
HISTORY_DEPTH = 100
# Delta's error class for a written row outside the replaceWhere predicate.
_REPLACE_WHERE_MISMATCH = "DELTA_REPLACE_WHERE_MISMATCH"
# A written row that breaks a CHECK constraint of the table, named; the replaceWhere predicate is
# checked as a constraint too, named EXPRESSION(...): that one is a row outside the batch's ranges.
_TABLE_CONSTRAINT = re.compile(
    r"DELTA_VIOLATE_CONSTRAINT_WITH_VALUES\] CHECK constraint (?!EXPRESSION\()(\S+)"
)
_NOT_NULL_VIOLATED = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


def commit_marker(batch_id: int, fence: int | None = None) -> str:
    """The Delta commit's user metadata: which batch (and attempt) wrote it."""
    marker = f"eos-ingest batch_id={batch_id}"
    return marker if fence is None else f"{marker} fence={fence}"


def write_options(batch_id: int, txn: Txn | None, merge_schema: bool) -> dict[str, str]:
    """The Delta writer options of a replace besides replaceWhere: the commit's marker, the
    idempotent-write identity and mergeSchema."""
    options = {"userMetadata": commit_marker(batch_id, txn.fence if txn else None)}
    if txn is not None:
        options.update(txnAppId=txn.app_id, txnVersion=str(txn.fence))
    if merge_schema:
        options["mergeSchema"] = "true"
    return options


def stage(spark: SparkSession, replace: Replace) -> StagedReplace:
    """Write the files of replace_ranges(replace) without committing them (storage/delta/staged_write.py);
    hand the result to commit_staged after the gate, or abort() it.

    A row outside `ranges` fails here as it fails replace_ranges, with a WriteError; any other
    error (the Kafka read under the write, say) is raised as Spark raised it, so the caller tells
    lost offsets from a broker that went away as it does for any Spark step.
    """
    path, batch_id = replace.path, replace.batch_id
    try:
        return stage_replace(
            spark,
            replace.rows,
            path,
            ranges_predicate(replace.ranges),
            replace.partition_by,
            write_options(batch_id, replace.txn, replace.merge_schema),
        )
    except Exception as exc:
        message = " ".join(_java_message(exc).split())  # one line, without the JVM's stack
        broken = _TABLE_CONSTRAINT.search(message)
        if broken or _NOT_NULL_VIOLATED in message:
            # A CHECK or NOT NULL constraint of the table (Delta reports a CHECK one inside a
            # replaceWhere mismatch): the records or the constraint must change, a rerun would fail
            # alike, so the batch fails; nothing was written.
            name = broken.group(1) if broken else "<name>"
            raise WriteError(
                f"batch {batch_id}: a record breaks a constraint of the Delta table at {path} "
                f"({message}); nothing was written: fix the records with a backfill after the "
                f"producer's fix, or change the constraint (ALTER TABLE delta.`{path}` DROP "
                f"CONSTRAINT {name})"
            ) from exc
        if _REPLACE_WHERE_MISMATCH in message:
            raise WriteError(f"Delta replace of batch {batch_id} into {path} failed: {message}") from exc
        raise


def _java_message(exc: BaseException) -> str:
    """The message of the Java exception under a Py4J error (its text without the JVM's stack),
    else the Python text."""
    java = getattr(exc, "java_exception", None)
    try:
        return str(java.getMessage()) if java is not None else str(exc)
    except Exception:  # a JVM that went away: the Python text will do
        return str(exc)


def replace_ranges(
    spark: SparkSession,
    replace: Replace,
    *,
    before_write: Callable[[], None] | None = None,
    attempts: int | None = None,
    backoff_s: float = DEFAULT_BACKOFF_S,
) -> ReplaceResult:
    """Replace the rows of `replace.ranges` in the Delta table at `replace.path` with its rows:
    commit_staged of stage(replace), with no check between the two (tools, tests).

    The same replaceWhere write also creates a new table (partitioned). There is deliberately no
    "append when the table does not exist yet" branch: two attempts of a first batch would both see
    no table, and Delta retries blind appends, so both copies would land. A replace carries its
    predicate as a read, so the second writer fails with a concurrent-modification error instead.
    On an existing table Delta also checks that every written row matches the predicate, so a row
    outside the batch's ranges fails the write (on the first write the gate's range check covers it).

    `replace.merge_schema` adds the columns of its rows the table lacks (Delta's mergeSchema; the batch's new
    columns under value.schema_evolution: add_columns). Without it too, a column the table has and
    `rows` lack is kept and gets null in the replaced ranges: a replace never drops a column.
    """
    del spark  # the rows carry their session; kept so every Spark step takes the session first
    return commit_staged(
        lambda: stage(replace.rows.sparkSession, replace),
        replace.path,
        replace.batch_id,
        txn=replace.txn,
        before_write=before_write,
        attempts=attempts,
        backoff_s=backoff_s,
    )


def commit_staged(
    stage_once: Callable[[], StagedReplace],
    path: str,
    batch_id: int,
    *,
    txn: Txn | None = None,
    check: Callable[[StagedReplace], None] | None = None,
    before_write: Callable[[], None] | None = None,
    before_commit: Callable[[], None] | None = None,
    attempts: int | None = None,
    backoff_s: float = DEFAULT_BACKOFF_S,
) -> ReplaceResult:
    """Stage a replace (stage_once), `check` it (the batch's gate), commit it, all three again when
    the commit loses to a concurrent writer: lost_races.commit_checked, whose docstring says what
    runs when and what each failure raises; `attempts` tries at most (default
    $EOS_WRITE_CONFLICT_ATTEMPTS or 5). A commit whose version cannot be read is a
    PartialWriteError. With `txn`, Delta skips a stage whose app id already holds a write of a
    fence >= txn.fence; the result's written_by_fence then says whose write the table holds. The
    version is the one Delta's own commit returned (a commit coordinator's too), read from the log
    only when this try committed nothing.
    """
    import delta.exceptions  # noqa: F401, PLC0415 installs the conversion of Delta's conflict errors; delta-spark imports pyspark, which the CLI and the audit, importing this module through table_formats, may never use

    what = f"Delta replace of batch {batch_id} into {path}"
    try:
        staged, version, made = commit_checked(
            stage_once,
            lost=is_delta_conflict,
            what=what,
            check=check,
            before_write=before_write,
            before_commit=before_commit,
            after_lost=lambda lost_try: lost_try.abort_lost_commit(),
            tries=attempts,
            backoff_s=backoff_s,
        )
    except WriteError as failed:
        # commit_checked's WriteError of a failed commit, raised from the commit's error: an I/O
        # error there (the object store, the commit coordinator's database) may be of a commit
        # already decided (commit_outcomes.delta_outcome_unknown), so the batch stays planned and
        # its next attempt replaces the ranges again (one copy either way).
        cause = failed.__cause__
        if type(failed) is not WriteError or cause is None:
            raise
        refused = delta_refused_state(cause)
        if refused is not None:
            # The commit coordinator's database refused the pipeline's user: the same refusal
            # meets every rerun until a person fixes the grant, so retrying is no use (exit 2). The
            # batch stays planned either way: a refused INSERT wrote nothing, a refused UPDATE
            # after the entry left a commit that the next run's replace makes one copy of.
            raise CatalogAccessError(
                f"{what} was refused by the Delta commit coordinator's database ({describe(cause)}); "
                "the batch stays planned. Fix: grant the pipeline's user SELECT, INSERT, UPDATE and "
                f"DELETE on the control DB's table {COORDINATOR_TABLE} (SQLState {refused}), or fix "
                "its login in control_db_url; then run the batch again: it replaces the same ranges"
            ) from cause
        if delta_outcome_unknown(cause):
            raise PartialWriteError(
                f"{what} has an unknown outcome ({describe(cause)}): the table may hold it; the "
                "batch stays planned and its next attempt replaces the ranges again: run it again"
            ) from cause
        raise
    if version is not None:
        return ReplaceResult(version, made, txn.fence if txn is not None else None)
    try:
        version, fence = version_written_by(path, batch_id)
    except Exception as exc:
        raise PartialWriteError(
            f"Delta replace of batch {batch_id} into {path} ran, but its version could not be read: "
            f"{exc}; the batch stays planned: run it again"
        ) from exc
    if staged.skipped and txn is not None and fence is not None and fence != txn.fence:
        log.warning(
            "batch %s: Delta skipped this attempt's replace into %s (fence %s): the table holds the "
            "write of fence %s, a newer attempt",
            batch_id, path, txn.fence, fence,
        )  # fmt: skip
    return ReplaceResult(version, made, fence)


_MARKER = re.compile(r"eos-ingest batch_id=(\d+)(?: fence=(\d+))?")


def version_written_by(path: str, batch_id: int) -> tuple[int, int | None]:
    """The Delta version at which the table holds the batch's rows, and the fence that wrote them.

    That is the newest commit carrying the batch's marker (with any fence: a write Delta skipped
    as already done by this or a newer attempt is found too). Delta writes no commit at all when a
    replace without txn options has nothing to remove and nothing to add (a range of only aborted
    records, a quarantine with no bad rows), and then the table's current version holds the batch.
    The log is read with delta-rs: milliseconds, where Spark's history() ran a job per write.
    """
    from deltalake import DeltaTable  # noqa: PLC0415 delta-rs: loaded where a Delta log is read, not by every process that imports this module through table_formats

    history = DeltaTable(delta_rs_uri(path), storage_options=storage_options(path)).history(HISTORY_DEPTH)
    commits = [(int(c["version"]), _MARKER.fullmatch(str(c.get("userMetadata") or ""))) for c in history]
    if not commits:
        raise WriteError(f"the Delta table at {path} has no history")
    mine = [(version, m) for version, m in commits if m is not None and int(m.group(1)) == batch_id]
    if not mine:
        return max(version for version, _ in commits), None
    version, marker = max(mine, key=lambda vm: vm[0])
    return version, int(marker.group(2)) if marker.group(2) else None
