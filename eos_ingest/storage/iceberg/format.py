"""Apache Iceberg behind storage/table_format.TableFormat: a batch's replace staged on a branch of
the table and published by fast-forwarding main (write-audit-publish, storage/iceberg/branch.py),
in the pipeline's Iceberg catalog (storage/iceberg/catalog.py).

Branch mode, not WAP-id mode: a staged `spark.wap.id` snapshot is published by a cherry-pick, which
Iceberg applies on top of whatever main holds by then (two writers of one range could both land),
and the gate would have to read a snapshot by id rather than a branch. A branch is published only
by a fast-forward, which fails when anything reached main since the branch was cut: the replace is
checked (and gated) against exactly the table that it publishes over, and a loser stages anew.
The branch is named in each statement (`<table>.branch_<name>`), never by setting the session's
`spark.wap.branch`, which every thread of the session (the quarantine's write runs beside the
table's) would see.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from pyspark.errors import AnalysisException
from pyspark.sql.functions import col, partitioning

from eos_ingest.config import partition_transforms
from eos_ingest.errors import CatalogAccessError, PartialWriteError
from eos_ingest.jvm import jvm_of
from eos_ingest.storage.commit_outcomes import describe, outcome, refusal_fix
from eos_ingest.storage.iceberg.branch import StagedBranch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.markers import marker, newest_write
from eos_ingest.storage.iceberg.properties import check_java
from eos_ingest.storage.iceberg.refs import (
    PublishConflictError,
    branch_name,
    cut_branch,
    raise_classified,
    remove_stale_branches,
)
from eos_ingest.storage.iceberg.schema import evolve_table, fill_missing, spark_schema
from eos_ingest.storage.lost_races import DEFAULT_BACKOFF_S, commit_checked
from eos_ingest.storage.replace_predicate import ranges_predicate
from eos_ingest.storage.table_format import Replace, ReplaceResult, StagedWrite, Txn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


log = logging.getLogger(__name__)


class IcebergFormat:
    """The Iceberg tables of one catalog; a table is named namespace.table (the `path` of the
    TableFormat calls)."""

    name = "iceberg"

    def __init__(self, catalog: IcebergCatalog) -> None:
        self.catalog = catalog

    def stage(self, spark: SparkSession, replace: Replace) -> StagedWrite:
        """Stage `replace` on a new branch of the table `replace.path` (created, partitioned by
        `replace.partition_by`, if absent): skipped when main already holds this app id's write of
        this fence or a newer one. merge_schema: the table's schema first takes the columns the
        rows add and the types they widen (storage/iceberg/schema.py: a table-level change, which
        main's readers see before the publish)."""
        rows, path, ranges, batch_id = replace.rows, replace.path, replace.ranges, replace.batch_id
        partition_by, txn, merge_schema = replace.partition_by, replace.txn, replace.merge_schema
        identifier = self.catalog.identifier(path)
        table = self._table(spark, rows, path, partition_by)
        check_java(identifier, table)  # as planned, or changed since: refused
        jvm = jvm_of(spark)
        if txn is not None:
            _, fence = newest_write(jvm, table, app_id=txn.app_id, planned_at=txn.planned_at)
            if fence is not None and fence >= txn.fence:
                return StagedBranch(identifier, True, spark, table, txn=txn)
            stale = remove_stale_branches(table, batch_id, txn.fence)
            if stale:
                log.info("batch %s: removed the unpublished branches %s of %s", batch_id, stale, identifier)
        if merge_schema:
            # After the skip check: a skipped zombie changes nothing. Before the cut: the write to
            # the branch resolves its columns against the table's current schema.
            evolve_table(spark, table, rows)
        rows = fill_missing(rows, spark_schema(spark, table))
        branch = branch_name(batch_id, txn)
        cut_branch(table, branch)
        staged = StagedBranch(
            identifier,
            False,
            spark,
            table,
            branch,
            txn,
            pyiceberg_at=partial(self.catalog.pyiceberg_at, path),
        )
        try:
            # Iceberg's row-level delete on the branch: files holding only the ranges' rows are
            # dropped, a file holding other rows too is rewritten without these (copy-on-write).
            spark.sql(f"DELETE FROM {staged.branch_identifier} WHERE {ranges_predicate(ranges)}")
            # Hash-distributed, whatever the table asks for: a sort order (or write.distribution-mode
            # range) makes Spark sample its input for the range bounds, a second run of the plan
            # that counted the batch's records (parser.observe_split), which then counted each
            # twice. Hash keeps a sort order's per-file sort and runs the plan once.
            writer = rows.writeTo(staged.branch_identifier).option("distribution-mode", "hash")
            for key, value in marker(batch_id, txn).items():
                writer = writer.option(f"snapshot-property.{key}", value)
            writer.append()  # an empty frame commits a snapshot too: the branch's head is marked
        except Exception as exc:
            staged.abort()
            # A commit on the branch that lost after Iceberg's retries: this try stages anew; one
            # whose outcome is unknown: retriable (main untouched either way).
            raise_classified(
                exc, f"the stage of batch {batch_id} on {staged.branch_identifier}", catalog_only=True
            )
            raise
        return staged

    def table_schema(self, spark: SparkSession, path: str) -> StructType | None:
        """The table's current schema as Spark reads it; None when the table does not exist yet."""
        self.catalog.ensure(spark)
        if not spark.catalog.tableExists(self.catalog.identifier(path)):
            return None
        return spark_schema(spark, self.catalog.java_table(spark, path))

    def _table(self, spark: SparkSession, rows: DataFrame, path: str, partition_by: Sequence[str]) -> Any:
        """The table `path`, created from the rows' schema if absent (a first snapshot, empty, on
        main: a branch is cut from it). Two first writers: one creates it, the other uses it."""
        catalog = self.catalog
        catalog.ensure(spark)
        namespace = path.split(".")[0]
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.{namespace}")
        if not spark.catalog.tableExists(catalog.identifier(path)):
            # From the schema alone, never from `rows`: an action over them would be the first to
            # deliver the metrics the batch observes on them (the stage's write must be).
            empty = spark.createDataFrame(spark.sparkContext.emptyRDD(), rows.schema)  # a JVM RDD
            creating = empty.writeTo(catalog.identifier(path))
            if partition_by:
                creating = creating.partitionedBy(*[partition_field(c) for c in partition_by])
            try:
                creating.create()
            except AnalysisException as exc:
                if "TABLE_OR_VIEW_ALREADY_EXISTS" not in str(exc):
                    raise
            except Exception as exc:
                self._creation_failed(spark, path, exc)
        return catalog.java_table(spark, path)

    def _creation_failed(self, spark: SparkSession, path: str, exc: BaseException) -> None:
        """After the table's creation raised `exc`: return when the table is there all the same
        (the create landed and its answer was lost), else raise PartialWriteError when the outcome
        is unknown (it may land yet: the next attempt finds the table or creates it),
        CatalogAccessError when the catalog refused this pipeline's user, else `exc`."""
        identifier = self.catalog.identifier(path)
        try:
            exists = bool(spark.catalog.tableExists(identifier))
        except Exception:  # the catalog still does not answer
            exists = False
        if exists:
            log.warning("creating %s raised %s, but the table is there: used", identifier, describe(exc))
            return
        kind = outcome(exc, catalog_only=True)
        if kind == "refused":  # a missing grant: every rerun meets it until a person fixes it
            raise CatalogAccessError(
                f"creating the Iceberg table {identifier} was refused by the catalog ({describe(exc)}); "
                f"nothing of the batch is written and it stays planned. Fix: {refusal_fix(exc)}; "
                "then run the batch again"
            ) from exc
        if kind == "unknown":
            raise PartialWriteError(
                f"creating the Iceberg table {identifier} has an unknown outcome ({describe(exc)}); "
                "nothing of the batch is written and it stays planned: run it again"
            ) from exc
        raise exc

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
        attempts: int | None = None,
        backoff_s: float = DEFAULT_BACKOFF_S,
    ) -> ReplaceResult:
        """stage_once() on a fresh branch, check() it, publish it; when the publish finds that main
        moved (or a newer attempt published), all three again from a fresh branch, up to
        `attempts` tries ($EOS_WRITE_CONFLICT_ATTEMPTS, default 5): every branch that reaches main
        is one whose check passed against the main it was cut from. `before_write` (the caller's
        fence check) runs before each stage and each publish; `before_commit` before the first
        publish only (a test's fault point)."""
        identifier = self.catalog.identifier(path)
        staged, version, made = commit_checked(
            lambda: cast("StagedBranch", stage_once()),
            lost=lambda exc: isinstance(exc, PublishConflictError),
            what=f"Iceberg publish of batch {batch_id} into {identifier}",
            check=check,
            before_write=before_write,
            before_commit=before_commit,
            tries=attempts,
            backoff_s=backoff_s,
        )
        if version is not None:
            return ReplaceResult(version, made, txn.fence if txn is not None else None)
        return self._skipped_result(staged, identifier, batch_id, txn, made)

    def _skipped_result(
        self, staged: StagedBranch, identifier: str, batch_id: int, txn: Txn | None, made: int
    ) -> ReplaceResult:
        """The snapshot of main holding the batch's rows when this try published nothing: the newest
        one marked with the batch (by any fence), else main's current one."""
        try:
            table = staged._table
            table.refresh()
            planned_at = txn.planned_at if txn is not None else None
            snapshot, fence = newest_write(
                jvm_of(staged._spark), table, batch_id=batch_id, planned_at=planned_at
            )
            current = snapshot if snapshot is not None else table.currentSnapshot()
            version = int(current.snapshotId())
        except Exception as exc:
            raise PartialWriteError(
                f"Iceberg publish of batch {batch_id} into {identifier} ran, but main's snapshot could "
                f"not be read: {exc}; the batch stays planned: run it again"
            ) from exc
        if txn is not None and fence is not None and fence != txn.fence:
            log.warning(
                "batch %s: this attempt's write into %s (fence %s) was skipped: main holds the write "
                "of fence %s, a newer attempt",
                batch_id, identifier, txn.fence, fence,
            )  # fmt: skip
        return ReplaceResult(version, made, fence)

    def replace_ranges(
        self, spark: SparkSession, replace: Replace, *, before_write: Callable[[], None] | None = None
    ) -> ReplaceResult:
        """commit_staged of stage(replace) with no check between (tools, tests)."""
        return self.commit_staged(
            lambda: self.stage(spark, replace),
            replace.path,
            replace.batch_id,
            txn=replace.txn,
            before_write=before_write,
        )


def partition_field(spelt: str) -> Any:
    """The Spark column of one `output.partition_by` entry: a column, or a transform of one as
    config/partition_transforms.py spells it (day(c) -> partitioning.days(c), bucket(N, c) ...)."""
    transform = partition_transforms.parse(spelt)
    if transform is None:
        return col(spelt)
    if transform.name == "bucket":
        assert transform.width is not None
        return partitioning.bucket(transform.width, col(transform.column))
    plural = {"year": partitioning.years, "month": partitioning.months, "day": partitioning.days}
    return plural.get(transform.name, partitioning.hours)(col(transform.column))
