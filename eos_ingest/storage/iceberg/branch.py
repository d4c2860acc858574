"""One Iceberg write, audited before it is published: the batch's replace staged on a branch of the
table (write-audit-publish in branch mode), published by fast-forwarding `main` to it.

The branch (`eos_batch<id>_f<fence>`) is cut from main's current snapshot; the stage deletes the
batch's ranges on it (Iceberg's row-level delete: a data file holding other rows too is rewritten
without these) and appends the batch's rows, the last snapshot carrying the write's marker (batch,
app id, fence) in its summary. Until the publish, main does not move: no reader of the table sees
any of it, and the gate reads the branch, which is exactly what main will show.

The publish (commit) first checks main's history since the batch's plan for a write of the same app
id by this fence or a newer one (Delta's txnVersion, here the markers of main's ancestors:
storage/iceberg/markers.py), then fast-forwards main to
the branch and removes the branch, in one metadata commit. A fast-forward needs main to be an
ancestor of the branch: any commit to main since the cut (a concurrent backfill, a newer attempt)
fails it, and the caller stages anew from a fresh branch. A branch that is never published is
removed by abort(); its files are no snapshot's of main, and Iceberg's remove_orphan_files deletes
them once the branch's snapshots have expired.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from eos_ingest.errors import CatalogAccessError, PartialWriteError, WriteError
from eos_ingest.jvm import jvm_of
from eos_ingest.storage import commit_outcomes
from eos_ingest.storage.iceberg.markers import newest_write
from eos_ingest.storage.table_format import Txn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

MAIN = "main"
BRANCH_PREFIX = "eos_batch"


class PublishConflictError(RuntimeError):
    """main moved since the branch was cut (or a newer attempt published): nothing was published,
    the branch is removed; the caller stages anew from main as it is now."""


def branch_name(batch_id: int, txn: Txn | None) -> str:
    """The branch of one attempt's write: named for the batch and the fence (0 without a txn)."""
    return f"{BRANCH_PREFIX}{batch_id}_f{txn.fence if txn is not None else 0}"


