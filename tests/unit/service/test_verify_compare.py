"""verify's merge of two sorted streams: each kind of error is counted, and memory stays flat."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

from eos_ingest.service.verify import compare_streams


def rows(*identities, batch: int | None = 1):  # type: ignore[no-untyped-def]
    return [(i, batch, 1) for i in identities]


def test_equal_streams_are_ok() -> None:
    ids = [("t", 0, 0), ("t", 0, 2), ("t", 1, 5)]
    report = compare_streams(ids, rows(*ids))
    assert report.ok
    assert (report.expected, report.found) == (3, 3)


def test_a_second_copy_in_another_batch_is_a_duplicate() -> None:
    ids = [("t", 0, 0), ("t", 0, 1)]
    found = [*rows(*ids, batch=1), (("t", 0, 1), 2, 1)]
    found.sort(key=lambda r: (r[0], r[1]))
    report = compare_streams(ids, found)
    assert (report.duplicates, report.missing, report.unexpected, report.found) == (1, 0, 0, 3)
    assert report.examples["duplicates"] == [("t", 0, 1)]


def test_missing_before_between_and_after_found_rows() -> None:
    ids = [("a", 0, 0), ("a", 0, 1), ("a", 0, 2), ("b", 0, 0), ("b", 3, 9)]
    report = compare_streams(ids, rows(("a", 0, 1), ("b", 0, 0)))
    assert (report.missing, report.unexpected, report.expected) == (3, 0, 5)
    assert report.examples["missing"] == [("a", 0, 0), ("a", 0, 2), ("b", 3, 9)]


def test_rows_outside_committed_records_are_unexpected_unless_below_the_log_start() -> None:
    ids = [("t", 0, 10)]
    found = rows(("t", 0, 3), ("t", 0, 10), ("t", 0, 11))
    report = compare_streams(ids, found, gone={("t", 0): [(0, 5)]})
    assert (report.unexpected, report.unverifiable, report.missing) == (1, 1, 0)
    assert report.examples["unexpected"] == [("t", 0, 11)]
    assert not report.ok


def test_rows_of_an_older_topic_incarnation_are_reported_apart_never_found() -> None:
    ids = [("t", 0, 0)]
    found = [(("t", 0, 0), 1, 1), (("t", 0, 0), 7, 1)]
    report = compare_streams(ids, found, older_batches={(1, "t")})
    assert (report.older_topic, report.missing, report.duplicates, report.found) == (1, 0, 0, 1)
    assert not report.ok  # rows of the old topic still sit in the table


def test_examples_are_the_smallest_identities_and_capped() -> None:
    ids = [("t", 0, o) for o in range(100)]
    report = compare_streams(ids, [], examples=3)
    assert report.missing == 100
    assert report.examples["missing"] == [("t", 0, 0), ("t", 0, 1), ("t", 0, 2)]


def test_memory_does_not_grow_with_the_number_of_records() -> None:
    n = 300_000

    def expected() -> Iterator[tuple[str, int, int]]:
        for o in range(n):
            yield ("t", o % 4, o)

    def found() -> Iterator[tuple[tuple[str, int, int], int, int]]:
        for o in range(n):
            yield ("t", o % 4, o), 1, 1

    def sorted_stream(stream):  # type: ignore[no-untyped-def]
        # Partition by partition, as both real streams arrive.
        for p in range(4):
            for item in stream():
                key = item if isinstance(item[0], str) else item[0]
                if key[1] == p:
                    yield item

    tracemalloc.start()
    report = compare_streams(sorted_stream(expected), sorted_stream(found))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert report.ok and report.expected == n
    # A set of 300k identities alone takes tens of MB; the merge keeps a few objects.
    assert peak < 1_000_000, peak


def test_a_broker_that_never_answers_is_kafka_unavailable_not_a_bare_timeout() -> None:
    """A real client on a port nobody listens on: verify's read ends in the retriable
    KafkaUnavailableError (a clear message, exit 75), where it raised a bare TimeoutError (exit 1)."""
    import pytest
    from confluent_kafka import Consumer

    from eos_ingest.errors import KafkaUnavailableError
    from eos_ingest.service.verify import _interval_offsets

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "verify-unit", "log_level": 0})
    try:
        with pytest.raises(KafkaUnavailableError, match=r"no answer within 0.5s reading t\[0\]"):
            list(_interval_offsets(consumer, "t", 0, 0, 10, timeout_s=0.5))
    finally:
        consumer.close()
