"""The staged replace (storage/delta/staged_write.py): the table's files are written in the batch's one pass
and committed only after the gate. Until the commit no reader sees them (Spark nor delta-rs), an
abort deletes them, a kill leaves the table as it was and the rerun lands once, a commit that loses
to a concurrent writer is staged and checked anew, and an older fence stages nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from eos_ingest.errors import ConfigError, WriteError
from eos_ingest.jvm import jvm_of
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.storage.delta import staged_write
from eos_ingest.storage.delta.staged_write import StagedReplace
from eos_ingest.storage.delta.writer import Txn, commit_staged, replace_ranges, stage
from eos_ingest.storage.table_format import Replace

pytestmark = pytest.mark.integration

SCHEMA = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, v STRING, event_date STRING"
APP = "eos-ingest/p/batch-{}/2026-11-26T00:00:00+00:00/table"


def make_rows(spark, partition: int, value: str, offsets=range(50)):
    return spark.createDataFrame(
        [("t", partition, offset, value, "2026-11-26") for offset in offsets], SCHEMA
    ).coalesce(1)


def values(path: str) -> list[tuple[int, int, str]]:
    """The table as an independent reader (delta-rs) sees it."""
    table = DeltaTable(path).to_pyarrow_table(columns=["kafka_partition", "kafka_offset", "v"])
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def parquet_files(path: str) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*.parquet")}


def test_staged_files_are_invisible_until_the_commit_and_a_killed_attempt_leaves_the_table_as_it_was(
    spark, tmp_path
) -> None:
    path = str(tmp_path / "table")
    first = [PlannedRange("t", 0, 0, 50)]
    replace_ranges(spark, Replace(make_rows(spark, 0, "old"), path, first, 1, txn=Txn(APP.format(1), 1)))
    before = parquet_files(path)
    wider = [PlannedRange("t", 0, 0, 100)]  # a backfill over the first batch and 50 more offsets

    staged = stage(
        spark, Replace(make_rows(spark, 0, "new", range(100)), path, wider, 2, txn=Txn(APP.format(2), 1))
    )
    assert not staged.skipped and staged.added_paths
    assert parquet_files(path) > before  # the files are on disk ...
    assert values(path) == [(0, o, "old") for o in range(50)]  # ... and no reader sees them
    assert spark.read.format("delta").load(path).where("v = 'new'").count() == 0

    # A kill here: neither commit nor abort. The next attempt stages and commits on its own.
    rerun = stage(
        spark, Replace(make_rows(spark, 0, "new", range(100)), path, wider, 2, txn=Txn(APP.format(2), 2))
    )
    result = commit_staged(lambda: rerun, path, 2, txn=Txn(APP.format(2), 2))
    assert result.attempts == 1 and result.written_by_fence == 2
    assert values(path) == [(0, o, "new") for o in range(100)]  # once each, old rows replaced
    assert spark.read.format("delta").load(path).count() == 100


def test_an_aborted_staged_replace_deletes_its_files_and_commits_nothing(spark, tmp_path) -> None:
    path = str(tmp_path / "table")
    ranges = [PlannedRange("t", 0, 0, 50)]
    replace_ranges(spark, Replace(make_rows(spark, 0, "old"), path, ranges, 1))
    before, version = parquet_files(path), DeltaTable(path).version()

    staged = stage(spark, Replace(make_rows(spark, 0, "new"), path, ranges, 2))
    assert set(staged.added_paths) <= parquet_files(path) - before
    staged.abort()  # what a failed gate does

    # Gone from disk. (Delta's row-level rewrite of the replaced file may leave an empty file that
    # no action names, as any replaceWhere on data columns does: VACUUM's, not ours.)
    assert not set(staged.added_paths) & parquet_files(path)
    assert DeltaTable(path).version() == version
    assert values(path) == [(0, o, "old") for o in range(50)]
    with pytest.raises(RuntimeError, match="already committed or aborted"):
        staged.commit()

    # The first batch of a table: an abort leaves no folder behind either.
    fresh = str(tmp_path / "fresh")
    first = stage(spark, Replace(make_rows(spark, 0, "new"), fresh, ranges, 1, partition_by=["event_date"]))
    assert first.added_paths and Path(fresh, "_delta_log").is_dir()
    first.abort()
    assert not Path(fresh).exists()


def test_a_staged_commit_that_loses_to_a_concurrent_writer_is_staged_and_checked_anew(
    spark, tmp_path
) -> None:
    path = str(tmp_path / "table")
    seed = make_rows(spark, 0, "seed", range(1)).union(make_rows(spark, 1, "seed", range(1)))
    replace_ranges(spark, Replace(seed, path, [PlannedRange("t", 0, 0, 1), PlannedRange("t", 1, 0, 1)], 1))
    mine = [PlannedRange("t", 0, 0, 1)]
    tries: list[StagedReplace] = []
    checked: list[list[str]] = []

    def stage_mine() -> StagedReplace:
        tries.append(
            stage(spark, Replace(make_rows(spark, 0, f"mine-{len(tries) + 1}", range(1)), path, mine, 2))
        )
        return tries[-1]

    def check(staged: StagedReplace) -> None:  # the gate: reads what the commit will publish
        back = staged.read_back(make_rows(spark, 0, "").schema).where("kafka_partition = 0")
        checked.append(sorted(r.v for r in back.collect()))  # (a rewrite keeps partition 1's row too)
        if len(checked) == 1:  # another writer commits between this try's staging and its commit
            replace_ranges(
                spark, Replace(make_rows(spark, 1, "other", range(1)), path, [PlannedRange("t", 1, 0, 1)], 3)
            )

    result = commit_staged(stage_mine, path, 2, txn=Txn(APP.format(2), 1), check=check, backoff_s=0.1)

    assert result.attempts == 2 and len(tries) == 2  # the first commit conflicted; a new stage landed
    assert checked == [["mine-1"], ["mine-2"]]  # each try's own files passed the check before its commit
    assert values(path) == [(0, 0, "mine-2"), (1, 0, "other")]
    assert not set(tries[0].added_paths) & parquet_files(path)  # the losing try's files are deleted
    assert result.version == DeltaTable(path).version()  # the version Delta's commit returned


def test_an_older_fence_stages_nothing_and_the_table_keeps_the_newer_write(spark, tmp_path) -> None:
    path = str(tmp_path / "table")
    ranges = [PlannedRange("t", 0, 0, 50)]
    app = APP.format(7)
    winner = replace_ranges(spark, Replace(make_rows(spark, 0, "winner"), path, ranges, 7, txn=Txn(app, 2)))
    before = parquet_files(path)

    zombie = stage(spark, Replace(make_rows(spark, 0, "zombie"), path, ranges, 7, txn=Txn(app, 1)))
    assert zombie.skipped and not zombie.added_paths and parquet_files(path) == before
    result = commit_staged(lambda: zombie, path, 7, txn=Txn(app, 1))
    assert (result.version, result.written_by_fence) == (winner.version, 2)
    assert {v for _, _, v in values(path)} == {"winner"}


def test_a_staged_row_outside_the_batch_ranges_fails_before_anything_is_committed(spark, tmp_path) -> None:
    path = str(tmp_path / "table")
    ranges = [PlannedRange("t", 0, 0, 50)]
    replace_ranges(spark, Replace(make_rows(spark, 0, "old", range(1)), path, ranges, 1))

    with pytest.raises(WriteError, match="DELTA_REPLACE_WHERE_MISMATCH"):
        stage(spark, Replace(make_rows(spark, 0, "stray", [99]), path, ranges, 2))
    assert values(path) == [(0, 0, "old")]


def test_the_counts_come_with_the_staged_pass_and_none_without_an_action(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    from eos_ingest.formats import parser
    from eos_ingest.schema.columns import PARSE_ERROR, UNKNOWN_FIELDS

    parsed = make_rows(spark, 0, "x", range(10)).select(
        "*",
        F.when(F.col("kafka_offset") < 3, F.lit("not JSON")).alias(PARSE_ERROR),
        F.lit(None).cast("array<string>").alias(UNKNOWN_FIELDS),
    )
    observed, observation = parser.observe_split(parsed, 1)
    rows = observed.where(F.col(PARSE_ERROR).isNull()).drop(PARSE_ERROR, UNKNOWN_FIELDS)
    stage(spark, Replace(rows, str(tmp_path / "table"), [PlannedRange("t", 0, 0, 10)], 1))

    assert parser.observed_split(observation) == parser.Split(7, 3, 0, 0) == parser.count_split(parsed)
    # Nothing ran over the frame (Delta skipped the write, say): None, and the caller counts.
    _, unused = parser.observe_split(parsed, 2)
    assert parser.observed_split(unused, wait_s=0.2) is None


def test_read_back_holds_the_new_rows_and_the_rows_a_row_level_rewrite_keeps(spark, tmp_path) -> None:
    """A replace of part of a file's rows rewrites the file: its kept rows (another batch's) are
    in staged files too, so the gate keeps only its own batch's rows of what it reads back."""
    path = str(tmp_path / "table")
    replace_ranges(
        spark, Replace(make_rows(spark, 0, "old", range(20)), path, [PlannedRange("t", 0, 0, 20)], 1)
    )
    new = make_rows(spark, 0, "new", range(4))
    staged = stage(spark, Replace(new, path, [PlannedRange("t", 0, 0, 4)], 2))

    back = staged.read_back(new.schema)
    assert sorted((r.kafka_offset, r.v) for r in back.collect()) == sorted(
        [(o, "new") for o in range(4)] + [(o, "old") for o in range(4, 20)]
    )
    commit_staged(lambda: staged, path, 2)
    assert values(path) == [(0, o, "new") for o in range(4)] + [(0, o, "old") for o in range(4, 20)]


