"""When a catch-up run stops; what the submitter knows of a job's size."""

from __future__ import annotations

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.control.store import Batch, ControlStore
from eos_ingest.errors import ConfigError
from eos_ingest.plan.ranges import PlannedRange, TopicPartition
from eos_ingest.service.operations import caught_up, job_records, maintain
from tests.helpers.batches import batch_row

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.mark.parametrize(
    ("committed", "target", "expected"),
    [
        ({A: 10, B: 5}, {A: 10, B: 5}, True),  # exactly at the target
        ({A: 12, B: 5}, {A: 10, B: 5}, True),  # past it (records produced since)
        ({A: 9, B: 5}, {A: 10, B: 5}, False),  # one partition behind
        ({A: 10}, {A: 10, B: 0}, False),  # a partition not seen yet: the next plan records it
        ({A: 10, B: 5}, {A: 10}, True),  # a partition added after the start is the next run's
        ({}, {}, True),  # no partitions: nothing to do
    ],
)
def test_caught_up(committed, target, expected) -> None:
    assert caught_up(committed, target) is expected


def batch_of(*lengths: int) -> Batch:
    return batch_row(1, *(PlannedRange("t", p, 100, 100 + n) for p, n in enumerate(lengths)))


def test_a_jobs_records_are_its_planned_ranges_and_unknown_for_a_catch_up_at_the_cap() -> None:
    assert job_records(batch_of(40, 0, 7), 100) == 47
    assert job_records(batch_of(100, 3), 100) == 103  # one batch: its ranges are all it reads
    assert job_records(batch_of(99, 3), 100, until_caught_up=True) == 102  # the lag fit in one batch
    assert job_records(batch_of(100, 3), 100, until_caught_up=True) is None  # more batches may follow
    assert job_records(batch_of(), 100, until_caught_up=True) == 0


def test_maintain_dry_run_of_an_iceberg_pipeline_reads_its_catalog_without_spark(
    tmp_path, monkeypatch
) -> None:
    """maintain dispatches an Iceberg pipeline to Iceberg's maintenance (no longer refused): its dry
    run reads the catalog with pyiceberg, without Spark, and creates no table; the retention check
    against planned batches is the same as Delta's."""
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    doc = {"name": "orders", "topics": ["orders"], "value": {"format": "raw"},
           "output": {"format": "iceberg", "table": "lake.orders"},
           "control_db_url": f"sqlite:///{tmp_path / 'control.db'}"}  # fmt: skip
    (tmp_path / "orders.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    config = load_pipeline(tmp_path / "orders.yaml")
    store = ControlStore(config.control_db_url)
    store.ensure_schema()

    report = maintain(config, store, None, dry_run=True)

    assert report == {"pipeline": "orders", "dry_run": True, "retention_hours": 168.0,
                      "stale_batches": [], "table": None, "quarantine": None}  # fmt: skip
    assert not (tmp_path / "state" / "tables").exists()
    with pytest.raises(ConfigError, match="--retention-hours -1 is not valid"):
        maintain(config, store, None, retention_hours=-1, dry_run=True)
