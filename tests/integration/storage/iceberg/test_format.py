"""The Iceberg format's write-audit-publish on a real table of a real JDBC catalog (SQLite): a
staged branch is invisible on main, a zombie's older fence never reaches main, and a publish that
loses to a concurrent commit on main is staged and checked anew; that last one on PostgreSQL too,
where the catalog's commit (its compare-and-set of the metadata location, its table and namespace
rows) is its own SQL, which tests/integration/control/ does not cover. One table for the module per
backend: each test writes ranges of a topic name of its own, so the tests do not see each other's
rows."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.storage.iceberg import refs as iceberg_refs
from eos_ingest.storage.iceberg.branch import StagedBranch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.format import IcebergFormat
from eos_ingest.storage.iceberg.refs import PublishConflictError
from eos_ingest.storage.table_format import Replace, Txn
from tests.fixtures.postgres import postgres_database

pytestmark = pytest.mark.integration

TABLE = "events.t"
SCHEMA = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, batch_id BIGINT, v STRING"
_topics = itertools.count()


@pytest.fixture(scope="module")
def iceberg(tmp_path_factory: pytest.TempPathFactory) -> IcebergFormat:
    folder: Path = tmp_path_factory.mktemp("iceberg")
    return IcebergFormat(
        IcebergCatalog("eos_publish_test", f"sqlite:///{folder / 'control.db'}", str(folder / "wh"))
    )


@pytest.fixture(scope="module")
def iceberg_on_postgresql(
    postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IcebergFormat]:
    """The module's table in a JDBC catalog on PostgreSQL, in a database of its own, dropped after."""
    folder: Path = tmp_path_factory.mktemp("iceberg_pg")
    with postgres_database(postgres_url) as url:
        yield IcebergFormat(IcebergCatalog("eos_publish_test", url, str(folder / "wh")))


def frame(spark, topic: str, offsets: range, batch_id: int, value: str, partition: int = 0):
    return spark.createDataFrame([(topic, partition, o, batch_id, value) for o in offsets], SCHEMA)


def rows_on(spark, fmt: IcebergFormat, topic: str, branch: str | None = None) -> list[tuple[int, str]]:
    name = fmt.catalog.identifier(TABLE) + (f".`branch_{branch}`" if branch else "")
    found = spark.table(name).where(f"kafka_topic = '{topic}'").select("kafka_offset", "v").collect()
    return sorted((r.kafka_offset, r.v) for r in found)


def test_a_staged_branch_is_invisible_on_main_until_it_is_published(spark, iceberg) -> None:
    topic = f"t{next(_topics)}"
    ranges = [PlannedRange(topic, 0, 0, 5)]
    txn = Txn(f"app/{topic}", 1)
    iceberg.replace_ranges(
        spark,
        Replace(frame(spark, topic, range(5), 1, "old"), TABLE, ranges, 1, txn=Txn(f"app/{topic}/0", 1)),
    )

    staged = iceberg.stage(spark, Replace(frame(spark, topic, range(5), 2, "new"), TABLE, ranges, 2, txn=txn))

    assert isinstance(staged, StagedBranch) and not staged.skipped
    assert rows_on(spark, iceberg, topic) == [(o, "old") for o in range(5)]  # main unchanged
    assert rows_on(spark, iceberg, topic, staged.branch) == [(o, "new") for o in range(5)]
    back = staged.read_back(frame(spark, topic, range(0), 2, "").schema).where(f"kafka_topic = '{topic}'")
    assert sorted(r.v for r in back.collect()) == ["new"] * 5  # the gate reads what main will show
    version = staged.commit()
    assert rows_on(spark, iceberg, topic) == [(o, "new") for o in range(5)]
    table = iceberg.catalog.java_table(spark, TABLE)
    assert version == table.currentSnapshot().snapshotId()
    assert not table.refs().containsKey(staged.branch)  # published and removed in one commit


def test_a_zombie_older_fence_never_reaches_main(spark, iceberg) -> None:
    topic = f"t{next(_topics)}"
    ranges = [PlannedRange(topic, 0, 0, 3)]
    app = f"app/{topic}"
    # The zombie (fence 1) staged its branch before the newer attempt (fence 2) published.
    zombie = iceberg.stage(
        spark, Replace(frame(spark, topic, range(3), 7, "zombie"), TABLE, ranges, 7, txn=Txn(app, 1))
    )
    newer = iceberg.replace_ranges(
        spark, Replace(frame(spark, topic, range(3), 7, "newer"), TABLE, ranges, 7, txn=Txn(app, 2))
    )
    assert newer.written_by_fence == 2

    with pytest.raises(PublishConflictError):
        zombie.commit()
    # Staged anew (as commit_staged does after a lost publish), it is skipped: main holds fence 2.
    late = iceberg.replace_ranges(
        spark, Replace(frame(spark, topic, range(3), 7, "zombie"), TABLE, ranges, 7, txn=Txn(app, 1))
    )

    assert rows_on(spark, iceberg, topic) == [(o, "newer") for o in range(3)]
    assert (late.version, late.written_by_fence) == (newer.version, 2)
    again = iceberg.replace_ranges(
        spark, Replace(frame(spark, topic, range(3), 7, "same"), TABLE, ranges, 7, txn=Txn(app, 2))
    )
    assert again.written_by_fence == 2 and rows_on(spark, iceberg, topic) == [(o, "newer") for o in range(3)]
    assert not [b for b in iceberg.catalog.java_table(spark, TABLE).refs().keySet() if "batch7_" in b]


