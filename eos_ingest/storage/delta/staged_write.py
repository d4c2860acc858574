"""A Delta replace split in two: its files written in the batch's one pass over Kafka, its commit
made only after the quality gate.

Why: writing after the gate used to mean two heavy Spark jobs per batch (read + parse + cache +
count, then the write from the cache), each paying the JVM's warm-up in a cold job. Staged, the
read, the parse, the counts (observed) and the table's Parquet files are one job; the gate then
reads the staged files back, and the commit is a small step after it. Nothing changes for a reader of the
table: staged files are not in the Delta log until the commit, so until then no reader sees them,
and a batch that fails its gate (or dies) leaves only unreferenced files, which the abort deletes
(or VACUUM removes after its retention).

It runs Delta's own write command, WriteIntoDelta, with the same options a DataFrame save would
pass (replaceWhere, txnAppId/txnVersion, userMetadata, mergeSchema) and splits its run() at the
commit: write() returns the commit's actions (the new files, the removal or row-level rewrite of
the files the predicate matches, the SetTransaction) without committing them. The replace's
guarantees are Delta's: the predicate's check of every written row, the read of the replaced
files that makes concurrent writers conflict, and the idempotent skip of an app id's old fence.

A door into Delta's internals: WriteIntoDelta's writeAndReturnCommitData and hasBeenExecuted,
OptimisticTransaction's commitIfNeeded and its thread's active transaction, DeltaOperations.Write,
all Scala classes reached through eos_ingest.jvm. Figure (bench/HISTORY.md): in one warm session
on the benchmark's 950,000 records, the read, parse, counts, table files and the gate's frame took
10.4 s staged against 15.3 s cached, checked and then written (medians of 3); the batch's (d)/(b)
ratio went 0.62 -> 0.77 with it. Gate: STAGING_ON, on the delta-spark
series this was written against and tested on (KNOWN_SERIES, pyproject's pin; the jar is the same
version, tests/unit/test_versions.py); on any other, stage_replace refuses with a ConfigError
before it writes anything, rather than call internals whose signatures may have moved. Exit: a
Delta API that writes a replace's files and commits them when asked: none in delta-spark's Python
or Scala API (Delta Kernel's Transaction splits them so, for engines other than Spark). Its
tests: test_staged_write's shape test fails when the installed Delta no longer has what this calls
(then the gate was too wide), and test_versions' gate test when the pin moves without the gate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from eos_ingest.errors import ConfigError
from eos_ingest.jvm import java_frame, java_session, jvm_of
from eos_ingest.storage.delta import table_features
from eos_ingest.versions import installed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

# The delta-spark series whose internals stage_replace calls, as written and tested.
KNOWN_SERIES = (4, 4)
DELTA_VERSION = installed("delta-spark")
STAGING_ON = DELTA_VERSION[:2] == KNOWN_SERIES


@dataclass
class StagedReplace:
    """The files of one replace, written and not committed. commit() publishes them in one Delta
    commit; abort() deletes them. `skipped`: Delta found the app id's write of this fence (or a
    newer one) in the table, so nothing was written and nothing is to commit."""

    path: str
    skipped: bool
    added_paths: tuple[str, ...]
    _spark: Any
    # The commit would have created the table: an abort also removes the folders staging made
    # (the table's, its _delta_log, partition folders), so a failed first batch leaves nothing.
    new_table: bool = False
    _txn: Any = None
    _actions: Any = None
    _operation: Any = None
    _tags: Any = None
    _done: bool = False

    def read_back(self, schema: StructType) -> DataFrame:
        """The staged rows, read from the staged files (partition values from their folders, typed
        by `schema`, the written frame's): what the commit will publish, for the gate to check.
        They include the files of Delta's row-level rewrite of a replaced file that also held rows
        outside the predicate (those rows, kept, are in new files too)."""
        if not self.added_paths:
            empty = self._spark.sparkContext.emptyRDD()  # a JVM RDD: no Python worker starts
            return self._spark.createDataFrame(empty, schema)
        jvm = jvm_of(self._spark)
        root = jvm.org.apache.hadoop.fs.Path(self.path)
        files = [str(_absolute(jvm, root, relative).toString()) for relative in self.added_paths]
        return self._spark.read.schema(schema).option("basePath", self.path).parquet(*files)

    def read_arrow(self, schema: StructType, batch_id: int) -> pa.Table | None:
        """The staged rows of `batch_id`, the columns of `schema`, read by pyarrow from the staged
        files: the rows and Arrow types of read_back(schema).where(batch_id).toArrow(), without a
        Spark job (0.05-0.15 s for 950,000 rows, against ~0.8 s). None where pyarrow cannot stand
        in for Spark's read, and the caller reads them back with Spark: files not on a local disk,
        or a column not in the files (a partition value only in a folder's name)."""
        from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415 pyspark, which the CLI and the audit, importing this module through table_formats, may never use

        files = _local_files(self.path, self.added_paths)
        if not files:
            return None
        dataset = ds.dataset(files, format="parquet")
        names = [field.name for field in schema.fields]
        wanted = [*names, "batch_id"]
        # Every file must hold every column, typed alike (a rewritten file of an older schema may not).
        fields = None
        for fragment in dataset.get_fragments():
            physical = fragment.physical_schema
            if any(name not in physical.names for name in wanted):
                return None
            these = [physical.field(name) for name in wanted]
            if fields is not None and these != fields:
                return None
            fields = these
        large = self._spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        target = to_arrow_schema(
            schema, error_on_duplicated_field_names_in_struct=True, prefers_large_types=large
        )
        table = dataset.to_table(columns=names, filter=pc.field("batch_id") == batch_id)
        try:  # Spark's Arrow types (timestamps as UTC microseconds), whatever the Parquet types
            return table.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None

    def commit(self) -> int | None:
        """Commit the staged actions as Delta's own write does (commitIfNeeded, with the write's
        commit tags: row tracking reads them); the version of that commit, or None when nothing
        was committed (skipped, or a replace with nothing to add or remove, without a txn). Raises
        Delta's concurrent-modification errors as any write does (the caller stages anew)."""
        if self._done:
            raise RuntimeError(f"the staged replace into {self.path} was already committed or aborted")
        self._done = True
        if self.skipped:
            return None
        active = _active_txn(self._spark)
        active.setActive(self._txn)
        try:
            version = self._txn.commitIfNeeded(self._actions, self._operation, self._tags)
        finally:
            active.clearActive()
        return int(version.get()) if version.isDefined() else None

    def abort_lost_commit(self) -> None:
        """abort() after a commit that lost to a concurrent writer: Delta raises its
        concurrent-modification errors before it writes the log entry, so no version holds the
        files and they are deleted as if the commit had not been tried."""
        self._done = False
        self.abort()

    def abort(self) -> None:
        """Delete the staged files (never referenced by the log: added_paths holds only files this
        write made, never a live file re-added with a deletion vector). Best effort: a file left
        behind is invisible to readers and VACUUM removes it. Never after a commit was tried: an
        error from the commit does not prove that no log entry points at the files."""
        if self._done:
            return
        self._done = True
        if not self.added_paths and not self.new_table:
            return
        jvm = jvm_of(self._spark)
        root = jvm.org.apache.hadoop.fs.Path(self.path)
        fs = root.getFileSystem(java_session(self._spark).sessionState().newHadoopConf())
        for relative in self.added_paths:
            try:
                fs.delete(_absolute(jvm, root, relative), False)
            except Exception:  # invisible to readers; VACUUM removes it
                log.warning("could not delete the staged file %s of %s", relative, self.path, exc_info=True)
        if self.new_table:
            _remove_empty_folders(fs, root)


def stage_replace(
    spark: SparkSession,
    rows: DataFrame,
    path: str,
    predicate: str,
    partition_by: Sequence[str],
    options: dict[str, str],
) -> StagedReplace:
    """Write `rows` as the files of a Delta replaceWhere of `predicate` into the table at `path`
    (created by the commit if absent), without committing. `options` are the DataFrame writer's
    Delta options besides replaceWhere (txnAppId, txnVersion, userMetadata, mergeSchema)."""
    if not STAGING_ON:
        raise ConfigError(
            f"delta-spark {'.'.join(map(str, DELTA_VERSION))}: eos-ingest stages a replace through "
            f"Delta's internals, tested on delta-spark {'.'.join(map(str, KNOWN_SERIES))}.x only; "
            "install that series (the package's pin)"
        )
    jvm = jvm_of(spark)
    jspark = java_session(spark)
    utils = jvm.org.apache.spark.api.python.PythonUtils
    none = jvm.scala.Option.empty()
    delta = jvm.org.apache.spark.sql.delta
    all_options = {**options, "replaceWhere": predicate}
    delta_options = delta.DeltaOptions(utils.toScalaMap(all_options), jspark.sessionState().conf())
    overwrite = jvm.org.apache.spark.sql.SaveMode.Overwrite
    columns = utils.toSeq(list(partition_by))
    delta_log = delta.DeltaLog.forTable(jspark, path)
    txn = delta_log.startTransaction()
    command = delta.commands.WriteIntoDelta(
        delta_log,
        overwrite,
        delta_options,
        columns,
        utils.toScalaMap({}),
        java_frame(rows),
        none,
        none,
        False,
    )
    active = _active_txn(spark)
    # As in WriteIntoDelta.run: the transaction is the thread's active one while it writes.
    active.setActive(txn)
    try:
        if txn.readVersion() >= 0:  # a feature set since the plan: refused before any file is written
            table_features.check(path, table_features.shape_of_txn(txn))
        if command.hasBeenExecuted(txn, jspark, jvm.scala.Some(delta_options)):
            return StagedReplace(path, True, (), spark)
        tagged = command.writeAndReturnCommitData(txn, jspark, none, False)
    finally:
        active.clearActive()
    actions = tagged.actions()
    # The files this write made. An AddFile with a deletion vector re-adds a live file (a replace
    # over part of it): never the staged write's to read back as new or to delete on abort.
    added = tuple(
        str(actions.apply(i).path())
        for i in range(actions.size())
        if actions.apply(i).getClass().getSimpleName() == "AddFile"
        and actions.apply(i).deletionVector() is None
    )
    operation = delta.DeltaOperations.Write(
        overwrite,
        jvm.scala.Some(columns),
        jvm.scala.Some(predicate),
        jvm.scala.Some(options["userMetadata"]) if "userMetadata" in options else none,
        none,
        none,
        jvm.scala.Some(True) if options.get("mergeSchema") == "true" else none,
        none,
        none,
    )
    staged = StagedReplace(
        path, False, added, spark, txn.readVersion() < 0, txn, actions, operation, tagged.stringTags()
    )
    try:  # what the commit would write: a new table takes the session's defaults (deletion vectors...)
        table_features.check(path, table_features.shape_of_txn(txn))
    except ConfigError:
        staged.abort()
        raise
    return staged


def _remove_empty_folders(fs: Any, folder: Any) -> None:
    """Delete `folder` and the folders under it, deepest first, each only while it is empty: a
    non-recursive delete refuses a folder into which a concurrent first writer has just put a file
    (its commit, say), so that writer loses nothing."""
    try:
        for status in fs.listStatus(folder):
            if status.isDirectory():
                _remove_empty_folders(fs, status.getPath())
        fs.delete(folder, False)
    except Exception:  # not empty, or already gone: leave it
        log.debug("kept the folder %s", folder, exc_info=True)


def _active_txn(spark: SparkSession) -> Any:
    """Delta's companion object that holds the thread's active transaction."""
    return getattr(getattr(jvm_of(spark).org.apache.spark.sql.delta, "OptimisticTransaction$"), "MODULE$")


def _absolute(jvm: Any, root: Any, relative: str) -> Any:
    """The Hadoop path of an AddFile's path, which is a URI (a partition value with a space is
    %20 there), relative to the table's root unless absolute: as Delta resolves it."""
    child = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(relative))
    return child if child.isAbsolute() else jvm.org.apache.hadoop.fs.Path(root, child)


def _local_files(table: str, added_paths: Sequence[str]) -> list[str]:
    """The local paths of a table's added files (URIs relative to the table's root, as Delta
    records them), or [] when the table or a file is not on the local file system."""
    root = urlparse(table)
    if root.scheme not in ("", "file"):
        return []
    base = Path(unquote(root.path) if root.scheme else table)
    files = []
    for relative in added_paths:
        parsed = urlparse(relative)
        if parsed.scheme not in ("", "file"):
            return []
        path = Path(unquote(parsed.path))
        files.append(str(path if path.is_absolute() else base / path))
    return files
