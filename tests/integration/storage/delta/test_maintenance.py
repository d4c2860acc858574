"""Table maintenance (eos-ingest maintain): OPTIMIZE + VACUUM after many small batches keeps every
row and exactly-once, and VACUUM never goes below what a planned batch may still read.

`make test` runs 6 small batches, a value that does not parse in every other one: enough that the
table and the quarantine table each hold several small files in one partition, so OPTIMIZE has to
remove every one of them and VACUUM to delete them (what is asserted; the count of batches is not).
EOS_LONG_TESTS=1 runs the long variant: 50 batches, a bad value every tenth.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from deltalake import DeltaTable

from eos_ingest.cli import main as cli_main
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.storage.delta.figures import last_maintenance, table_figures, table_maintenance_status
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

LONG = os.environ.get("EOS_LONG_TESTS") == "1"
BATCHES = 50 if LONG else 6
QUARANTINE_EVERY = 10 if LONG else 2  # the quarantine gets small files in 5 (long) or 3 batches


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def table_rows(path: Path) -> set[tuple]:
    """Every row of the table's current version as (topic, partition, offset, id), with delta-rs."""
    table = DeltaTable(str(path)).to_pyarrow_table(
        columns=["kafka_topic", "kafka_partition", "kafka_offset", "id"]
    )
    return set(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def maintain(config, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict | None, str]:
    code = cli_main(["maintain", "--config", str(config.source), *extra])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def new_pipeline(make_topic, make_pipeline, kafka_bootstrap: str, tmp_path: Path, partitions: int):
    """A pipeline on a new topic with its own SQLite control DB, and a transactional producer."""
    topic = make_topic(partitions=partitions)
    return topic, make_pipeline([topic], f"sqlite:///{tmp_path / 'control.db'}"), TxProducer(kafka_bootstrap)


def test_after_many_small_batches_maintenance_drops_the_file_count_and_keeps_rows_and_exactly_once(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, config, producer = new_pipeline(make_topic, make_pipeline, kafka_bootstrap, tmp_path, 2)
    for i in range(BATCHES):
        # One tiny transaction per batch, and a value that does not parse every QUARANTINE_EVERY
        # batches, so the quarantine table gathers small files too.
        bad = ["not json"] if i % QUARANTINE_EVERY == 0 else []
        producer.transaction(topic, [*rows(i * 4, 4), *bad], commit=True)
        result = ingest_once(spark, config)
        assert result is not None
    before = table_figures(config.output_path)
    rows_before = table_rows(config.output_path)
    quarantine_before = table_figures(config.quarantine_path)
    assert before is not None and quarantine_before is not None
    assert len(rows_before) == BATCHES * 4

    # No batch is planned, so a retention below 7 days is taken: VACUUM deletes the compacted files.
    code, report, err = maintain(config, "--retention-hours", "0", capsys=capsys)

    assert code == 0, err
    after = table_figures(config.output_path)
    quarantine_after = table_figures(config.quarantine_path)
    assert after is not None and quarantine_after is not None
    print(f"table files {before.files} -> {after.files}, bytes {before.bytes} -> {after.bytes}; "
          f"quarantine files {quarantine_before.files} -> {quarantine_after.files}")  # fmt: skip
    assert after.files < before.files
    assert quarantine_after.files < quarantine_before.files
    assert (
        report["table"]["before"]["files"] == before.files
        and report["table"]["after"]["files"] == after.files
    )
    assert report["table"]["optimize"]["numFilesRemoved"] == before.files
    assert report["table"]["vacuum"]["numDeletedFiles"] >= before.files
    # Only the current version's files are left on disk: VACUUM deleted the small ones.
    on_disk = [p for p in Path(config.output_path).rglob("*.parquet") if "_delta_log" not in p.parts]
    assert len(on_disk) == after.files, on_disk
    assert table_rows(config.output_path) == rows_before
    report_v = verify_pipeline(spark, config)
    assert report_v.ok, report_v.to_dict()
    # The page's figures: from the Delta history, no control table.
    shown = table_maintenance_status(config)
    assert shown["table"]["files"] == after.files and shown["table"]["bytes"] == after.bytes
    assert shown["table"]["last_maintenance"]["operation"] == "VACUUM END"
    assert last_maintenance(config.quarantine_path) is not None

    # Batches after the maintenance still land exactly once.
    producer.transaction(topic, rows(10_000, 4), commit=True)
    assert ingest_once(spark, config) is not None
    assert len(table_rows(config.output_path)) == BATCHES * 4 + 4
    assert verify_pipeline(spark, config).ok


def test_vacuum_retention_below_what_a_planned_batch_needs_is_refused_and_nothing_changes(
    spark, kafka_bootstrap, make_topic, make_pipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, config, producer = new_pipeline(make_topic, make_pipeline, kafka_bootstrap, tmp_path, 1)
    for i in range(3):
        producer.transaction(topic, rows(i * 4, 4), commit=True)
        assert ingest_once(spark, config) is not None
    producer.transaction(topic, rows(100, 4), commit=True)
    batch, created = plan_batch(config, open_store(config))  # planned, not run: a crashed ingest
    assert batch is not None and created
    version = table_figures(config.output_path).version

    code, report, err = maintain(config, "--retention-hours", "1", capsys=capsys)

    assert code == 2 and report is None
    assert f"--retention-hours 1 is refused: batch {batch.batch_id} (scheduled" in err
    assert "finish or abandon the batch first" in err
    assert table_figures(config.output_path).version == version  # no OPTIMIZE, no VACUUM
    assert last_maintenance(config.output_path) is None

    # Without the option the retention is Delta's 7 days, and the run goes through.
    code, report, err = maintain(config, capsys=capsys)
    assert code == 0, err
    assert report["retention_hours"] == 168
    assert report["table"]["vacuum"]["numDeletedFiles"] == 0  # every removed file is younger than 7 days
    assert ingest_once(spark, config) is not None  # the planned batch still runs and commits
    assert verify_pipeline(spark, config).ok
