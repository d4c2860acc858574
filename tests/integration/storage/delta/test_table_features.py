"""Delta table features against the staged replace (issue 31, item 2; storage/delta/table_features.py).

Refused before anything is written, with one line naming the feature and the fix: deletion vectors
(at plan time, in the job when set after the plan, and as a new table's session default), column
mapping, liquid clustering, appendOnly. Kept and tested: CHECK constraints (a row that breaks one
fails the batch, nothing written) and row tracking (the commit carries Delta's own commit tags).
And whatever is refused, abort never deletes a live file that a deletion vector re-adds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from eos_ingest.batch.sequence import run_fenced
from eos_ingest.cli import main as cli_main
from eos_ingest.errors import ConfigError, WriteError
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.service.operations import maintain, open_store, plan_batch
from eos_ingest.storage.delta import table_features
from eos_ingest.storage.delta.writer import replace_ranges, stage
from eos_ingest.storage.table_format import Replace
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, first_id: int, count: int = 100, amount: float = 1.0) -> None:
    producer = TxProducer(bootstrap)
    producer.begin()
    producer.send(topic, [{"id": first_id + i, "name": "x", "amount": amount} for i in range(count)])
    producer.commit()


def identities(spark, path: Path) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row, counted, as Spark reads the table (DVs applied)."""
    frame = spark.read.format("delta").load(str(path)).select("kafka_partition", "kafka_offset")
    return Counter((int(r[0]), int(r[1])) for r in frame.collect())


def last_commit_info(path: Path) -> dict:
    log = sorted((path / "_delta_log").glob("*.json"))[-1]
    return next(
        json.loads(line)["commitInfo"] for line in log.read_text().splitlines() if "commitInfo" in line
    )


def alter(spark, path: Path, sql: str) -> None:
    spark.sql(f"ALTER TABLE delta.`{path}` {sql}")


