"""Engine set-up and transactions with bounded retries for the control store (SQLite or PostgreSQL)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError

from eos_ingest.control.sqlite_full import sqlite_full_error
from eos_ingest.errors import ConfigError, ControlStoreUnavailableError
from eos_ingest.extras import needs_extra

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors that mean "the database did not answer", as opposed to "the database said no"
# (IntegrityError, or our own FencedError), which must never be retried.
_UNAVAILABLE = (OperationalError, InterfaceError)


class TransactionRunner:
    """Runs a function inside one transaction; retries it while the database is unreachable.

    A function is retried (with exponential back-off, `attempts` times in all) when connecting
    fails or the connection drops before COMMIT is sent: the database rolled it back, so running
    it again is safe. A failure during COMMIT itself is not retried, because the outcome is
    unknown; it raises ControlStoreUnavailableError saying so, and the caller re-reads the state.
    """

    def __init__(self, url: str, attempts: int, backoff_s: float, connect_timeout_s: int) -> None:
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise ConfigError(
                f"control DB URL is not a SQLAlchemy URL ({exc}); e.g. sqlite:///path.db"
            ) from exc
        self.safe_url = parsed.render_as_string(hide_password=True)
        self.backend = parsed.get_backend_name()
        self._attempts = max(1, attempts)
        self._backoff_s = backoff_s
        # The SQLite file, which a full disk error names (None for PostgreSQL or :memory:).
        self.sqlite_file: Path | None = None
        if self.backend == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                self.sqlite_file = Path(parsed.database).expanduser().absolute()
                self.sqlite_file.parent.mkdir(parents=True, exist_ok=True)
            self.engine = create_engine(parsed)
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "begin", _sqlite_on_begin)
        elif self.backend == "postgresql":
            # create_engine imports the driver (psycopg: the `postgres` extra).
            with needs_extra("postgres", f"the PostgreSQL control DB {self.safe_url}"):
                self.engine = create_engine(
                    parsed, pool_pre_ping=True, connect_args={"connect_timeout": connect_timeout_s}
                )
        else:
            raise ConfigError(
                f"control DB URL {self.safe_url}: backend {self.backend!r} is not supported; "
                "use sqlite:///<file> or postgresql+psycopg://user@host/db"
            )

    def dispose(self) -> None:
        self.engine.dispose()

    def run(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """fn(conn) in one transaction (BEGIN IMMEDIATE on SQLite when write), committed on return."""
        last: DBAPIError | None = None
        for attempt in range(self._attempts):
            if attempt:
                delay = self._backoff_s * 2 ** (attempt - 1)
                log.warning(
                    "control store %s unavailable (%s); retrying in %.1f s",
                    self.safe_url,
                    _first_line(last),
                    delay,
                )
                time.sleep(delay)
            try:
                conn = self.engine.connect()
            except _UNAVAILABLE as exc:
                last = exc
                continue
            with conn:
                conn.execution_options(eos_write=write)
                try:
                    tx = conn.begin()
                    result = fn(conn)
                except _UNAVAILABLE as exc:
                    _rollback_quietly(conn)
                    full = sqlite_full_error(exc, self.sqlite_file)
                    if full is not None:
                        raise full from exc
                    if exc.connection_invalidated:
                        last = exc
                        continue
                    if self._busy(exc):
                        # Answered but busy (SQLite lock wait exhausted, a PostgreSQL lock or
                        # serialization failure): retriable later, not in a tight loop here.
                        raise ControlStoreUnavailableError(
                            f"control store {self.safe_url} is busy: {_first_line(exc)}"
                        ) from exc
                    raise
                except BaseException:
                    _rollback_quietly(conn)
                    raise
                try:
                    tx.commit()
                except _UNAVAILABLE as exc:
                    # SQLite's full disk at COMMIT is an answer, not a lost connection: rolled back.
                    full = sqlite_full_error(exc, self.sqlite_file)
                    if full is not None:
                        raise full from exc
                    raise ControlStoreUnavailableError(
                        f"control store {self.safe_url}: the connection failed during COMMIT, so it is "
                        f"unknown whether the transaction was applied; re-read the state ({_first_line(exc)})"
                    ) from exc
                return result
        raise ControlStoreUnavailableError(
            f"control store {self.safe_url} did not answer after {self._attempts} attempts: "
            f"{_first_line(last)}; check that the database is running and reachable"
        ) from last

    def _busy(self, exc: DBAPIError) -> bool:
        # sqlite3 raises OperationalError for a missing table or bad SQL too: only a lock is "busy".
        message = str(exc.orig).lower()
        return self.backend != "sqlite" or "locked" in message or "busy" in message


def _rollback_quietly(conn: Connection) -> None:
    try:
        conn.rollback()
    except DBAPIError as exc:  # the connection is gone; the server rolled back on its own
        log.debug("rollback after failure also failed: %s", exc)


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    orig: Any = getattr(exc, "orig", None) or exc
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module, so _sqlite_on_begin decides BEGIN.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # busy_timeout first: switching to WAL itself needs the lock another process may hold.
    cursor.execute("PRAGMA busy_timeout = 30000")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    # A deferred transaction that later writes cannot wait for the lock (SQLITE_BUSY at once in
    # WAL mode); BEGIN IMMEDIATE takes it up front, so concurrent writers queue on busy_timeout.
    write = conn.get_execution_options().get("eos_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
