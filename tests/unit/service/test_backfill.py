"""The pure parts of backfill: the request's validation and the range checks, by tables of cases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from eos_ingest.errors import BackfillRangeError
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.service.backfill import BackfillRequest, check_ranges, parse_request, parse_time

TOPICS = ("events", "clicks")


def params(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "topic": "events",
        "partitions": [0, 1],
        "start_offset": 10,
        "end_offset": 20,
        "reason": "replay after the schema fix",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def test_an_offset_request_is_parsed() -> None:
    request = parse_request(params(partitions=[1, 0]), TOPICS)

    assert request == BackfillRequest("events", (0, 1), "replay after the schema fix", 10, 20)
    assert not request.by_time
    assert request.describe() == "topic 'events' partitions 0,1 offsets [10, 20)"


def test_a_time_window_is_parsed_to_utc_and_a_naive_time_is_taken_as_utc() -> None:
    request = parse_request(
        params(
            start_offset=None,
            end_offset=None,
            start_time="2026-11-22T10:00:00+01:00",
            end_time="2026-11-22T10:30:00",
        ),
        TOPICS,
    )

    assert request.by_time
    assert request.start_time == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    assert request.end_time == datetime(2026, 11, 22, 10, 30, tzinfo=UTC)


def test_cli_strings_are_accepted() -> None:
    request = parse_request(params(partitions="2, 0", start_offset="5", end_offset="9"), TOPICS)

    assert (request.partitions, request.start_offset, request.end_offset) == ((0, 2), 5, 9)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"start_offset": 20, "end_offset": 10},
            "offset range [20, 10) of topic 'events' partitions [0, 1] is reversed",
        ),
        ({"start_offset": 10, "end_offset": 10}, "is empty; choose start_offset < end_offset"),
        ({"end_offset": None}, "give both start_offset and end_offset"),
        ({"start_offset": None, "end_offset": None}, "give a range"),
        ({"start_time": "2026-11-22T10:00:00Z", "end_time": "2026-11-22T11:00:00Z"}, "not both"),
        (
            {
                "start_offset": None,
                "end_offset": None,
                "start_time": "2026-11-22T11:00Z",
                "end_time": "2026-11-22T10:00Z",
            },
            "is empty or reversed; choose start_time < end_time",
        ),
        (
            {"start_offset": None, "end_offset": None, "start_time": "yesterday", "end_time": "today"},
            "not an ISO-8601",
        ),
        ({"start_offset": -1}, "start_offset = -1 is not an offset"),
        ({"topic": "evnts"}, "topic = 'evnts' is not a topic of this pipeline; choose one of events, clicks"),
        ({"partitions": []}, "give a non-empty list of partition numbers"),
        ({"partitions": [0, 0]}, "0 is listed twice"),
        ({"partitions": [-2]}, "-2 is not a partition number"),
        ({"reason": "  "}, "reason is empty"),
        ({"reason": ...}, "reason is empty"),
        ({"bogus": 1}, "unknown parameter(s) bogus"),
    ],
)
def test_a_bad_request_is_refused_with_the_fix(overrides: dict[str, Any], expected: str) -> None:
    with pytest.raises(BackfillRangeError) as refused:
        parse_request(params(**overrides), TOPICS)

    assert expected in str(refused.value)
    assert str(refused.value).startswith("backfill refused before any work")


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(BackfillRangeError) as refused:
        parse_request(params(topic="nope", reason="", partitions=[]), TOPICS)

    assert str(refused.value).count("\n  - ") == 3


def test_parse_time_names_the_key() -> None:
    with pytest.raises(BackfillRangeError, match="end_time = 'soon'"):
        parse_time("soon", "end_time")


REQUEST = BackfillRequest("events", (0, 1), "why", 10, 20)
WINDOW = BackfillRequest(
    "events",
    (0, 1),
    "why",
    start_time=datetime(2026, 1, 1, tzinfo=UTC),
    end_time=datetime(2026, 1, 2, tzinfo=UTC),
)


def check(request: BackfillRequest, wanted: dict[int, tuple[int, int]], **kw: Any) -> list[PlannedRange]:
    committed = kw.get("committed", {0: 100, 1: 100})
    log_starts = kw.get("log_starts", {0: 0, 1: 0, 2: 0})
    return check_ranges("demo", request, wanted, committed=committed, log_starts=log_starts)


def test_ranges_inside_log_start_and_committed_offset_are_accepted() -> None:
    ranges = check(REQUEST, {0: (10, 20), 1: (10, 20)}, log_starts={0: 10, 1: 0}, committed={0: 20, 1: 50})

    assert ranges == [PlannedRange("events", 0, 10, 20), PlannedRange("events", 1, 10, 20)]


@pytest.mark.parametrize(
    ("wanted", "kw", "expected"),
    [
        (
            {0: (10, 120), 1: (10, 20)},
            {},
            "topic 'events' partition 0 range [10, 120) goes beyond the committed offset 100: offsets from 100 "
            "on have not been ingested yet and belong to the next scheduled batch; choose an end <= 100",
        ),
        (
            {0: (10, 20), 1: (10, 20)},
            {"log_starts": {0: 0, 1: 15}},
            "topic 'events' partition 1 range [10, 20) starts below the log start 15: Kafka deleted those "
            "records (retention), so they cannot be read again; choose a start >= 15",
        ),
        (
            {0: (10, 20), 1: (10, 20)},
            {"log_starts": {0: 0}},
            "topic 'events' partition 1 does not exist (partitions: 0); remove it from partitions",
        ),
        (
            {0: (10, 20), 1: (10, 20)},
            {"committed": {0: 100}},
            "topic 'events' partition 1: the pipeline has not ingested this partition yet",
        ),
        ({0: (10, 101), 1: (10, 20)}, {}, "partition 0 range [10, 101) goes beyond the committed offset 100"),
        (
            {0: (9, 20), 1: (10, 20)},
            {"log_starts": {0: 10, 1: 0}},
            "range [9, 20) starts below the log start 10",
        ),
        ({0: (30, 20), 1: (10, 20)}, {}, "partition 0 range [30, 20) is reversed (start > end); swap"),
        ({0: (20, 20), 1: (10, 20)}, {}, "partition 0 range [20, 20) is empty (the end is exclusive)"),
    ],
)
def test_a_range_outside_the_limits_is_refused_naming_topic_partition_range_limit_and_fix(
    wanted: dict[int, tuple[int, int]], kw: dict[str, Any], expected: str
) -> None:
    with pytest.raises(BackfillRangeError) as refused:
        check(REQUEST, wanted, **kw)

    message = str(refused.value)
    assert expected in message
    assert message.startswith("backfill of pipeline 'demo' refused, nothing was written")


def test_a_time_window_skips_partitions_without_records_in_it() -> None:
    assert check(WINDOW, {0: (40, 40), 1: (5, 9)}) == [PlannedRange("events", 1, 5, 9)]


def test_a_time_window_without_any_record_is_refused() -> None:
    with pytest.raises(BackfillRangeError, match="no records of topic 'events' partitions 0,1 times"):
        check(WINDOW, {0: (40, 40), 1: (100, 100)})


def test_a_time_window_reaching_past_the_committed_offset_is_refused() -> None:
    with pytest.raises(BackfillRangeError, match=r"range \[5, 130\) goes beyond the committed offset 100"):
        check(WINDOW, {0: (40, 50), 1: (5, 130)})
