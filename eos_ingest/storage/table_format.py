"""What a batch asks of its output table's format: stage a replace of its ranges, read back what
the commit will publish, commit it (retried from a fresh stage when a concurrent writer wins),
abort it, and the version that holds the batch.

A batch attempt (batch/attempt.py) sees only this interface, so a second table format lands as
one more implementation beside Delta's (storage/delta/format.py), named in storage/table_formats.py,
without a change to the attempt. Each implementation keeps the guarantees the attempt relies on:

- a staged write is invisible to every reader until its commit, and abort() deletes only what
  the stage made (never a file a snapshot of the table references);
- the replace covers exactly the batch's ranges, so a rerun or a backfill never leaves two copies;
- a write carries its Txn (app id and fence): a stage by an older fence than the one the table
  holds for that app id is skipped (`skipped`), so a zombie's write never lands;
- commit_staged runs its `check` (the gate) on every try it commits: a try that loses a conflict
  is staged and checked anew, never committed unchecked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from eos_ingest.plan.ranges import PlannedRange


@dataclass(frozen=True)
class Txn:
    """The idempotent-write identity of one attempt's write to one table: an app id (pipeline,
    batch, table) and the attempt's fence. planned_at: the batch's plan time, before which none of
    this app id's writes can be (Iceberg's marker search stops there: storage/iceberg/markers.py);
    None reads the table's whole history."""

    app_id: str
    fence: int
    planned_at: datetime | None = None


def txn_app_id(pipeline: str, batch_id: int, created_at: str, table: str) -> str:
    """The stable app id of a batch's writes to one table. The batch's creation time is part of
    it, so a batch id reused by a recreated control database never matches an old batch's writes."""
    return f"eos-ingest/{pipeline}/batch-{batch_id}/{created_at}/{table}"


@dataclass(frozen=True)
class Replace:
    """One replace of a batch's ranges: `rows` in place of the rows of `ranges` in the table at
    `path` (Delta's folder, Iceberg's namespace.table), marked with `batch_id` and written under
    `txn`. partition_by: how a table the replace creates is partitioned. merge_schema: the table's
    schema may change to take `rows` (schema_evolution's added columns; on Iceberg also its widened
    column types)."""

    rows: DataFrame
    path: str
    ranges: Sequence[PlannedRange]
    batch_id: int
    partition_by: Sequence[str] = ()
    txn: Txn | None = None
    merge_schema: bool = False


@dataclass(frozen=True)
class ReplaceResult:
    """version: the table version holding the batch's rows. attempts: tries made (1 = no conflict).
    written_by_fence: the fence of the attempt whose write the table holds; a value other than the
    caller's fence means this write was skipped because a newer attempt had written."""

    version: int
    attempts: int
    written_by_fence: int | None


class StagedWrite(Protocol):
    """The files of one replace, written and not committed."""

    # The table already holds this app id's write of this fence or a newer one: nothing was
    # written and nothing is to commit.
    skipped: bool

    def read_back(self, schema: StructType) -> DataFrame:
        """Every row the commit will publish (typed by `schema`), for the gate to check."""
        ...

    def read_arrow(self, schema: StructType, batch_id: int) -> pa.Table | None:
        """`batch_id`'s staged rows as Arrow without a Spark job, or None where only Spark can read them."""
        ...

    def commit(self) -> int | None:
        """Publish the staged write; the version of that commit, or None if nothing was committed."""
        ...

    def abort(self) -> None:
        """Delete what the stage made; a no-op after commit() was tried."""
        ...


class TableFormat(Protocol):
    """One table format's replace of a batch's ranges (see the module's guarantees)."""

    name: str

    def stage(self, spark: SparkSession, replace: Replace) -> StagedWrite:
        """Write `replace`, without committing it."""
        ...

    def table_schema(self, spark: SparkSession, path: str) -> StructType | None:
        """The table's current schema as Spark reads it; None when there is no table yet."""
        ...

    def commit_staged(
        self,
        stage_once: Callable[[], StagedWrite],
        path: str,
        batch_id: int,
        *,
        txn: Txn | None = None,
        check: Callable[[StagedWrite], None] | None = None,
        before_write: Callable[[], None] | None = None,
        before_commit: Callable[[], None] | None = None,
    ) -> ReplaceResult:
        """stage_once(), check() it, commit it; all three again from a fresh stage when the commit
        loses to a concurrent writer, up to the configured tries."""
        ...

    def replace_ranges(
        self, spark: SparkSession, replace: Replace, *, before_write: Callable[[], None] | None = None
    ) -> ReplaceResult:
        """commit_staged of stage(replace) with no check between (tools, tests)."""
        ...


def staged_batch_rows(staged: StagedWrite, schema: StructType, batch_id: int) -> int:
    """The rows of `batch_id` that committing `staged` would publish, counted in its staged files
    (its `batch_id` column only; `schema`, the written frame's, types it): by pyarrow where
    read_arrow can (a local table: milliseconds), else by a Spark count of the read-back."""
    ids = type(schema)([schema["batch_id"]])
    arrow = staged.read_arrow(ids, batch_id)
    if arrow is not None:
        return arrow.num_rows
    return staged.read_back(ids).where(f"batch_id = {int(batch_id)}").count()
