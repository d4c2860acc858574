"""Delta replace of exactly a batch's offset ranges: a rerun or a backfill replaces, never appends twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eos_ingest.errors import WriteError
from eos_ingest.planner import PlannedRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ranges_predicate(ranges: Sequence[PlannedRange]) -> str:
    """SQL predicate matching exactly the identities inside `ranges` (empty ranges included)."""
    if not ranges:
        raise ValueError("ranges_predicate needs at least one range")
    clauses = [
        f"(kafka_topic = {_sql_string(r.topic)} AND kafka_partition = {int(r.partition)}"
        f" AND kafka_offset >= {int(r.start)} AND kafka_offset < {int(r.end)})"
        for r in sorted(ranges, key=lambda r: (r.topic, r.partition))
    ]
    return " OR ".join(clauses)


def commit_marker(batch_id: int) -> str:
    """The Delta commit's user metadata: which batch wrote it."""
    return f"eos-ingest batch_id={batch_id}"


def replace_ranges(
    spark: SparkSession,
    rows: DataFrame,
    path: str,
    ranges: Sequence[PlannedRange],
    batch_id: int,
    partition_by: Sequence[str] = (),
) -> int:
    """Replace the rows of `ranges` in the Delta table at `path` with `rows`; returns the Delta version.

    The same replaceWhere write also creates a new table (partitioned). There is deliberately no
    "append when the table does not exist yet" branch: two attempts of a first batch would both see
    no table, and Delta retries blind appends, so both copies would land. A replace carries its
    predicate as a read, so the second writer fails with a concurrent-modification error instead.
    On an existing table Delta also checks that every written row matches the predicate, so a row
    outside the batch's ranges fails the write (on the first write the gate's range check covers it).
    """
    try:
        (
            rows.write.format("delta")
            .option("userMetadata", commit_marker(batch_id))
            .mode("overwrite")
            .option("replaceWhere", ranges_predicate(ranges))
            .partitionBy(*partition_by)
            .save(path)
        )
        return version_written_by(spark, path, batch_id)
    except Exception as exc:
        raise WriteError(f"Delta replace of batch {batch_id} into {path} failed: {exc}") from exc


def version_written_by(spark: SparkSession, path: str, batch_id: int) -> int:
    """The Delta version at which the table holds the batch's rows.

    That is the newest commit carrying the batch's marker. Delta writes no commit at all when a
    replace has nothing to remove and nothing to add (a range of only aborted records, a quarantine
    with no bad rows), and then the table's current version already holds the batch.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    history = DeltaTable.forPath(spark, path).history(20)
    found = history.agg(
        F.max(F.when(F.col("userMetadata") == commit_marker(batch_id), F.col("version"))).alias("mine"),
        F.max("version").alias("latest"),
    ).first()
    if found is None or found["latest"] is None:
        raise WriteError(f"the Delta table at {path} has no history")
    return int(found["mine"] if found["mine"] is not None else found["latest"])
