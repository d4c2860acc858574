"""A write that ran out of disk space, recognized and named: which folder, its free space, what to do.

Spark and Delta report a full file system as a JVM IOException ("No space left on device") deep in
a Py4J error, without naming the file system; the job then exited 1 with that traceback. The
batch's local output folders are where its files go, so the error names those with the least
free space. A commit that met the full disk may have landed or not, so the error is retriable and
the batch stays planned: the next attempt replaces its ranges again. No Spark import.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from pathlib import Path

from eos_ingest.disk_space import describe, free_bytes
from eos_ingest.errors import DiskFullError

_MARKERS = ("No space left on device", "Disk quota exceeded")


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (an OSError, or a Py4J error carrying the JVM's text) is a full file system."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return any(marker in text for marker in _MARKERS)


def disk_full_error(exc: BaseException, batch_id: int, folders: Iterable[str]) -> DiskFullError | None:
    """DiskFullError naming the fullest of the local `folders` the batch writes, None unless `exc`
    is a full disk. Object-store paths (s3a://...) are skipped: they do not fill."""
    if not is_disk_full(exc):
        return None
    local = [Path(f) for f in folders if "://" not in f]
    free = {folder: free_bytes(folder) for folder in local}
    known = {folder: size for folder, size in free.items() if size is not None}
    where = describe(min(known, key=lambda f: known[f])) if known else "a file system the batch writes to"
    return DiskFullError(
        f"batch {batch_id}: no space left on {where}; the batch stays planned and its next attempt "
        "replaces its ranges again: free space there (or give that folder another disk), "
        "then run it again"
    )