def test_deletion_vectors_are_refused_before_any_write_and_the_compacted_table_keeps_every_row(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic(partitions=1)
    config = make_pipeline([topic], f"sqlite:///{tmp_path / 'control.db'}")
    for i in range(3):  # the reproduction: batches, deletion vectors on, maintain compacts
        produce(kafka_bootstrap, topic, i * 100)
        assert ingest_once(spark, config) is not None
    store = open_store(config)
    # A backfill planned before the property was set: the job must refuse it before any write.
    planned, _ = _backfill(config, store, topic, 0, 150)
    alter(spark, config.output_path, "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    maintain(config, store, spark, retention_hours=168)
    before = identities(spark, config.output_path)
    assert sum(before.values()) == 300 and set(before.values()) == {1}
    version = spark.sql(f"DESCRIBE HISTORY delta.`{config.output_path}` LIMIT 1").first()["version"]

    # In the job (run_fenced, as spark-submit runs it): refused before staging, the batch failed.
    with pytest.raises(ConfigError, match="deletion vectors") as refused:
        run_fenced(spark, config, store, planned)
    assert "DROP FEATURE deletionVectors" in str(refused.value)
    assert store.get_batch(planned.batch_id).status.value == "failed"

    # At plan time: a new backfill and the next scheduled batch are refused, nothing recorded.
    produce(kafka_bootstrap, topic, 300)
    batches = len(store.list_batches(config.name, 100))
    capsys.readouterr()
    code = cli_main(
        ["backfill", "--config", str(config.source), "--topic", topic, "--partitions", "0",
         "--start-offset", "0", "--end-offset", "150", "--reason", "stricter expectation"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "deletion vectors" in err and "nothing was written" in err and str(config.output_path) in err
    with pytest.raises(ConfigError, match=r"delta\.enableDeletionVectors"):
        plan_batch(config, store)
    assert len(store.list_batches(config.name, 100)) == batches

    assert identities(spark, config.output_path) == before  # every row, once, readable
    after = spark.sql(f"DESCRIBE HISTORY delta.`{config.output_path}` LIMIT 1").first()["version"]
    assert after == version  # no commit since


def _backfill(config, store, topic: str, start: int, end: int):
    from eos_ingest.service.operations import record_backfill

    return record_backfill(
        config, store,
        {"topic": topic, "partitions": "0", "start_offset": start, "end_offset": end, "reason": "test"},
    )  # fmt: skip


def test_abort_on_a_deletion_vector_table_never_deletes_the_live_file_it_re_adds(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second layer, below the refusal: a replace over part of a compacted file is a deletion
    vector on that live file, and its AddFile is not one of the staged write's own files."""
    schema = "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, batch_id BIGINT, v STRING"
    path = tmp_path / "table"
    for batch_id, start in ((1, 0), (2, 50)):
        rows = spark.createDataFrame(
            [("t", 0, o, batch_id, "x") for o in range(start, start + 50)], schema
        ).coalesce(1)
        replace_ranges(spark, Replace(rows, str(path), [PlannedRange("t", 0, start, start + 50)], batch_id))
    alter(spark, path, "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"OPTIMIZE delta.`{path}`")  # one file holds both batches
    before = identities(spark, path)
    monkeypatch.setattr(table_features, "check", lambda where, shape: None)  # past the refusal

    rerun = spark.createDataFrame([("t", 0, o, 3, "y") for o in range(0, 10)], schema).coalesce(1)
    staged = stage(spark, Replace(rerun, str(path), [PlannedRange("t", 0, 0, 10)], 3))
    actions = staged._actions
    re_added = [
        str(actions.apply(i).path())
        for i in range(actions.size())
        if actions.apply(i).getClass().getSimpleName() == "AddFile"
        and actions.apply(i).deletionVector() is not None
    ]
    assert re_added, "the replace did not write a deletion vector: the test shows nothing"
    assert not set(re_added) & set(staged.added_paths)
    assert staged.read_back(rerun.schema).count() == 10  # the gate reads the batch's new rows only
    staged.abort()  # what a failed gate or a fenced attempt does

    assert identities(spark, path) == before  # the compacted file is still there: every row once


def test_deletion_vectors_as_a_session_default_are_refused_on_a_new_table_and_leave_no_folder(
    spark, tmp_path: Path
) -> None:
    key = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
    # One partition: an empty one would leave an empty file no action names (Spark's, not ours)
    rows = spark.createDataFrame(
        [("t", 0, 0)], "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT"
    )
    rows = rows.coalesce(1)
    spark.conf.set(key, "true")
    try:
        with pytest.raises(ConfigError, match="deletion vectors"):
            stage(spark, Replace(rows, str(tmp_path / "new"), [PlannedRange("t", 0, 0, 1)], 1))
    finally:
        spark.conf.unset(key)
    left = [str(p) for p in (tmp_path / "new").rglob("*")] if (tmp_path / "new").exists() else []
    assert not (tmp_path / "new").exists(), left


@pytest.mark.parametrize(
    ("create", "named"),
    [
        ("TBLPROPERTIES ('delta.columnMapping.mode' = 'name')", "column mapping"),
        ("CLUSTER BY (kafka_offset)", "liquid clustering"),
        ("TBLPROPERTIES ('delta.appendOnly' = 'true')", "delta.appendOnly"),
    ],
)
def test_features_a_replace_cannot_keep_its_guarantees_on_are_refused_at_plan_with_one_line(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, create: str, named: str
) -> None:
    topic = make_topic(partitions=1)
    config = make_pipeline(
        [topic], f"sqlite:///{tmp_path / 'control.db'}", output={"path": str(tmp_path / "t")}
    )
    spark.sql(
        f"CREATE TABLE delta.`{config.output_path}` (kafka_topic STRING, kafka_partition INT, "
        f"kafka_offset BIGINT) USING delta {create}"
    )
    produce(kafka_bootstrap, topic, 0)
    store = open_store(config)
    with pytest.raises(ConfigError, match=re.escape(named)) as refused:
        plan_batch(config, store)
    assert "\n" not in str(refused.value) and "nothing was written" in str(refused.value)
    assert store.list_batches(config.name) == []


def test_row_tracking_and_check_constraints_work_and_a_row_breaking_a_constraint_fails_the_batch(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    config = make_pipeline([topic], f"sqlite:///{tmp_path / 'control.db'}")
    produce(kafka_bootstrap, topic, 0)
    assert ingest_once(spark, config) is not None
    alter(spark, config.output_path, "SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    alter(spark, config.output_path, "ADD CONSTRAINT amount_not_negative CHECK (amount >= 0)")
    produce(kafka_bootstrap, topic, 100)
    assert ingest_once(spark, config) is not None
    store = open_store(config)
    backfill, _ = _backfill(config, store, topic, 0, 150)  # over both batches
    run_fenced(spark, config, store, store.get_batch(backfill.batch_id))

    rows = spark.read.format("delta").load(str(config.output_path)).select("kafka_offset", "_metadata.row_id")
    assert rows.count() == 200 and rows.select("row_id").distinct().count() == 200
    assert verify_pipeline(spark, config).ok
    # The staged commit carries the commit tags Delta's own write of the same replace gives it.
    ours = last_commit_info(config.output_path)
    assert ours["userMetadata"].startswith(f"eos-ingest batch_id={backfill.batch_id}")
    same = spark.read.format("delta").load(str(config.output_path)).where("kafka_offset < 10")
    same.localCheckpoint().write.format("delta").mode("overwrite").option(
        "replaceWhere", "kafka_offset < 10"
    ).save(str(config.output_path))
    assert ours.get("tags") == last_commit_info(config.output_path).get("tags")

    # A record that breaks the constraint: the batch fails with one line naming it, nothing written.
    produce(kafka_bootstrap, topic, 200, count=5, amount=-1.0)
    version = spark.sql(f"DESCRIBE HISTORY delta.`{config.output_path}` LIMIT 1").first()["version"]
    with pytest.raises(WriteError, match="amount_not_negative") as broke:
        ingest_once(spark, config)
    assert "\n" not in str(broke.value)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{config.output_path}` LIMIT 1").first()["version"] == version
    assert spark.read.format("delta").load(str(config.output_path)).count() == 200