def test_read_arrow_gives_the_gate_what_sparks_read_back_gives_without_a_spark_job(spark, tmp_path) -> None:
    """pyarrow's read of the staged files equals read_back(...).where(batch_id).toArrow(): the same
    rows (the rewrite's kept rows of batch 1 left out), the same Arrow types (a timestamp as
    Spark's UTC microseconds), from files under a partition folder whose name has a space."""
    from pyspark.sql import functions as F

    path = str(tmp_path / "table")
    schema = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, ts TIMESTAMP, batch_id BIGINT, region STRING"

    def rows(batch_id: int, offsets: range):
        return (
            spark.range(offsets.start, offsets.stop)
            .select(
                F.lit("t").alias("kafka_topic"),
                F.lit(0).alias("kafka_partition"),
                F.col("id").alias("kafka_offset"),
                F.timestamp_seconds(F.col("id") + 1_795_000_000).alias("ts"),
                F.lit(batch_id).cast("bigint").alias("batch_id"),
                F.lit("north east").alias("region"),
            )
            .coalesce(1)
        )

    replace_ranges(spark, Replace(rows(1, range(20)), path, [PlannedRange("t", 0, 0, 20)], 1, ["region"]))
    new = rows(2, range(4))
    staged = stage(spark, Replace(new, path, [PlannedRange("t", 0, 0, 4)], 2, ["region"]))
    assert any("north%20east" in p for p in staged.added_paths)  # Delta records the folder as a URI

    narrow = spark.createDataFrame([], schema).select("kafka_topic", "kafka_partition", "kafka_offset", "ts")
    by_pyarrow = staged.read_arrow(narrow.schema, 2)
    by_spark = staged.read_back(new.schema).where("batch_id = 2").select(*narrow.columns).toArrow()
    assert by_pyarrow is not None
    assert by_pyarrow.schema == by_spark.schema
    assert by_pyarrow.sort_by("kafka_offset").equals(by_spark.sort_by("kafka_offset"))
    assert by_pyarrow.column("kafka_offset").to_pylist() == [0, 1, 2, 3]
    assert staged.read_arrow(narrow.schema, 1).num_rows == 16  # the rewrite's kept rows, batch 1's

    # A column the files do not hold: Spark's read-back it is.
    assert staged.read_arrow(spark.createDataFrame([], "not_in_files STRING").schema, 2) is None
    staged.abort()


