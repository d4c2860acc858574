"""The planner's read of partition offsets (kafka/offsets.fetch_partition_offsets) when a broker
answers a partition's ListOffsets with no offset.

Seen in a chaos run on a 3-node cluster (a partition's leader killed, then a fault of the network
to another node): librdkafka answered log start and last stable offset -1001 (OFFSET_INVALID) for
one partition without an error, and `eos-ingest plan` ended in a ValueError traceback, exit 1,
where the cause is transient: the next attempt a second later read the offsets."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from eos_ingest.errors import KafkaUnavailableError, exit_code
from eos_ingest.kafka import offsets
from eos_ingest.plan.ranges import PartitionOffsets

OFFSET_INVALID = -1001


class Admin:
    """A client of a one-partition topic whose ListOffsets answers come from `answers`, one
    (earliest, latest) pair per attempt."""

    def __init__(self, answers: list[tuple[int, int]]) -> None:
        self.answers = answers
        self.pending: list[int] = []

    def list_topics(self, timeout: float) -> SimpleNamespace:
        topic = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics={"t": topic})

    def list_offsets(self, specs, isolation_level, request_timeout):
        if not self.pending:
            self.pending = list(self.answers.pop(0))
        future: Future[SimpleNamespace] = Future()
        future.set_result(SimpleNamespace(offset=self.pending.pop(0)))
        return {TopicPartition("t", 0): future}


def fetch(monkeypatch: pytest.MonkeyPatch, answers: list[tuple[int, int]]) -> list[PartitionOffsets]:
    admin = Admin(answers)
    monkeypatch.setattr(
        offsets,
        "watched_admin",
        lambda settings, timeout_s: SimpleNamespace(client=admin, refusal=lambda: None),
    )
    return offsets.fetch_partition_offsets(
        {"bootstrap.servers": "b:9092"}, ["t"], deadline_s=1.5, backoff_s=0.01
    )


def test_a_partition_answered_with_no_offset_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    found = fetch(monkeypatch, [(OFFSET_INVALID, OFFSET_INVALID), (0, 42)])
    assert found == [PartitionOffsets(topic="t", partition=0, log_start=0, last_stable=42)]


def test_a_partition_that_keeps_answering_no_offset_is_retriable_and_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(KafkaUnavailableError) as raised:
        fetch(monkeypatch, [(5, OFFSET_INVALID)] * 1000)
    assert exit_code(raised.value) == 75
    assert "t[0]" in str(raised.value) and "-1001" in str(raised.value), raised.value


def for_time(monkeypatch: pytest.MonkeyPatch, answers: list[tuple[int, int]]) -> dict[int, int]:
    admin = Admin(answers)  # (offset of the time, last stable offset) per attempt
    monkeypatch.setattr(
        offsets,
        "watched_admin",
        lambda settings, timeout_s: SimpleNamespace(client=admin, refusal=lambda: None),
    )
    return offsets.offsets_for_time(
        {"bootstrap.servers": "b:9092"}, "t", [0], 1_000, deadline_s=1.5, backoff_s=0.01
    )


def test_an_offset_of_a_time_answered_with_none_is_read_again_not_taken_for_the_stable_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """-1001 is no answer: taken for "no record that recent" (-1), a backfill by time would start at
    the stable end and replay nothing."""
    assert for_time(monkeypatch, [(OFFSET_INVALID, 42), (7, 42)]) == {0: 7}
    assert for_time(monkeypatch, [(-1, 42)]) == {0: 42}  # no record that recent: the stable end
    with pytest.raises(KafkaUnavailableError):
        for_time(monkeypatch, [(7, OFFSET_INVALID)] * 1000)
