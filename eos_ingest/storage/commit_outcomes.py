"""What a table commit's error says about the commit: by the Java exception's class (and its
causes'), read through py4j, never by its message's text. Iceberg's catalogs (outcome) and Delta's
log (delta_outcome_unknown; is_delta_conflict, a commit that lost to a concurrent one).

Iceberg:

- `unknown`: the commit may have landed, or may still land. Iceberg says so itself
  (CommitStateUnknownException: a REST catalog's 5xx or a lost answer to a commit); so does any
  error from talking to the catalog (RESTException, a dropped connection or a 503 without an
  answer; UncheckedSQLException or SQLException, a JDBC connection dropped mid-UPDATE or SQLite
  busy past its timeout; an I/O error). The caller must not clean up as if nothing landed nor fail
  the batch: it stays planned, and the next attempt's marker check (iceberg/markers.py, newest_write)
  settles what main holds.
- `lost`: CommitFailedException, which Iceberg raises once its own retries lost to concurrent
  commits (a CleanableFailure: nothing of it landed); stage anew.
- `refused`: the catalog refused this client (NotAuthorizedException, ForbiddenException; a JDBC
  catalog's SQL error whose SQLState says the database refused the user: 42501
  insufficient_privilege, class 28 invalid authorization): a person must fix the credentials or the
  grants; nothing landed. A database that ended or refused the session (class 08, 57P0x) says
  nothing of the statement: unknown.
- `other`: anything else; the caller decides from the table's state.
"""

from __future__ import annotations

from typing import Any, Literal

Outcome = Literal["unknown", "lost", "refused", "other"]

_EXC = "org.apache.iceberg.exceptions."
UNKNOWN_CLASSES = frozenset(
    {
        f"{_EXC}CommitStateUnknownException",
        f"{_EXC}RESTException",  # its subclasses are named below when they mean something else
        "org.apache.iceberg.jdbc.UncheckedSQLException",
        "java.sql.SQLException",
        "java.io.IOException",
        "java.io.UncheckedIOException",
    }
)
# Where a Spark job ran under the commit (the stage's DELETE and append read Kafka), only Iceberg's
# own types count: an I/O error there may be the read's, which the batch's caller judges itself
# (records deleted since the plan fail the batch, batch/sequence.run_fenced).
CATALOG_UNKNOWN_CLASSES = frozenset(
    {
        f"{_EXC}CommitStateUnknownException",
        f"{_EXC}RESTException",
        "org.apache.iceberg.jdbc.UncheckedSQLException",
    }
)
LOST_CLASSES = frozenset({f"{_EXC}CommitFailedException"})
REFUSED_CLASSES = frozenset({f"{_EXC}NotAuthorizedException", f"{_EXC}ForbiddenException"})
# SQLStates (PostgreSQL's, any JDBC driver's that sets them) of a database that answered the
# statement by refusing this user: insufficient_privilege (a REVOKE), and class 28, invalid
# authorization (a wrong password). Nothing was written, and the same statement is refused again.
REFUSED_SQL_STATES = frozenset({"42501"})
REFUSED_SQL_CLASSES = frozenset({"28"})
# RESTExceptions that are the server's definite answer about the request itself, not a lost one.
ANSWERED_CLASSES = frozenset({f"{_EXC}BadRequestException", f"{_EXC}UnprocessableEntityException"})
# A cause chain longer than this is cut (a cyclic or pathological chain must not hang the job).
MAX_CAUSES = 16


def java_throwable(exc: BaseException) -> Any:
    """The Java throwable under a py4j error (Py4JJavaError's java_exception) or a PySpark error
    converted from one (CapturedException's _origin); None for a Python error."""
    java = getattr(exc, "java_exception", None)
    return java if java is not None else getattr(exc, "_origin", None)


def causes(throwable: Any) -> list[Any]:
    """`throwable` and its causes, outermost first (cut at MAX_CAUSES or a cycle)."""
    chain: list[Any] = []
    seen: set[int] = set()
    while throwable is not None and len(chain) < MAX_CAUSES:
        key = int(throwable.hashCode())
        if key in seen:
            break
        seen.add(key)
        chain.append(throwable)
        throwable = throwable.getCause()
    return chain


def names_of(throwable: Any) -> set[str]:
    """The names of the throwable's class and of every superclass (Iceberg's exceptions subclass
    each other and the JDK's)."""
    names: set[str] = set()
    cls = throwable.getClass()
    while cls is not None:
        names.add(str(cls.getName()))
        cls = cls.getSuperclass()
    return names


def classes_of(throwable: Any) -> list[set[str]]:
    """Per throwable of the cause chain from `throwable` down, names_of it."""
    return [names_of(cause) for cause in causes(throwable)]


def refused_sql_state(throwable: Any) -> str | None:
    """The SQLState of the first SQLException in the cause chain from `throwable` that refuses
    this user (REFUSED_SQL_STATES, REFUSED_SQL_CLASSES), else None."""
    for cause in causes(throwable):
        if "java.sql.SQLException" not in names_of(cause):
            continue
        state = cause.getSQLState()
        state = str(state) if state is not None else ""
        if state in REFUSED_SQL_STATES or state[:2] in REFUSED_SQL_CLASSES:
            return state
    return None