def test_read_arrow_leaves_a_table_not_on_a_local_disk_to_spark() -> None:
    from eos_ingest.storage.delta.staged_write import _local_files

    assert _local_files("s3a://bucket/table", ("part-0.parquet",)) == []
    assert _local_files("/t", ("s3a://bucket/table/part-0.parquet",)) == []
    assert _local_files("file:/t%20x", ("a=b%20c/part-0.parquet",)) == ["/t x/a=b c/part-0.parquet"]
    assert _local_files("/t", ("a=b%20c/part-0.parquet", "/elsewhere/p.parquet")) == [
        "/t/a=b c/part-0.parquet",
        "/elsewhere/p.parquet",
    ]


def _arities(java_class: Any, names: set[str]) -> dict[str, set[int]]:
    """The parameter counts of `java_class`'s public methods named in `names` (<init>: constructors)."""
    found: dict[str, set[int]] = {}
    for method in java_class.getMethods():
        if method.getName() in names:
            found.setdefault(method.getName(), set()).add(len(method.getParameterTypes()))
    if "<init>" in names:
        found["<init>"] = {len(c.getParameterTypes()) for c in java_class.getConstructors()}
    return found


def test_the_delta_internals_the_staged_replace_calls_have_the_shape_it_calls(spark) -> None:
    """The door's other end (stage_replace and StagedReplace.commit): on a Delta inside the gate
    these members exist with the arguments they are given. When this fails, the installed Delta
    moved them: the gate (staged_write.KNOWN_SERIES) must not take that series in as it is."""
    delta = jvm_of(spark).org.apache.spark.sql.delta
    write = _arities(
        delta.commands.WriteIntoDelta._java_lang_class,
        {"<init>", "writeAndReturnCommitData", "hasBeenExecuted"},
    )
    assert 9 in write["<init>"] and 4 in write["writeAndReturnCommitData"] and 3 in write["hasBeenExecuted"]
    assert 3 in _arities(delta.OptimisticTransaction._java_lang_class, {"commitIfNeeded"})["commitIfNeeded"]
    assert 9 in _arities(delta.DeltaOperations.Write._java_lang_class, {"<init>"})["<init>"]
    active = _arities(getattr(delta, "OptimisticTransaction$")._java_lang_class, {"setActive", "clearActive"})
    assert 1 in active["setActive"] and 0 in active["clearActive"]


def test_outside_the_gate_nothing_is_staged(spark, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(staged_write, "DELTA_VERSION", (4, 5, 0))
    monkeypatch.setattr(staged_write, "STAGING_ON", False)
    path = tmp_path / "table"
    with pytest.raises(ConfigError, match=r"delta-spark 4\.5\.0: .* tested on delta-spark 4\.4\.x only"):
        stage(spark, Replace(make_rows(spark, 0, "v"), str(path), [PlannedRange("t", 0, 0, 50)], 1))
    assert not path.exists()
