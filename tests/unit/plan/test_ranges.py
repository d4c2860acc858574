"""The planner by tables of cases: committed offsets and broker offsets in, ranges out."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from eos_ingest.errors import OffsetsLostError, PlanError, TopicRecreatedError
from eos_ingest.plan.ranges import (
    LostOffsets,
    PartitionOffsets,
    Plan,
    PlannedRange,
    TopicPartition,
    plan_ranges,
    ranges_to_assign_json,
    ranges_to_kafka_json,
)

TP = TopicPartition
PO = PartitionOffsets
PR = PlannedRange

# (committed, offsets, max_records, start_from, expected ranges, expected new partitions)
PLAN_CASES = [
    pytest.param({TP("a", 0): 10}, [PO("a", 0, 0, 10)], 100, "earliest", [PR("a", 0, 10, 10)], [], id="caught-up-empty-range"),
    pytest.param({TP("a", 0): 10}, [PO("a", 0, 0, 500)], 100, "earliest", [PR("a", 0, 10, 110)], [], id="capped-by-max"),
    pytest.param({TP("a", 0): 10}, [PO("a", 0, 0, 50)], 100, "earliest", [PR("a", 0, 10, 50)], [], id="capped-by-lso"),
    pytest.param({TP("a", 0): 10}, [PO("a", 0, 0, 110)], 100, "earliest", [PR("a", 0, 10, 110)], [], id="max-equals-lag"),
    pytest.param({TP("a", 0): 5}, [PO("a", 0, 5, 9)], 100, "earliest", [PR("a", 0, 5, 9)], [], id="committed-at-log-start"),
    pytest.param({}, [PO("a", 0, 7, 20)], 100, "earliest", [PR("a", 0, 7, 20)], [TP("a", 0)], id="new-partition-earliest"),
    pytest.param({}, [PO("a", 0, 7, 20)], 100, "latest", [PR("a", 0, 20, 20)], [TP("a", 0)], id="new-partition-latest"),
    pytest.param({}, [PO("a", 0, 0, 1000)], 100, "earliest", [PR("a", 0, 0, 100)], [TP("a", 0)], id="new-partition-capped"),
    pytest.param({}, [PO("a", 0, 0, 0)], 100, "earliest", [PR("a", 0, 0, 0)], [TP("a", 0)], id="new-empty-partition"),
    pytest.param(
        {TP("a", 0): 3, TP("a", 1): 0},
        [PO("a", 1, 0, 4), PO("a", 0, 0, 3), PO("a", 2, 0, 6)],
        100,
        "latest",
        [PR("a", 0, 3, 3), PR("a", 1, 0, 4), PR("a", 2, 0, 6)],
        [TP("a", 2)],
        id="latest-partition-added-to-known-topic-starts-at-log-start",
    ),
    pytest.param(
        {TP("a", 0): 3},
        [PO("a", 0, 0, 3), PO("a", 1, 2, 9)],
        100,
        "latest",
        [PR("a", 0, 3, 3), PR("a", 1, 2, 9)],
        [TP("a", 1)],
        id="latest-added-partition-with-retention-starts-at-its-log-start",
    ),
    pytest.param(
        {TP("a", 0): 3},
        [PO("a", 0, 0, 3), PO("b", 0, 2, 9), PO("b", 1, 0, 4)],
        100,
        "latest",
        [PR("a", 0, 3, 3), PR("b", 0, 9, 9), PR("b", 1, 4, 4)],
        [TP("b", 0), TP("b", 1)],
        id="latest-never-seen-topic-beside-a-known-one-starts-at-lso",
    ),
    pytest.param(
        {TP("a", 0): 3},
        [PO("a", 0, 0, 3), PO("a", 1, 0, 6), PO("b", 0, 1, 5)],
        100,
        "earliest",
        [PR("a", 0, 3, 3), PR("a", 1, 0, 6), PR("b", 0, 1, 5)],
        [TP("a", 1), TP("b", 0)],
        id="earliest-new-partitions-and-new-topic-start-at-log-start",
    ),
    pytest.param(
        {TP("b", 0): 1, TP("a", 1): 2, TP("a", 0): 0},
        [PO("b", 0, 0, 9), PO("a", 1, 0, 2), PO("a", 0, 0, 4)],
        100,
        "earliest",
        [PR("a", 0, 0, 4), PR("a", 1, 2, 2), PR("b", 0, 1, 9)],
        [],
        id="several-topics-sorted",
    ),
    pytest.param(
        {TP("a", 0): 0, TP("a", 1): 0, TP("a", 2): 0},
        [PO("a", 0, 0, 1_000_000), PO("a", 1, 0, 3), PO("a", 2, 0, 1)],
        10,
        "earliest",
        [PR("a", 0, 0, 10), PR("a", 1, 0, 3), PR("a", 2, 0, 1)],
        [],
        id="does-not-starve-any-partition",
    ),
    pytest.param(
        {TP("a", 0): 5, TP("gone", 0): 42},
        [PO("a", 0, 0, 8)],
        100,
        "earliest",
        [PR("a", 0, 5, 8)],
        [],
        id="committed-partition-not-in-offsets-is-not-planned",
    ),
    pytest.param({TP("a", 0): 1}, [], 100, "earliest", [], [], id="nothing-to-plan"),
]  # fmt: skip


@pytest.mark.parametrize(("committed", "offsets", "max_records", "start_from", "expected", "new"), PLAN_CASES)
def test_plan_ranges(
    committed: dict[TopicPartition, int],
    offsets: list[PartitionOffsets],
    max_records: int,
    start_from: str,
    expected: list[PlannedRange],
    new: list[TopicPartition],
) -> None:
    plan = plan_ranges(committed, offsets, max_records_per_partition=max_records, start_from=start_from)
    assert plan == Plan(ranges=tuple(expected), skipped=(), new_partitions=tuple(new))
    assert plan.has_records == any(r.end > r.start for r in expected)


# (committed, offsets, error class, texts the message must contain, texts it must not contain)
ERROR_CASES = [
    pytest.param(
        {TP("orders", 3): 10},
        [PO("orders", 3, 50, 90)],
        OffsetsLostError,
        ["'orders'", "partition 3", "committed offset 10", "log start 50", "--allow-data-loss", "re-point"],
        [],
        id="lost-offsets",
    ),
    pytest.param(
        {TP("orders", 1): 100},
        [PO("orders", 1, 0, 5)],
        TopicRecreatedError,
        ["'orders'", "partition 1", "last stable offset 5", "committed offset 100", "reset"],
        ["--allow-data-loss"],
        id="recreated-topic",
    ),
    pytest.param(
        {TP("a", 0): 1, TP("a", 1): 2, TP("b", 7): 3, TP("ok", 0): 0},
        [PO("a", 0, 10, 20), PO("a", 1, 10, 20), PO("b", 7, 30, 40), PO("ok", 0, 0, 5)],
        OffsetsLostError,
        ["3 partition(s)", "'a' partition 0", "'a' partition 1", "'b' partition 7", "log start 30"],
        ["'ok'"],
        id="every-lost-partition-in-one-error",
    ),
    pytest.param(
        {TP("a", 0): 1, TP("b", 0): 99},
        [PO("a", 0, 10, 20), PO("b", 0, 0, 5)],
        PlanError,
        ["'a' partition 0", "log start 10", "'b' partition 0", "last stable offset 5", "committed offset 99"],
        [],
        id="lost-and-recreated-in-one-error",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("committed", "offsets", "error", "contains", "absent"), ERROR_CASES)
def test_plan_errors_name_every_bad_partition(
    committed: dict[TopicPartition, int],
    offsets: list[PartitionOffsets],
    error: type[Exception],
    contains: list[str],
    absent: list[str],
) -> None:
    with pytest.raises(error) as raised:
        plan_ranges(committed, offsets, max_records_per_partition=100)
    message = str(raised.value)
    for text in contains:
        assert text in message
    for text in absent:
        assert text not in message


def test_mixed_errors_are_neither_lost_nor_recreated_alone() -> None:
    with pytest.raises(PlanError) as raised:
        plan_ranges(
            {TP("a", 0): 1, TP("b", 0): 99},
            [PO("a", 0, 10, 20), PO("b", 0, 0, 5)],
            max_records_per_partition=9,
        )
    assert type(raised.value) is PlanError


def test_allow_data_loss_starts_at_log_start_and_records_the_skip() -> None:
    plan = plan_ranges(
        {TP("a", 0): 10, TP("a", 1): 60},
        [PO("a", 0, 50, 500), PO("a", 1, 50, 70)],
        max_records_per_partition=100,
        allow_data_loss=True,
    )
    assert plan.ranges == (PR("a", 0, 50, 150), PR("a", 1, 60, 70))
    assert plan.skipped == (LostOffsets("a", 0, committed=10, log_start=50),)
    assert plan.skipped[0].count == 40


def test_allow_data_loss_does_not_hide_a_recreated_topic() -> None:
    with pytest.raises(TopicRecreatedError, match="'b' partition 0"):
        plan_ranges(
            {TP("a", 0): 1, TP("b", 0): 99},
            [PO("a", 0, 10, 20), PO("b", 0, 0, 5)],
            max_records_per_partition=100,
            allow_data_loss=True,
        )


INVALID_INPUTS = [
    pytest.param(lambda: PO("a", 0, -1, 5), "must be >= 0", id="negative-log-start"),
    pytest.param(lambda: PO("a", -1, 0, 5), "must be >= 0", id="negative-partition"),
    pytest.param(lambda: PO("a", 0, 9, 5), "log start 9 > last stable offset 5", id="log-start-above-lso"),
    pytest.param(lambda: PR("a", 0, 5, 4), "start <= end", id="range-end-before-start"),
    pytest.param(
        lambda: plan_ranges({}, [], max_records_per_partition=0), ">= 1, got 0", id="max-records-zero"
    ),
    pytest.param(
        lambda: plan_ranges({TP("a", 0): -3}, [], max_records_per_partition=1),
        ">= 0, got -3",
        id="negative-committed",
    ),
    pytest.param(
        lambda: plan_ranges({}, [], max_records_per_partition=1, start_from="oldest"),
        "'oldest'",
        id="bad-start-from",
    ),
    pytest.param(
        lambda: plan_ranges({}, [PO("a", 0, 0, 1), PO("a", 0, 0, 1)], max_records_per_partition=1),
        "appears twice",
        id="duplicate-partition",
    ),
]


@pytest.mark.parametrize(("call", "message"), INVALID_INPUTS)
def test_invalid_inputs_raise_value_error(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


KAFKA_JSON_CASES = [
    pytest.param(
        [PR("a", 0, 10, 20)], {"a": {"0": 10}}, {"a": {"0": 20}}, {"a": [0]}, id="one-range"
    ),
    pytest.param(
        [PR("b", 0, 1, 2), PR("a", 10, 5, 6), PR("a", 2, 0, 0), PR("a", 1, 3, 9)],
        {"a": {"1": 3, "10": 5}, "b": {"0": 1}},
        {"a": {"1": 9, "10": 6}, "b": {"0": 2}},
        {"a": [1, 10], "b": [0]},
        id="excludes-empty-ranges-sorted",
    ),
    pytest.param(
        [PR("a", 0, 0, 0), PR("b", 0, 4, 5)], {"b": {"0": 4}}, {"b": {"0": 5}}, {"b": [0]}, id="topic-with-only-empty-ranges"
    ),
]  # fmt: skip


@pytest.mark.parametrize(("ranges", "starting", "ending", "assign"), KAFKA_JSON_CASES)
def test_ranges_to_kafka_json(
    ranges: list[PlannedRange],
    starting: dict[str, object],
    ending: dict[str, object],
    assign: dict[str, object],
) -> None:
    start_json, end_json = ranges_to_kafka_json(ranges)
    assert (json.loads(start_json), json.loads(end_json)) == (starting, ending)
    assert list(json.loads(start_json)) == sorted(starting)
    assert json.loads(ranges_to_assign_json(ranges)) == assign


def test_ranges_to_kafka_json_refuses_a_plan_without_records() -> None:
    with pytest.raises(ValueError, match="no range has records"):
        ranges_to_kafka_json([PR("a", 0, 3, 3)])


def test_planned_partition_order_and_size() -> None:
    assert sorted([TP("b", 0), TP("a", 2), TP("a", 10)]) == [TP("a", 2), TP("a", 10), TP("b", 0)]
    plan = Plan(ranges=(PR("a", 0, 0, 5), PR("a", 1, 7, 7)))
    assert (plan.ranges[0].size, plan.ranges[1].size, plan.has_records) == (5, 0, True)
    assert not Plan(ranges=(PR("a", 1, 7, 7),)).has_records