def outcome(exc: BaseException, *, catalog_only: bool = False) -> Outcome:
    """What `exc` (raised by a catalog commit through py4j) says about the commit (module doc).
    catalog_only: a Spark job ran under the commit; only Iceberg's own types mean `unknown`."""
    unknown = CATALOG_UNKNOWN_CLASSES if catalog_only else UNKNOWN_CLASSES
    throwable = java_throwable(exc)
    if throwable is None:
        return "other"
    try:
        chain = classes_of(throwable)
        refused_state = refused_sql_state(throwable)
    except Exception:  # the JVM is gone (py4j's connection): nothing tells what landed
        return "unknown"
    if any(names & {f"{_EXC}CommitStateUnknownException"} for names in chain):
        return "unknown"  # whatever it wraps or is wrapped in, Iceberg itself does not know
    if refused_state is not None:
        # The JDBC catalog wraps it as UncheckedSQLException("Unknown failure"), which alone
        # would say unknown: the database's answer under it says the statement was refused.
        return "refused"
    for names in chain:  # the outermost cause that tells decides
        if names & REFUSED_CLASSES:
            return "refused"
        if names & LOST_CLASSES:
            return "lost"
        if names & ANSWERED_CLASSES:
            return "other"
        if names & unknown:
            return "unknown"
    return "other"


# Delta: the log store's own refusals, before anything is written (the commit coordinator's "a
# deleted table's entries remain", a version taken), are FileSystemExceptions.
DELTA_DECIDED_CLASSES = frozenset({"java.nio.file.FileSystemException"})
DELTA_UNKNOWN_CLASSES = frozenset(
    {"java.io.IOException", "java.io.UncheckedIOException", "java.sql.SQLException"}
)


def delta_outcome_unknown(exc: BaseException) -> bool:
    """Whether a Delta commit's error leaves its outcome unknown: an I/O error under it, from the
    object store or the commit coordinator's database (storage/delta/writer.py's commit). Such a commit
    may be decided already: the coordinator's entry is the commit (JdbcLogStore: a connection that
    dropped after the row was written, both tries of its statement failing; or its N.json copy
    failing after the entry, which Delta then reports as a missing file). Delta's conflicts are
    told apart before this (is_delta_conflict)."""
    throwable = java_throwable(exc)
    if throwable is None:
        return False
    try:
        chain = classes_of(throwable)
    except Exception:  # the JVM is gone: nothing tells what landed
        return True
    for names in chain:
        if names & DELTA_DECIDED_CLASSES:
            return False
        if names & DELTA_UNKNOWN_CLASSES:
            return True
    return False


def delta_refused_state(exc: BaseException) -> str | None:
    """The SQLState under a Delta commit's error when the commit coordinator's database refused
    the pipeline's user (REFUSED_SQL_STATES, REFUSED_SQL_CLASSES: a REVOKE, a wrong password),
    else None. Unlike a catalog's refusal, it does not say that nothing landed: a refused UPDATE
    that marks an entry complete comes after the entry, which is the commit."""
    throwable = java_throwable(exc)
    if throwable is None:
        return None
    try:
        return refused_sql_state(throwable)
    except Exception:  # the JVM is gone: nothing tells
        return None


# Delta's concurrent-modification errors: another commit won the race, this one changed nothing.
DELTA_CONFLICTS = (
    "DeltaConcurrentModificationException",
    "ConcurrentWriteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
)


def is_delta_conflict(exc: BaseException) -> bool:
    """True for Delta's concurrent-modification errors (another commit won the race): a batch's
    replace (storage/delta/writer.py) and maintain's OPTIMIZE (storage/delta/maintenance.py) lost
    it, and try again (storage/lost_races.py).

    delta.exceptions turns them into Python classes only once it is imported (the writer and
    OPTIMIZE import it before they write); a raw Py4JJavaError of one of them counts too.
    """
    from delta.exceptions import base  # noqa: PLC0415 delta-spark imports pyspark: only once a Delta commit failed

    if isinstance(exc, tuple(getattr(base, name) for name in DELTA_CONFLICTS)):
        return True
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else ""
    return any(text.startswith(f"io.delta.exceptions.{name}:") for name in DELTA_CONFLICTS)


def refusal_fix(exc: BaseException) -> str:
    """What a person does about a `refused` outcome of `exc`: the grant or the credentials."""
    throwable = java_throwable(exc)
    try:
        state = refused_sql_state(throwable) if throwable is not None else None
    except Exception:
        state = None
    if state is not None:
        return (
            f"the catalog's database refused the pipeline's user (SQLState {state}): grant that user "
            "SELECT, INSERT, UPDATE and DELETE on the catalog's tables iceberg_tables and "
            "iceberg_namespace_properties (or fix its login in output.catalog.uri, else control_db_url)"
        )
    return (
        "the REST catalog refused the pipeline's principal: fix the grants it has on the table, or "
        "the credentials of the Airflow connection named by output.catalog.conn_id"
    )


def describe(exc: BaseException) -> str:
    """The Java exception's class and message (first line), else the Python error's."""
    java = java_throwable(exc)
    try:
        text = str(java.toString()) if java is not None else f"{type(exc).__name__}: {exc}"
    except Exception:
        text = str(exc)
    return text.strip().splitlines()[0][:500] if text.strip() else type(exc).__name__
