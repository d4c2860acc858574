"""control/sqlite_full.py: SQLite's SQLITE_FULL named as the control DB's full disk; nothing else."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.exc import OperationalError

from eos_ingest.control.sqlite_full import sqlite_full_error
from eos_ingest.errors import exit_code


def _error(text: str) -> OperationalError:
    return OperationalError("COMMIT", {}, sqlite3.OperationalError(text))


def test_sqlite_full_names_the_file_its_free_space_and_the_fix_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "control.db"
    error = sqlite_full_error(_error("database or disk is full"), db)
    assert error is not None and error.retriable and exit_code(error) == 75
    line = str(error)
    assert "\n" not in line and str(db) in line and "bytes free now" in line
    assert "nothing of it was applied" in line and "free space there" in line


def test_other_sqlite_errors_and_a_database_without_a_file_are_left_alone(tmp_path: Path) -> None:
    assert sqlite_full_error(_error("database is locked"), tmp_path / "control.db") is None
    assert sqlite_full_error(_error("database or disk is full"), None) is None
