"""Pipeline status against the real broker and a real SQLite control DB: lag = LSO - committed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from eos_ingest.cli import main as cli_main
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import ControlStore
from eos_ingest.service.status import pipeline_status
from tests.fixtures.postgres import on_control_db
from tests.helpers.batches import ingest_first_batch
from tests.helpers.kafka import TxProducer, watermarks

# What the status reads from the DB is proven on both backends in tests/integration/control/.
pytestmark = [pytest.mark.integration, on_control_db("sqlite")]


def lso(bootstrap: str, topic: str, partition: int) -> int:
    """The read_committed end of a partition, read by a plain consumer (not project code)."""
    return watermarks(bootstrap, topic, partition, "read_committed")[1]


def without_ages(partitions: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in p.items() if k != "oldest_unread_age_s"} for p in partitions]


def test_lag_is_the_last_stable_offset_minus_the_committed_offset(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    store: ControlStore,
    control_db_url: str,
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i} for i in range(5)], commit=True, partition=0)
    producer.transaction(topic, [{"id": 9}, {"id": 10}], commit=False, partition=0)  # aborted: gaps
    producer.transaction(topic, [{"id": i} for i in range(3)], commit=True, partition=1)
    config = make_pipeline([topic], control_db_url)

    before = pipeline_status(config, store)
    assert before["kafka_error"] is None and before["batches"] == []
    for row in before["partitions"]:  # never ingested: the first batch would take from log start
        assert row["committed_offset"] is None and row["log_start"] == 0
        assert row["lag"] == row["last_stable_offset"] == lso(kafka_bootstrap, topic, row["partition"])
        assert row["note"].startswith("new partition")

    committed = ingest_first_batch(config, store)
    producer.transaction(topic, [{"id": i} for i in range(4)], commit=True, partition=0)
    producer.transaction(topic, [{"id": 99}], commit=True, partition=1)

    after = pipeline_status(config, store)
    assert after["kafka_error"] is None
    rows = {row["partition"]: row for row in after["partitions"]}
    assert sorted(rows) == [0, 1]
    for partition, row in rows.items():
        end = lso(kafka_bootstrap, topic, partition)
        assert row["committed_offset"] == committed[partition]
        assert row["last_stable_offset"] == end
        assert row["lag"] == end - committed[partition] and row["note"] is None
    # Offsets, not records: each committed transaction adds one control marker.
    assert (rows[0]["lag"], rows[1]["lag"]) == (4 + 1, 1 + 1)
    assert after["total_lag"] == rows[0]["lag"] + rows[1]["lag"]
    assert after["batches"][0]["status"] == "committed"
    json.dumps(after)  # the JSON endpoint's payload


def test_an_open_transaction_is_not_lag_until_it_commits(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    store: ControlStore,
    control_db_url: str,
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i} for i in range(3)], commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)
    committed = ingest_first_batch(config, store)[0]

    producer.begin()
    producer.send(topic, [{"id": i} for i in range(6)], partition=0)
    producer.producer.flush(30)
    try:
        high = watermarks(kafka_bootstrap, topic, 0, "read_uncommitted")[1]
        assert high > committed  # the records are on the broker ...
        (row,) = pipeline_status(config, store)["partitions"]
        assert row["last_stable_offset"] == committed and row["lag"] == 0  # ... but not yet decided
    finally:
        producer.commit()
    (row,) = pipeline_status(config, store)["partitions"]
    assert row["lag"] == lso(kafka_bootstrap, topic, 0) - committed == 6 + 1


@pytest.mark.parametrize("start_from", ["earliest", "latest"])
def test_cli_status_shows_the_pages_partitions_and_lag_for_a_partition_never_ingested(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    store: ControlStore,
    control_db_url: str,
    capsys: pytest.CaptureFixture[str],
    start_from: str,
) -> None:
    topic = make_topic(partitions=2)
    TxProducer(kafka_bootstrap).transaction(topic, [{"id": i} for i in range(5)], commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, start_from=start_from)

    assert cli_main(["status", "--config", str(config.source), "--limit", "3"]) == 0
    shown = json.loads(capsys.readouterr().out)
    again = pipeline_status(config, store)["partitions"]
    assert without_ages(shown["partitions"]) == without_ages(again)  # one implementation
    # The age of the lag is in the CLI's JSON too (it grew between the two reads).
    assert [p["oldest_unread_timestamp"] for p in shown["partitions"]] == [
        p["oldest_unread_timestamp"] for p in again
    ]
    end = lso(kafka_bootstrap, topic, 0)
    assert end == 5 + 1  # the records and the commit marker
    # latest: a topic the pipeline has never committed starts at its LSO, so nothing is lag yet
    expected = {0: end, 1: 0} if start_from == "earliest" else {0: 0, 1: 0}
    assert {row["partition"]: row["lag"] for row in shown["partitions"]} == expected
    assert shown["total_lag"] == sum(expected.values()) and shown["batches"] == []


def test_lag_has_the_age_of_the_record_at_the_committed_offset(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    make_pipeline: Callable[..., PipelineConfig],
    store: ControlStore,
    control_db_url: str,
) -> None:
    """The oldest unread record is the first committed one at or after the committed offset: an
    aborted transaction there is skipped (as the pipeline's read skips it), and a partition with
    nothing unread has no age. The timestamps are Kafka's (CreateTime), not the control DB's."""
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i} for i in range(3)], commit=True, partition=0)
    producer.transaction(topic, [{"id": 0}], commit=True, partition=1)
    config = make_pipeline([topic], control_db_url)
    ingest_first_batch(config, store)
    producer.transaction(topic, [{"id": 7}], commit=False, partition=0)  # aborted: not the oldest
    time.sleep(1.5)
    before_unread = datetime.now(UTC)
    producer.transaction(topic, [{"id": i} for i in range(4)], commit=True, partition=0)
    time.sleep(1.0)

    shown = pipeline_status(config, store)
    rows = {row["partition"]: row for row in shown["partitions"]}
    assert shown["oldest_unread_error"] is None
    unread = datetime.fromisoformat(rows[0]["oldest_unread_timestamp"])
    # After the aborted record, so its timestamp is the committed transaction's, not the abort's.
    assert before_unread - timedelta(milliseconds=50) <= unread <= datetime.now(UTC)
    assert 0.9 <= rows[0]["oldest_unread_age_s"] <= (datetime.now(UTC) - before_unread).total_seconds()
    assert rows[1]["lag"] == 0 and rows[1]["oldest_unread_age_s"] is None
    assert rows[1]["oldest_unread_unknown"] is False
    assert shown["oldest_unread_age_s"] == rows[0]["oldest_unread_age_s"]
