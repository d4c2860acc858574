"""`eos-ingest maintain` on an Iceberg pipeline's tables: compaction, unpublished branches of
attempts that can no longer publish, expired snapshots and orphan files, in that order.

Iceberg's own maintenance, run with its Java actions (SparkActions) through py4j, not its SQL
procedures (`CALL <catalog>.system.rewrite_data_files(...)`): those need the Iceberg SQL extensions
(`spark.sql.extensions`), a static setting that cannot be set on a running session, and this
project leaves it off its sessions (the batch never needs it, and maintain borrows the running
session when there is one, a test's or a notebook's). The procedures are thin wrappers of the same
actions, so nothing is lost but the SQL spelling.

What is in flight, and how it is kept (the VACUUM lock of control/vacuum_lock.py, as for Delta):

- Compaction (rewrite_data_files, like OPTIMIZE) runs first, outside the lock: it only rewrites
  main's files, one commit on main. A batch staged before it then finds main moved and its
  fast-forward fails: it stages anew from a fresh branch (commit_staged), as after any concurrent
  commit. A rewrite that loses to a batch's publish is retried, as OPTIMIZE is.
- Then maintain takes the pipeline's VACUUM lock unless a batch is in flight (planned, or abandoned
  less than ABANDONED_IN_FLIGHT ago); while it is held no attempt takes a fence, so no new branch
  is cut. The retention is vacuum_retention_hours': with a batch in flight at least 7 days and at
  least the oldest planned batch's age, so every snapshot and file an in-flight attempt made
  (all younger than its batch) is inside it.
- A branch `eos_batch<id>_f<fence>` is removed when its attempt can no longer publish: its batch is
  committed, abandoned for longer than ABANDONED_IN_FLIGHT, unknown, or planned with a newer fence
  than the branch's (the control DB refuses an older fence's publish). The refs are listed before
  the batches are read: a branch seen in the list was cut by an attempt that already held its
  fence, so the read that follows sees that fence. A planned batch's branch of its current fence is
  the running attempt's and is never removed.
- expire_snapshots then expires main's and unreferenced snapshots older than the retention (at
  least main's current one kept) and deletes the files only they referenced: a removed branch's
  snapshots and files go here. A kept branch's snapshots are kept (a branch's head always; its
  ancestors when younger than the retention, which an in-flight attempt's are), so it still
  fast-forwards main.
- remove_orphan_files deletes files under the table that no snapshot references and that are older
  than the retention: the files of an attempt that crashed before its snapshot was committed. Its
  `olderThan` is the safety window for files an attempt is writing right now (not yet in any
  snapshot); a file a kept branch references is no orphan.

Expiring main's old snapshots also drops their write markers (markers.newest_write): past
the retention only the control DB's fence check refuses a late attempt (as Delta's txn ids expire
with its log retention); a planned batch's markers are all inside the retention.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eos_ingest.control.batches import Batch
from eos_ingest.control.schema import BatchStatus
from eos_ingest.control.store import ControlStore
from eos_ingest.control.vacuum_lock import ABANDONED_IN_FLIGHT
from eos_ingest.errors import BatchStateError, MaintenanceBusyError
from eos_ingest.extras import needs_extra
from eos_ingest.jvm import java_session, jvm_of
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.refs import BRANCH_PREFIX
from eos_ingest.storage.lost_races import retry_lost_races
from eos_ingest.storage.maintain_deletes import under_vacuum_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_BRANCH = re.compile(rf"^{BRANCH_PREFIX}(\d+)_f(\d+)$")
# Compaction bins any 2 small files of a partition (Iceberg's default waits for 5): a table that
# takes a small batch an hour gains a file or two per partition between maintains, as with OPTIMIZE.
REWRITE_OPTIONS = {"min-input-files": "2"}
REWRITE_ATTEMPTS = 5


def branch_in_flight(batch: Batch | None, fence: int, now: datetime | None = None) -> bool:
    """Whether the attempt that cut the branch of (`batch`, `fence`) may still publish it: its
    batch is planned (or abandoned less than ABANDONED_IN_FLIGHT ago) and `fence` is the batch's
    current one. An older fence is refused at publish by the control DB; a committed, long
    abandoned or unknown batch has no attempt that may publish."""
    if batch is None or fence != batch.fence:
        return False
    if batch.status is BatchStatus.PLANNED:
        return True
    now = now or datetime.now(UTC)
    return batch.status is BatchStatus.ABANDONED and batch.updated_at > now - ABANDONED_IN_FLIGHT


def stale_branches(refs: list[str], batch_of: Callable[[int], Batch | None]) -> list[str]:
    """The `eos_batch<id>_f<fence>` branches of `refs` whose attempt can no longer publish
    (branch_in_flight). `refs` must be listed before `batch_of` reads the control DB (module)."""
    stale = []
    for name in refs:
        found = _BRANCH.match(name)
        if found and not branch_in_flight(batch_of(int(found[1])), int(found[2])):
            stale.append(name)
    return stale


def figures(table: Any) -> dict[str, int] | None:
    """main's current snapshot: its id, data files and their bytes (from its summary)."""
    table.refresh()
    snapshot = table.currentSnapshot()
    if snapshot is None:
        return None
    summary = snapshot.summary()
    return {
        "version": int(snapshot.snapshotId()),
        "files": int(summary.get("total-data-files") or 0),
        "bytes": int(summary.get("total-files-size") or 0),
    }