@dataclass
class StagedBranch:
    """The branch of one staged replace (see the module). `skipped`: main already holds this app
    id's write of this fence or a newer one, so nothing was staged and nothing is to publish."""

    identifier: str  # the table's Spark name (catalog.namespace.table)
    skipped: bool
    _spark: Any
    _table: Any  # org.apache.iceberg.Table
    branch: str | None = None
    txn: Txn | None = None
    _done: bool = False
    # pyiceberg's table as of a metadata file (IcebergCatalog.pyiceberg_at, bound to the table):
    # read_arrow's way to the branch through the pipeline's catalog; None: a local file only.
    pyiceberg_at: Callable[[str], Any] | None = None

    @property
    def branch_identifier(self) -> str:
        assert self.branch is not None
        return f"{self.identifier}.`branch_{self.branch}`"

    def read_back(self, schema: StructType) -> DataFrame:
        """Every row of the table on the branch, typed by `schema` (the written frame's): what main
        will show once the branch is published, for the gate to check."""
        spark: SparkSession = self._spark
        if self.skipped:
            return spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
        rows = spark.table(self.branch_identifier)
        return rows.select(*[rows[field.name].cast(field.dataType).alias(field.name) for field in schema])

    def read_arrow(self, schema: StructType, batch_id: int) -> pa.Table | None:
        """The branch's rows of `batch_id`, the columns of `schema`, read by pyiceberg from the
        table metadata the stage committed, at the branch's head: the rows and Arrow types of
        read_back(schema).where(batch_id).toArrow(), without a Spark job. None where pyiceberg
        cannot stand in, and the gate reads the branch back with Spark: nothing staged, metadata not
        on a local disk without the catalog's way to it (pyiceberg_at: an s3a warehouse, a REST
        catalog's), pyiceberg not installed, or a column the branch's schema lacks or pyiceberg's
        type of which does not cast to Spark's."""
        if self.skipped or self.branch is None:
            return None
        table = self._table
        table.refresh()  # the stage's DELETE and append committed through Spark's own instance
        ref = table.refs().get(self.branch)
        location = str(table.operations().current().metadataFileLocation())
        if ref is None or (self.pyiceberg_at is None and urlparse(location).scheme not in ("", "file")):
            return None
        try:  # pyiceberg: the optional `iceberg` extra; without it the gate reads with Spark
            from pyiceberg.expressions import EqualTo  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read
            from pyiceberg.table import StaticTable  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read
        except ImportError:
            return None
        # pydantic models: mypy misreads their constructors without pydantic's plugin.
        equal_to: Any = EqualTo
        if self.pyiceberg_at is None:
            static = StaticTable.from_metadata(location)
        else:
            try:
                static = self.pyiceberg_at(location)
            except Exception as exc:  # the catalog's server or the store: Spark reads it then
                log.warning("%s: pyiceberg could not read branch %s (%s); Spark reads it", self.identifier,
                            self.branch, exc)  # fmt: skip
                return None
        if static.snapshot_by_id(int(ref.snapshotId())) is None:  # a REST server's newer metadata
            return None
        names = [field.name for field in schema.fields]
        if any(name not in static.schema().column_names for name in names):
            return None
        rows = static.scan(
            row_filter=equal_to("batch_id", int(batch_id)),
            selected_fields=tuple(names),
            snapshot_id=int(ref.snapshotId()),
        ).to_arrow()
        large = self._spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        target = to_arrow_schema(
            schema, error_on_duplicated_field_names_in_struct=True, prefers_large_types=large
        )
        try:  # Spark's Arrow types (timestamps as UTC microseconds), whatever pyiceberg's are
            return rows.select(names).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None

    def commit(self) -> int | None:
        """Publish: main fast-forwarded to the branch, the branch removed (one metadata commit);
        the id of the snapshot this publish put on main (the branch's head: never main's head read
        again afterwards, which may be another writer's by then).

        PublishConflictError when main moved since the cut, holds a write of this app id by this
        fence or a newer one, or the branch is gone: nothing was published, stage anew.
        PartialWriteError (retriable) when the outcome is unknown (a REST catalog's 5xx or lost
        answer, a JDBC connection dropped mid-UPDATE, SQLite busy past its timeout): main may hold
        the batch, or may yet; the batch stays planned and its next attempt's marker check
        (newest_write) settles it. The branch is left as it is then."""
        if self._done:
            raise RuntimeError(f"the staged branch of {self.identifier} was already published or aborted")
        self._done = True
        if self.skipped:
            return None
        assert self.branch is not None
        table = self._table
        try:
            table.refresh()
            fence = None
            if self.txn is not None:
                _, fence = newest_write(
                    jvm_of(self._spark), table, app_id=self.txn.app_id, planned_at=self.txn.planned_at
                )
        except Exception as exc:
            # Before the fast-forward: nothing of it was sent. The catalog's database restarting
            # or down (a JDBC catalog's connection refused or ended) is no reason to fail the
            # batch; the next attempt stages anew.
            if commit_outcomes.outcome(exc) != "unknown":
                raise
            raise PartialWriteError(
                f"main of {self.identifier} could not be read before the publish of batch branch "
                f"{self.branch} ({commit_outcomes.describe(exc)}); nothing was published, the batch "
                "stays planned: run it again"
            ) from exc
        if self.txn is not None and fence is not None and fence >= self.txn.fence:
            self._remove_branch()
            raise PublishConflictError(
                f"main of {self.identifier} already holds the write of fence {fence} for "
                f"{self.txn.app_id}; this attempt's fence is {self.txn.fence}"
            )
        ref = table.refs().get(self.branch)
        if ref is None:  # removed since the stage (maintain, a person): nothing of it can reach main
            raise PublishConflictError(
                f"the branch {self.branch} of {self.identifier} is gone since it was staged"
            )
        head = int(ref.snapshotId())
        try:
            table.manageSnapshots().fastForwardBranch(MAIN, self.branch).removeBranch(self.branch).commit()
        except Exception as exc:
            return self._settle(exc, head)
        return head

    def _settle(self, exc: BaseException, head: int) -> int:
        """After a publish that raised `exc`: `head` when main holds it after all; else raise what
        the error and the table say (see commit)."""
        what = f"the publish of batch branch {self.branch} to main of {self.identifier}"
        kind = commit_outcomes.outcome(exc)
        if kind == "unknown":
            raise PartialWriteError(
                f"{what} has an unknown outcome ({commit_outcomes.describe(exc)}): main may hold the "
                "batch's rows, or may yet; the batch stays planned and its next attempt finds this "
                "write's marker on main or not, and settles it: run it again"
            ) from exc
        if kind == "refused":
            # Nothing of it landed, and a rerun would be refused the same way: the batch fails,
            # and its branch, which nothing will publish, goes (best effort).
            self._remove_branch()
            raise WriteError(f"{what} was refused by the catalog: {commit_outcomes.describe(exc)}") from exc
        # Lost, or an error that names no outcome (Iceberg's re-applied fast-forward after its own
        # lost retry says "Cannot fast-forward"): the table says what happened.
        table = self._table
        try:
            table.refresh()
            main = table.currentSnapshot()
            ancestors = jvm_of(self._spark).org.apache.iceberg.util.SnapshotUtil
            landed = main is not None and bool(ancestors.isAncestorOf(table, main.snapshotId(), head))
            under = main is None or bool(ancestors.isAncestorOf(table, head, main.snapshotId()))
        except Exception as reread:
            raise PartialWriteError(
                f"{what} failed ({commit_outcomes.describe(exc)}) and main could not be read after it "
                f"({commit_outcomes.describe(reread)}); the batch stays planned: run it again"
            ) from exc
        if landed:  # a retry inside Iceberg (or a lost answer) found it applied: it is on main
            log.warning("%s raised %s, but main holds it", what, commit_outcomes.describe(exc))
            return head
        if kind == "lost" or not under:
            self._remove_branch()
            raise PublishConflictError(
                f"main of {self.identifier} moved since the branch {self.branch} was cut: "
                f"{commit_outcomes.describe(exc)}"
            ) from exc
        raise WriteError(f"{what} failed: {commit_outcomes.describe(exc)}") from exc

    def abort(self) -> None:
        """Remove the branch (best effort: a branch left behind is invisible on main, and the next
        attempt or `maintain` removes it). Never after commit() was tried."""
        if self._done:
            return
        self._done = True
        if not self.skipped:
            self._remove_branch()

    def _remove_branch(self) -> None:
        try:
            remove_branch(self._table, self.branch)
        except Exception:  # invisible on main; the next attempt removes it
            log.warning("could not remove the branch %s of %s", self.branch, self.identifier, exc_info=True)


