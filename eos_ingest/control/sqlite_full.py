"""The control DB's SQLite file on a full disk, named in one line: its file, its file system's free
bytes and what to do.

sqlite3 reports it as OperationalError "database or disk is full" (SQLITE_FULL), which the
transaction runner took for a connection lost during COMMIT ("unknown whether the transaction was
applied"). It is not unknown: SQLite rolls back a statement or COMMIT that met SQLITE_FULL, so
nothing of the transaction landed. A batch whose offsets' commit met it stays planned (the error is
retriable, exit 75); its next attempt replaces the same ranges in the table, so the table still
holds each record once. SQLite does not say how many bytes the failed write needed, so the line
gives the free bytes only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from eos_ingest.disk_space import describe
from eos_ingest.errors import DiskFullError

_SQLITE_FULL = 13  # sqlite3.SQLITE_FULL, the primary result code (extended codes share its low byte)


def sqlite_full_error(exc: DBAPIError, sqlite_file: Path | None) -> DiskFullError | None:
    """DiskFullError naming `sqlite_file`'s disk when `exc` is SQLite's SQLITE_FULL, else None."""
    orig = exc.orig
    if sqlite_file is None or not isinstance(orig, sqlite3.Error):
        return None
    code = getattr(orig, "sqlite_errorcode", None)  # Python 3.11+; the text before
    full = code & 0xFF == _SQLITE_FULL if code is not None else "database or disk is full" in str(orig)
    if not full:
        return None
    return DiskFullError(
        f"control DB {sqlite_file}: no space left on {describe(sqlite_file.parent)}; SQLite rolled "
        "the transaction back, so nothing of it was applied (a batch it was committing stays planned "
        "and its next attempt replaces its ranges again): free space there (or move the control DB "
        "to another disk), then run it again"
    )