def test_a_rerun_replaces_exactly_its_ranges_and_keeps_the_rows_beside_them(spark, iceberg) -> None:
    topic = f"t{next(_topics)}"
    both = frame(spark, topic, range(10), 1, "first").union(
        frame(spark, topic, range(10), 1, "first", partition=1)
    )
    iceberg.replace_ranges(
        spark, Replace(both, TABLE, [PlannedRange(topic, 0, 0, 10), PlannedRange(topic, 1, 0, 10)], 1)
    )

    # A backfill of offsets 3-6 of partition 0: its files also hold the other offsets and partition 1.
    iceberg.replace_ranges(
        spark, Replace(frame(spark, topic, range(3, 6), 2, "again"), TABLE, [PlannedRange(topic, 0, 3, 6)], 2)
    )

    found = spark.table(iceberg.catalog.identifier(TABLE)).where(f"kafka_topic = '{topic}'").collect()
    assert len(found) == 20
    assert sorted((r.kafka_partition, r.kafka_offset, r.v) for r in found) == sorted(
        [(0, o, "again" if 3 <= o < 6 else "first") for o in range(10)] + [(1, o, "first") for o in range(10)]
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_publish_that_loses_to_a_commit_on_main_is_staged_and_checked_anew_and_lands_once(
    spark, request, backend
) -> None:
    iceberg = request.getfixturevalue("iceberg" if backend == "sqlite" else "iceberg_on_postgresql")
    topic = f"t{next(_topics)}"
    ours, theirs = [PlannedRange(topic, 0, 0, 4)], [PlannedRange(topic, 1, 0, 4)]
    checked: list[str] = []

    def check(staged) -> None:
        checked.append(staged.branch)
        if len(checked) == 1:  # a concurrent backfill reaches main after our branch was cut
            iceberg.replace_ranges(
                spark,
                Replace(
                    frame(spark, topic, range(4), 9, "theirs", partition=1),
                    TABLE,
                    theirs,
                    9,
                    txn=Txn("other", 1),
                ),
            )

    result = iceberg.commit_staged(
        lambda: iceberg.stage(
            spark, Replace(frame(spark, topic, range(4), 8, "ours"), TABLE, ours, 8, txn=Txn("ours", 1))
        ),
        TABLE,
        8,
        txn=Txn("ours", 1),
        check=check,
        backoff_s=0.01,
    )

    assert result.attempts == 2 and len(checked) == 2  # every publish was of a checked branch
    found = spark.table(iceberg.catalog.identifier(TABLE)).where(f"kafka_topic = '{topic}'").collect()
    assert sorted((r.kafka_partition, r.kafka_offset, r.v) for r in found) == sorted(
        [(0, o, "ours") for o in range(4)] + [(1, o, "theirs") for o in range(4)]
    )
    assert result.version == iceberg.catalog.java_table(spark, TABLE).currentSnapshot().snapshotId()


def test_a_branch_cut_that_loses_to_a_commit_on_main_is_cut_anew_and_lands_once(
    spark, iceberg, monkeypatch
) -> None:
    """Another writer's commit landing between the stage's read of main and its branch cut: Iceberg
    refuses the cut ("Table metadata refresh is required"); the try starts over (found by an ingest
    and an overlapping backfill at once, where the backfill exited 1 instead)."""
    topic = f"t{next(_topics)}"
    ranges = [PlannedRange(topic, 0, 0, 4)]
    cuts: list[str] = []
    real = iceberg_refs.commit_refs

    def racing(table, what: str, change):
        if what.startswith("cutting"):
            cuts.append(what)
            if len(cuts) == 1:

                def after_a_commit_on_main(refs):
                    other = iceberg.catalog.java_table(spark, TABLE)  # another handle: another writer
                    other.newAppend().set("eos.test.commit", topic).commit()
                    return change(refs)

                return real(table, what, after_a_commit_on_main)
        return real(table, what, change)

    monkeypatch.setattr(iceberg_refs, "commit_refs", racing)
    result = iceberg.commit_staged(
        lambda: iceberg.stage(
            spark, Replace(frame(spark, topic, range(4), 7, "ours"), TABLE, ranges, 7, txn=Txn(topic, 1))
        ),
        TABLE,
        7,
        txn=Txn(topic, 1),
        backoff_s=0.01,
    )

    assert result.attempts == 2 and len(cuts) == 2
    assert rows_on(spark, iceberg, topic) == [(o, "ours") for o in range(4)]
    assert not any(
        str(name).startswith("eos_batch7_")
        for name in iceberg.catalog.java_table(spark, TABLE).refs().keySet()
    )


def test_a_table_is_created_with_the_pipelines_partition_transforms(spark, iceberg) -> None:
    topic = f"t{next(_topics)}"
    rows = spark.createDataFrame(
        [(topic, 0, o, 1, f"c{o % 3}", datetime(2026, 11, 27 + o % 2, 10)) for o in range(6)],
        "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, batch_id BIGINT, v STRING, ts TIMESTAMP",
    )
    iceberg.replace_ranges(
        spark,
        Replace(
            rows,
            "events.parted",
            [PlannedRange(topic, 0, 0, 6)],
            1,
            ("day(ts)", "bucket(4, v)", "kafka_topic"),
        ),
    )

    spec = iceberg.catalog.java_table(spark, "events.parted").spec()
    fields = [(str(f.name()), str(f.transform())) for f in spec.fields()]
    assert fields == [("ts_day", "day"), ("v_bucket", "bucket[4]"), ("kafka_topic", "identity")]
    assert spark.table(iceberg.catalog.identifier("events.parted")).count() == 6