def maintain_iceberg_tables(
    spark: SparkSession,
    store: ControlStore,
    pipeline: str,
    catalog: IcebergCatalog,
    tables: dict[str, str],
    requested_hours: float | None,
) -> dict[str, Any]:
    """Maintain the Iceberg tables `tables` (name -> namespace.table) of `catalog` (see the
    module). Returns per name the figures before and after and what each step did (None for a
    table not created yet). MaintenanceBusyError, after compaction, when a batch planned since
    maintain started needs more retention than asked for (as Delta's, delta/maintenance.py)."""
    catalog.ensure(spark)
    loaded: dict[str, Any] = {}
    reports: dict[str, Any] = {}
    for name, table in tables.items():
        if not spark.catalog.tableExists(catalog.identifier(table)):
            reports[name] = None
            continue
        loaded[name] = catalog.java_table(spark, table)
        reports[name] = {"before": figures(loaded[name]), "rewrite": _rewrite(spark, loaded[name], table)}
    with under_vacuum_lock(
        store, pipeline, requested_hours, done="compaction done", left="snapshots and orphan files left"
    ) as held:
        for name, table in loaded.items():
            held.renew(f"{table} not cleaned")
            reports[name].update(_clean(spark, store, loaded[name], held.hours))
            reports[name]["after"] = figures(loaded[name])
    for name, report in reports.items():
        if report is not None:
            log.info("maintained %s: %s", tables[name], report)
    return reports


def _rewrite(spark: SparkSession, table: Any, name: str) -> dict[str, Any]:
    """rewrite_data_files (bin-pack) of main, retried when a batch's publish lands first (its
    commit then fails Iceberg's validation, or keeps losing the metadata commit): the rewrite
    changed nothing and starts over from main as it is. Past the tries MaintenanceBusyError."""
    actions = _actions(spark)

    def once() -> Any:
        table.refresh()
        action = actions.rewriteDataFiles(table)
        for key, value in REWRITE_OPTIONS.items():
            action = action.option(key, value)
        return action.execute()

    def give_up(exc: BaseException, made: int) -> Exception:
        return MaintenanceBusyError(
            f"compaction of {name} lost to concurrent commits {made} times; it changed nothing: "
            "run maintain again"
        )

    result, attempts = retry_lost_races(
        once,
        lost=_lost_to_a_commit,
        tries=REWRITE_ATTEMPTS,
        what=f"rewrite_data_files of {name}",
        give_up=give_up,
    )
    return {
        "rewritten_files": int(result.rewrittenDataFilesCount()),
        "added_files": int(result.addedDataFilesCount()),
        "rewritten_bytes": int(result.rewrittenBytesCount()),
        "attempts": attempts,
    }


