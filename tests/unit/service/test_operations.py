"""When a catch-up run stops."""

from __future__ import annotations

import pytest

from eos_ingest.plan.ranges import TopicPartition
from eos_ingest.service.operations import caught_up

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
