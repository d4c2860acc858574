"""Lag has one implementation (eos_ingest.service.status), used by the Ingestion page and `eos-ingest status`.

Pure cases of partition_status, then pipeline_status over a real SQLite control DB with the Kafka
offsets given (the broker's side is tests/integration/service/test_status.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import KafkaUnavailableError
from eos_ingest.plan.ranges import PartitionOffsets, Plan, PlannedRange, TopicPartition
from eos_ingest.service.status import partition_status, pipeline_status

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
NEW_EARLIEST = "new partition: the next batch starts at its earliest offset"
NEW_LATEST = "new partition: the next batch starts at its latest offset"


@pytest.mark.parametrize(
    ("committed", "offsets", "start_from", "lag", "note"),
    [
        # A partition with no committed offset lags by what its first batch would take.
        ({}, PartitionOffsets("t", 0, 3, 10), "earliest", 7, NEW_EARLIEST),  # LSO - log start
        ({}, PartitionOffsets("t", 0, 0, 0), "earliest", 0, NEW_EARLIEST),  # empty log
        ({}, PartitionOffsets("t", 0, 5, 5), "earliest", 0, NEW_EARLIEST),  # all deleted by retention
        ({}, PartitionOffsets("t", 0, 3, 10), "latest", 0, NEW_LATEST),  # a new topic starts at its LSO
        ({}, PartitionOffsets("t", 0, 0, 0), "latest", 0, NEW_LATEST),
        # A partition added to a topic the pipeline already reads starts at its log start, in both modes.
        ({T0: 10}, PartitionOffsets("t", 1, 2, 9), "latest", 7, NEW_EARLIEST),
        ({T0: 10}, PartitionOffsets("t", 1, 2, 9), "earliest", 7, NEW_EARLIEST),
        # Committed partitions: LSO - committed, whatever start_from says.
        ({T1: 4}, PartitionOffsets("t", 1, 0, 10), "earliest", 6, None),
        ({T1: 4}, PartitionOffsets("t", 1, 0, 10), "latest", 6, None),
        ({T1: 10}, PartitionOffsets("t", 1, 0, 10), "latest", 0, None),
        ({T1: 2}, PartitionOffsets("t", 1, 5, 10), "earliest", 8, "offsets [2, 5) were deleted by retention"),
        ({T1: 20}, PartitionOffsets("t", 1, 0, 10), "earliest", -10, "last stable offset below"),
    ],
)
def test_partition_lag_follows_where_the_planner_starts_the_partition(
    committed: dict[TopicPartition, int],
    offsets: PartitionOffsets,
    start_from: str,
    lag: int,
    note: str | None,
) -> None:
    rows = partition_status(committed, [offsets], start_from)
    (row,) = [r for r in rows if r["partition"] == offsets.partition]
    assert row["lag"] == lag
    assert row["note"] is None if note is None else row["note"].startswith(note)
    assert (row["log_start"], row["last_stable_offset"]) == (offsets.log_start, offsets.last_stable)
    assert row["committed_offset"] == committed.get(TopicPartition("t", offsets.partition))


def test_a_partition_kafka_did_not_report_has_no_lag() -> None:
    assert partition_status({T0: 4}, [], "earliest") == [
        {"topic": "t", "partition": 0, "committed_offset": 4, "log_start": None,
         "last_stable_offset": None, "lag": None, "note": None},
    ]  # fmt: skip


@pytest.fixture
def make_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], PipelineConfig]:
    """A pipeline file on topic t with its control DB in tmp_path; its broker is never contacted."""
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))

    def make(start_from: str) -> PipelineConfig:
        doc = {
            "name": "demo",
            "topics": ["t"],
            "kafka": {"bootstrap.servers": "127.0.0.1:1"},
            "kafka_conn_id": None,
            "value": {"format": "raw"},
            "control_db_url": f"sqlite:///{tmp_path / 'control.db'}",
            "start_from": start_from,
        }
        path = tmp_path / "demo.yaml"
        path.write_text(yaml.safe_dump(doc))
        return load_pipeline(path)

    return make


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ControlStore]:
    s = ControlStore(f"sqlite:///{tmp_path / 'control.db'}")
    s.ensure_schema()
    yield s
    s.close()


def commit_first_batch(store: ControlStore, end: int) -> None:
    first = Plan(ranges=(PlannedRange("t", 0, 0, end),), new_partitions=(T0,))
    batch, _ = store.plan_scheduled("demo", lambda committed: first)
    assert batch is not None
    store.commit_batch(
        batch.batch_id, store.take_fence(batch.batch_id), records_read=end, records_written=end,
        records_quarantined=0, delta_version=0, quarantine_delta_version=None,
    )  # fmt: skip


OFFSETS = [PartitionOffsets("t", 0, 0, 10), PartitionOffsets("t", 1, 3, 8)]


@pytest.mark.parametrize(
    ("start_from", "lags", "total"),
    [("earliest", {0: 10, 1: 5}, 15), ("latest", {0: 0, 1: 0}, 0)],
)
def test_status_of_a_pipeline_that_never_ran_counts_new_partitions_by_start_from(
    make_config: Callable[[str], PipelineConfig],
    store: ControlStore,
    start_from: str,
    lags: dict[int, int],
    total: int,
) -> None:
    shown = pipeline_status(make_config(start_from), store, offsets=OFFSETS)
    assert {p["partition"]: p["lag"] for p in shown["partitions"]} == lags
    assert shown["total_lag"] == total and shown["kafka_error"] is None and shown["batches"] == []


@pytest.mark.parametrize("start_from", ["earliest", "latest"])
def test_a_partition_added_after_the_first_batch_lags_from_its_log_start_in_both_modes(
    make_config: Callable[[str], PipelineConfig], store: ControlStore, start_from: str
) -> None:
    commit_first_batch(store, 6)  # partition 0 only: partition 1 is new on a known topic
    shown = pipeline_status(make_config(start_from), store, offsets=OFFSETS)
    assert {p["partition"]: p["lag"] for p in shown["partitions"]} == {0: 10 - 6, 1: 8 - 3}
    assert shown["total_lag"] == 4 + 5
    assert shown["partitions"][1]["note"] == NEW_EARLIEST


def test_read_offsets_runs_after_the_control_db_read_and_its_errors_raise(
    make_config: Callable[[str], PipelineConfig], store: ControlStore
) -> None:
    """What `eos-ingest status` relies on: its retried Kafka read, and exit 75 when the broker is down."""
    config = make_config("earliest")

    def commit_while_reading() -> list[PartitionOffsets]:
        commit_first_batch(store, 6)  # committed after status read the control DB
        return OFFSETS

    shown = pipeline_status(config, store, read_offsets=commit_while_reading)
    assert [(p["committed_offset"], p["lag"]) for p in shown["partitions"]] == [(None, 10), (None, 5)]
    assert shown["batches"] == []  # the DB was read once, before Kafka

    def broker_down() -> list[PartitionOffsets]:
        raise KafkaUnavailableError("Kafka at 127.0.0.1:1 did not answer")

    with pytest.raises(KafkaUnavailableError):
        pipeline_status(config, store, read_offsets=broker_down)
