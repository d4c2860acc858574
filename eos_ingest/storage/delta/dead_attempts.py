"""The Parquet files that killed attempts of a Delta batch staged, deleted once the batch committed.

A Delta attempt writes its files before its commit (storage/delta/staged_write.py), so a killed attempt
leaves files that no Delta commit names: no reader sees them, and VACUUM deletes them once they are
older than its retention. Once a later attempt of the same batch has committed, no older attempt
can ever commit its files: the committed write carries the batch's app id with a newer fence, so
Delta skips an older fence's write at its stage, and refuses its commit when it staged before
(ConcurrentTransactionException). Their files can then go at once.

Which files: under the table's local folder (an object store's are left to VACUUM), Parquet files
outside `_delta_log` that

- no Delta commit made since the batch was planned names (added or removed), nor the current version;
- were written between the batch's plan and the commit of its committed attempt (a file written
  later may be another batch's staged rewrite of this batch's rows, which that batch may still commit);
- hold only rows of this batch (their footer's `batch_id` statistics, min = max = the batch).

The files of Delta's row-level rewrite that a dead attempt staged (other batches' rows, kept
beside the replaced ranges) hold no row of this batch and stay for VACUUM.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from eos_ingest.config.table_location import TableLocation

log = logging.getLogger(__name__)

# Slack for the clocks of the control DB (the batch's plan time) and the file system's times.
CLOCK_SLACK_S = 60.0


def delete_dead_attempt_files(
    location: TableLocation, batch_id: int, since: datetime, commit_version: int | None
) -> list[str]:
    """Delete the files of `batch_id`'s dead attempts in the Delta table at `location` (the
    module), the batch planned at `since` and committed as Delta version `commit_version`; the
    table-relative paths deleted. [] for a table on an object store, or without that version."""
    if not isinstance(location, Path) or commit_version is None:
        return []
    root = Path(location)
    commit = root / "_delta_log" / f"{commit_version:020d}.json"
    if not commit.is_file() or not DeltaTable.is_deltatable(str(root)):
        return []
    start, end = since.timestamp() - CLOCK_SLACK_S, commit.stat().st_mtime
    named = _current_files(DeltaTable(str(root))) | _named_since(root, start)
    deleted = []
    for path in sorted(root.rglob("*.parquet")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("_delta_log/") or relative in named:
            continue
        written = path.stat().st_mtime
        if not start <= written < end or not _only_batch(path, batch_id):
            continue
        path.unlink(missing_ok=True)
        deleted.append(relative)
    if deleted:
        log.info("batch %s: deleted %s files its dead attempts staged in %s", batch_id, len(deleted), root)
    return deleted


def _current_files(delta: Any) -> set[str]:
    """The table-relative paths of the current version's files."""
    return {unquote(str(p)) for p in pa.table(delta.get_add_actions()).column("path").to_pylist()}


def _named_since(root: Path, start: float) -> set[str]:
    """The paths that the Delta commits written since `start` add or remove (table-relative)."""
    named: set[str] = set()
    for entry in (root / "_delta_log").glob("*.json"):
        if entry.stat().st_mtime < start:
            continue
        for line in entry.read_text(encoding="utf-8").splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove"):
                if kind in action:
                    named.add(unquote(action[kind]["path"]))
    return named


def _only_batch(path: Path, batch_id: int) -> bool:
    """True when every row group of the file has `batch_id` statistics of min = max = batch_id."""
    try:
        meta = pq.ParquetFile(path).metadata
    except Exception:  # not a whole Parquet file (an attempt killed while writing it): not ours to judge
        return False
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if "batch_id" not in names or meta.num_row_groups == 0:
        return False
    column = names.index("batch_id")
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max or not (stats.min == stats.max == batch_id):
            return False
    return True
