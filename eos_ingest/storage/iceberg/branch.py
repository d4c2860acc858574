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

from eos_ingest.errors import PartialWriteError, WriteError
from eos_ingest.jvm import jvm_of
from eos_ingest.storage import commit_outcomes
from eos_ingest.storage.iceberg.markers import newest_write
from eos_ingest.storage.iceberg.refs import MAIN, PublishConflictError, remove_branch
from eos_ingest.storage.table_format import Txn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


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