def commit_refs(table: Any, what: str, change: Callable[[Any], Any]) -> None:
    """One commit of branch changes, change(table.manageSnapshots()), on the table as it is now.
    Why a lost one is a PublishConflictError: the change is built on the metadata it read, and
    Iceberg refuses it when another writer's commit (a publish, another attempt's branch) landed
    since ("Table metadata refresh is required") rather than applying it anew; the caller's try
    starts over from a fresh stage, as after a refused fast-forward. One whose outcome is unknown
    (commit_outcomes) is a PartialWriteError: main is not touched by a branch's change, but this
    try cannot go on, and the next attempt removes the branches of older fences. One the catalog
    refuses for good (a missing grant) is a CatalogAccessError naming the table."""
    table.refresh()
    name = table.name()
    try:
        change(table.manageSnapshots()).commit()
    except Exception as exc:
        raise_classified(exc, f"{what} of {name}")
        raise


def raise_classified(exc: BaseException, what: str, *, catalog_only: bool = False) -> None:
    """Raise PublishConflictError for a commit on a branch (or a branch change) that lost to a
    concurrent commit, PartialWriteError for one whose outcome is unknown, CatalogAccessError for
    one the catalog refused (nothing of it landed, main untouched); return otherwise.
    catalog_only: a Spark job ran under it (commit_outcomes.outcome)."""
    kind = commit_outcomes.outcome(exc, catalog_only=catalog_only)
    if kind == "refused":
        raise CatalogAccessError(
            f"{what} was refused by the catalog ({commit_outcomes.describe(exc)}); nothing of the "
            f"batch was published and it stays planned. Fix: {commit_outcomes.refusal_fix(exc)}; "
            "then run the batch again"
        ) from exc
    if kind == "lost":
        raise PublishConflictError(
            f"{what} lost to a concurrent commit: {commit_outcomes.describe(exc)}"
        ) from exc
    if kind == "unknown":
        raise PartialWriteError(
            f"{what}: the catalog's answer is lost or an error ({commit_outcomes.describe(exc)}); "
            "main does not hold this try's write and the batch stays planned: run it again"
        ) from exc


def cut_branch(table: Any, branch: str) -> None:
    """Cut `branch` at main's current snapshot, replacing this attempt's own from a try whose
    removal failed."""
    table.refresh()
    if table.refs().containsKey(branch):
        commit_refs(table, f"removing the branch {branch}", lambda refs: refs.removeBranch(branch))
    commit_refs(table, f"cutting the branch {branch}", lambda refs: refs.createBranch(branch))


def remove_branch(table: Any, branch: str | None) -> None:
    """Remove `branch` from `table` if it is there."""
    table.refresh()
    if branch is not None and table.refs().containsKey(branch):
        table.manageSnapshots().removeBranch(branch).commit()


def remove_stale_branches(table: Any, batch_id: int, fence: int) -> list[str]:
    """Remove the branches of `batch_id` staged by fences up to `fence` (a crashed attempt's, or
    this attempt's own from a try that could not remove it): a newer fence's branch is left alone."""
    prefix = f"{BRANCH_PREFIX}{batch_id}_f"
    stale = []
    table.refresh()
    for name in list(table.refs().keySet()):
        if name.startswith(prefix) and name[len(prefix) :].isdigit() and int(name[len(prefix) :]) <= fence:
            stale.append(str(name))
    if stale:

        def remove(refs: Any) -> Any:
            for name in stale:
                refs = refs.removeBranch(name)
            return refs

        commit_refs(table, f"removing the branches {stale}", remove)
    return stale