def _clean(spark: SparkSession, store: ControlStore, table: Any, hours: float) -> dict[str, Any]:
    """Stale branches removed, then snapshots and orphan files older than `hours` (the module)."""
    table.refresh()
    refs = [str(name) for name in table.refs().keySet()]  # listed before the batches are read

    def batch_of(batch_id: int) -> Batch | None:
        try:
            return store.get_batch(batch_id)
        except BatchStateError:
            return None

    stale = stale_branches(refs, batch_of)
    if stale:
        _remove_branches(table, stale)
        log.info("removed the branches %s of %s: no attempt of theirs may publish", stale, table.name())
    cutoff_ms = int((time.time() - hours * 3600) * 1000)
    actions = _actions(spark)
    table.refresh()
    expired = actions.expireSnapshots(table).expireOlderThan(cutoff_ms).retainLast(1).execute()
    table.refresh()
    orphans = actions.deleteOrphanFiles(table).olderThan(cutoff_ms).execute()
    return {
        "retention_hours": hours,
        "branches_removed": stale,
        "expire": {
            "data_files": int(expired.deletedDataFilesCount()),
            "manifests": int(expired.deletedManifestsCount()),
            "manifest_lists": int(expired.deletedManifestListsCount()),
        },
        "orphan_files": sum(1 for _ in orphans.orphanFileLocations()),
    }


def _remove_branches(table: Any, names: list[str]) -> None:
    """Remove those of `names` the table still has, in one metadata commit; once more, from the
    table read anew, when the commit fails (the batch's own next attempt may have removed one
    meanwhile, branch.remove_stale_branches: removing a missing branch is refused)."""
    for attempt in (1, 2):
        table.refresh()
        present = [name for name in names if table.refs().containsKey(name)]
        if not present:
            return
        update = table.manageSnapshots()
        for name in present:
            update = update.removeBranch(name)
        try:
            update.commit()
            return
        except Exception:
            if attempt == 2:
                raise
            log.warning(
                "removing the branches %s of %s failed; reading the table anew", present, table.name()
            )


def _actions(spark: SparkSession) -> Any:
    """Iceberg's SparkActions of the session (the Java API the SQL procedures call)."""
    return jvm_of(spark).org.apache.iceberg.spark.actions.SparkActions.get(java_session(spark))


def _lost_to_a_commit(exc: BaseException) -> bool:
    """A rewrite whose commit found main changed under it (a batch's publish, a backfill)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return any(
        kind in text for kind in ("ValidationException", "CommitFailedException", "CommitStateUnknown")
    )


def dry_run_iceberg_tables(
    store: ControlStore, catalog: IcebergCatalog, tables: dict[str, str]
) -> dict[str, Any]:
    """What maintain would start from, read with pyiceberg (no Spark, nothing changes): main's
    figures and the branches it would remove (None for a table not created yet)."""
    with needs_extra("iceberg", "maintain --dry-run of an Iceberg table"):
        from pyiceberg.exceptions import NoSuchTableError  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read

    reading = catalog.pyiceberg()
    reports: dict[str, Any] = {}
    for name, table in tables.items():
        try:
            found = reading.load_table(table)
        except NoSuchTableError:
            reports[name] = None
            continue
        snapshot = found.current_snapshot()
        summary = snapshot.summary if snapshot is not None else None
        refs = list(found.refs())  # listed before the batches are read (the module)

        def batch_of(batch_id: int) -> Batch | None:
            try:
                return store.get_batch(batch_id)
            except BatchStateError:
                return None

        reports[name] = {
            "before": None
            if summary is None
            else {
                "version": int(snapshot.snapshot_id),
                "files": int(summary.get("total-data-files") or 0),
                "bytes": int(summary.get("total-files-size") or 0),
            },
            "would_remove_branches": stale_branches(refs, batch_of),
        }
    return reports


def remove_batch_branches(catalog: IcebergCatalog, tables: dict[str, str], batch_id: int) -> list[str]:
    """Remove every staged branch of `batch_id` (`eos_batch<id>_f<fence>`, any fence) from the
    tables `tables` (name -> namespace.table), with pyiceberg (no Spark); the names removed, each as
    `<table>:<branch>`. For a batch no attempt may publish any more (abandoned): an attempt still
    running then finds its branch gone and publishes nothing. Its files stay until maintain's
    expire_snapshots and remove_orphan_files, which delete them past the retention."""
    from pyiceberg.exceptions import NoSuchTableError  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read

    reading = catalog.pyiceberg()
    removed = []
    for table_name in tables.values():
        try:
            table = reading.load_table(table_name)
        except NoSuchTableError:
            continue
        mine = [ref for ref in table.refs() if (m := _BRANCH.match(ref)) and int(m[1]) == batch_id]
        if not mine:
            continue
        update = table.manage_snapshots()
        for ref in mine:
            update = update.remove_branch(ref)
        update.commit()
        removed += [f"{table_name}:{ref}" for ref in mine]
    return removed
