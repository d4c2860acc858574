"""One Iceberg write, audited before it is published: the batch's replace staged on a branch of the
table (write-audit-publish in branch mode), published by fast-forwarding `main` to it.

The branch (`eos_batch<id>_f<fence>`) is cut from main's current snapshot; the stage deletes the
batch's ranges on it (Iceberg's row-level delete: a data file holding other rows too is rewritten
without these) and appends the batch's rows, the last snapshot carrying the write's marker (batch,
app id, fence) in its summary. Until the publish, main does not move: no reader of the table sees
any of it, and the gate reads the branch, which is exactly what main will show.

The publish (commit) first checks main's history for a write of the same app id by this fence or a
newer one (Delta's txnVersion, here the markers of main's ancestors), then fast-forwards main to
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

from eos_ingest.storage.table_format import Txn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

MAIN = "main"
# The snapshot summary keys of a write's marker.
BATCH_KEY = "eos.batch-id"
APP_ID_KEY = "eos.app-id"
FENCE_KEY = "eos.fence"
BRANCH_PREFIX = "eos_batch"


class PublishConflictError(RuntimeError):
    """main moved since the branch was cut (or a newer attempt published): nothing was published,
    the branch is removed; the caller stages anew from main as it is now."""


def branch_name(batch_id: int, txn: Txn | None) -> str:
    """The branch of one attempt's write: named for the batch and the fence (0 without a txn)."""
    return f"{BRANCH_PREFIX}{batch_id}_f{txn.fence if txn is not None else 0}"


def marker(batch_id: int, txn: Txn | None) -> dict[str, str]:
    """The snapshot summary entries that say which batch and attempt wrote a snapshot."""
    entries = {BATCH_KEY: str(batch_id)}
    if txn is not None:
        entries.update({APP_ID_KEY: txn.app_id, FENCE_KEY: str(txn.fence)})
    return entries


def newest_write(
    jvm: Any, table: Any, *, app_id: str | None = None, batch_id: int | None = None
) -> tuple[Any, int | None]:
    """The newest of main's snapshots whose marker has `app_id` (or `batch_id`), and the fence it
    carries; (None, None) when main holds none. Along main, an app id's fences never go down (a
    publish by an older fence than main holds is refused), so the newest is the highest."""
    if table.currentSnapshot() is None:
        return None, None
    snapshots = jvm.org.apache.iceberg.util.SnapshotUtil.currentAncestors(table).iterator()
    while snapshots.hasNext():
        snapshot = snapshots.next()
        summary = snapshot.summary()
        if app_id is not None and summary.get(APP_ID_KEY) != app_id:
            continue
        if batch_id is not None and summary.get(BATCH_KEY) != str(batch_id):
            continue
        fence = summary.get(FENCE_KEY)
        return snapshot, int(fence) if fence is not None else None
    return None, None


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
            from pyiceberg.expressions import EqualTo
            from pyiceberg.table import StaticTable
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
        main's snapshot id after it. PublishConflictError when main moved since the cut or holds
        a write of this app id by this fence or a newer one: nothing was published."""
        if self._done:
            raise RuntimeError(f"the staged branch of {self.identifier} was already published or aborted")
        self._done = True
        if self.skipped:
            return None
        assert self.branch is not None
        table = self._table
        table.refresh()
        if self.txn is not None:
            _, fence = newest_write(self._spark._jvm, table, app_id=self.txn.app_id)
            if fence is not None and fence >= self.txn.fence:
                self._remove_branch()
                raise PublishConflictError(
                    f"main of {self.identifier} already holds the write of fence {fence} for "
                    f"{self.txn.app_id}; this attempt's fence is {self.txn.fence}"
                )
        try:
            table.manageSnapshots().fastForwardBranch(MAIN, self.branch).removeBranch(self.branch).commit()
        except Exception as exc:
            if not _lost_race(exc):
                raise
            self._remove_branch()
            raise PublishConflictError(
                f"main of {self.identifier} moved since the branch {self.branch} was cut: {_message(exc)}"
            ) from exc
        table.refresh()
        return int(table.currentSnapshot().snapshotId())

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
    starts over from a fresh stage, as after a refused fast-forward."""
    table.refresh()
    try:
        change(table.manageSnapshots()).commit()
    except Exception as exc:
        if not _lost_race(exc):
            raise
        raise PublishConflictError(f"{what} lost to a concurrent commit: {_message(exc)}") from exc


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


def _lost_race(exc: BaseException) -> bool:
    """A fast-forward refused because main is no longer an ancestor of the branch, or a metadata
    commit that kept losing to concurrent commits."""
    text = _message(exc)
    return "Cannot fast-forward" in text or "CommitFailedException" in text or "is not an ancestor" in text


def _message(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    try:
        return str(java.toString()) if java is not None else f"{type(exc).__name__}: {exc}"
    except Exception:
        return str(exc)
