"""storage/commit_outcomes.outcome (and delta_outcome_unknown) on Iceberg's own exception objects, built in the test session's JVM
and thrown through py4j (a failed CompletableFuture's join wraps them, as Spark's and Iceberg's
callers wrap them), never on message text: a message that says "CommitFailedException" in an
exception of another class decides nothing."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from eos_ingest.storage.commit_outcomes import delta_outcome_unknown, delta_refused_state, outcome

pytestmark = pytest.mark.integration

EXC = "org.apache.iceberg.exceptions"


def thrown(spark, throwable: Any) -> Py4JJavaError:
    """`throwable` as py4j raises it from a real Java call (wrapped in a CompletionException)."""
    future = spark._jvm.java.util.concurrent.CompletableFuture.failedFuture(throwable)
    with pytest.raises(Py4JJavaError) as raised:
        future.join()
    return raised.value


def no_args(spark) -> Any:
    return spark.sparkContext._gateway.new_array(spark._jvm.java.lang.Object, 0)


def _construct(spark, qualified: str, *args: Any) -> Any:
    """A new instance of the Java class `qualified` (py4j picks the constructor by the args)."""
    cls: Any = spark._jvm
    for part in qualified.split("."):
        cls = getattr(cls, part)
    return cls(*args)


def test_unknown_lost_refused_and_other_by_the_exception_class(spark) -> None:
    jvm = spark._jvm
    empty = no_args(spark)
    busy = jvm.java.sql.SQLException("[SQLITE_BUSY] The database file is locked (database is locked)")
    reset = jvm.java.net.SocketException("Connection reset")
    dropped = jvm.java.sql.SQLTransientConnectionException(
        "An I/O error occurred while sending to the backend."
    )
    cases = {
        # A REST catalog's 5xx or lost answer to a commit: Iceberg itself does not know.
        "unknown-state": (
            f"{EXC}.CommitStateUnknownException",
            (jvm.java.lang.RuntimeException("503"),),
            "unknown",
        ),
        # A connection closed instead of an answer (the REST client's IOException, wrapped).
        "rest": (
            f"{EXC}.RESTException",
            (reset, "Error occurred while processing POST request", empty),
            "unknown",
        ),
        "service-failure": (f"{EXC}.ServiceFailureException", ("Server error: 502", empty), "unknown"),
        # SQLite busy past its timeout; a JDBC connection dropped mid-UPDATE.
        "sqlite-busy": (
            "org.apache.iceberg.jdbc.UncheckedSQLException",
            (busy, "Unknown failure", empty),
            "unknown",
        ),
        "pg-dropped": ("java.lang.RuntimeException", (dropped,), "unknown"),
        # The database answered by refusing the user (a REVOKE: 42501; a wrong password: class 28),
        # under the JDBC catalog's UncheckedSQLException("Unknown failure"): refused. A server that
        # ended the session (57P01) or a connection failure (08006) says nothing: unknown.
        "pg-privilege": (
            "org.apache.iceberg.jdbc.UncheckedSQLException",
            (
                jvm.java.sql.SQLException("permission denied for table iceberg_tables", "42501"),
                "Unknown failure",
                empty,
            ),
            "refused",
        ),
        "pg-login": (
            "java.lang.RuntimeException",
            (jvm.java.sql.SQLException("auth failed", "28P01"),),
            "refused",
        ),
        "pg-shutdown": (
            "org.apache.iceberg.jdbc.UncheckedSQLException",
            (jvm.java.sql.SQLException("terminating connection", "57P01"), "Unknown failure", empty),
            "unknown",
        ),
        "pg-connection": (
            "java.lang.RuntimeException",
            (jvm.java.sql.SQLException("gone", "08006"),),
            "unknown",
        ),
        # Lost to a concurrent commit after Iceberg's own retries: nothing landed.
        "lost": (f"{EXC}.CommitFailedException", ("Requirement failed: ref main changed", empty), "lost"),
        "refused": (f"{EXC}.ForbiddenException", ("Forbidden: commit", empty), "refused"),
        "bad-request": (f"{EXC}.BadRequestException", ("Malformed", empty), "other"),
        # The text of another class decides nothing.
        "text-only": (
            "java.lang.IllegalArgumentException",
            ("CommitFailedException: Cannot fast-forward",),
            "other",
        ),
    }
    found = {
        name: outcome(thrown(spark, _construct(spark, cls, *args))) for name, (cls, args, _) in cases.items()
    }
    assert found == {name: expected for name, (_, _, expected) in cases.items()}


def test_delta_commit_errors_of_io_are_unknown_its_own_refusals_are_not(spark) -> None:
    jvm = spark._jvm
    coordinator = jvm.java.io.IOException("Delta commit coordinator at jdbc:postgresql://db/x failed: closed")
    missing = jvm.java.io.FileNotFoundException("s3a://bucket/t/_delta_log/00000000000000000003.json")
    refused = jvm.java.nio.file.FileSystemException(
        "s3a://bucket/t: the Delta commit coordinator holds 2 entries"
    )
    assert delta_outcome_unknown(thrown(spark, coordinator))
    assert delta_outcome_unknown(thrown(spark, jvm.java.lang.RuntimeException(missing)))
    assert not delta_outcome_unknown(thrown(spark, refused))
    assert not delta_outcome_unknown(thrown(spark, jvm.java.lang.IllegalStateException("IOException")))


def test_a_delta_coordinator_refusing_the_user_is_told_by_its_sql_state(spark) -> None:
    jvm = spark._jvm

    def coordinator_failed(state: str) -> Py4JJavaError:
        sql = jvm.java.sql.SQLException("permission denied for table eos_delta_commits", state)
        return thrown(
            spark, jvm.java.io.IOException("Delta commit coordinator at jdbc:postgresql://db/x failed", sql)
        )

    assert delta_refused_state(coordinator_failed("42501")) == "42501"
    assert delta_refused_state(coordinator_failed("28P01")) == "28P01"
    # A session the database ended says nothing of the statement: unknown, not refused.
    assert delta_refused_state(coordinator_failed("08006")) is None
    assert delta_outcome_unknown(coordinator_failed("08006"))
    assert delta_refused_state(thrown(spark, jvm.java.io.IOException("closed"))) is None
    assert delta_refused_state(RuntimeError("42501")) is None


def test_an_unknown_state_wins_over_what_it_wraps_and_python_errors_are_other(spark) -> None:
    empty = no_args(spark)
    lost = _construct(spark, f"{EXC}.CommitFailedException", "conflict", empty)
    unknown = _construct(spark, f"{EXC}.CommitStateUnknownException", lost)
    assert outcome(thrown(spark, unknown)) == "unknown"
    assert outcome(RuntimeError("CommitStateUnknownException")) == "other"
    with pytest.raises(Exception) as analysis:  # pyspark's converted error: its _origin is read
        spark.sql("SELECT * FROM eos_no_such_catalog.no_such.table").collect()
    assert outcome(analysis.value) == "other"
