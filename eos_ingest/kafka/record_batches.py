"""One partition's part of a raw read_committed fetch response, counted from its v2 record-batch
headers (kafka/header_counts.py fetches; this reads what came back). Pure: bytes in, a count out.
The batches are read with kafka-python's record classes (MemoryRecords), inside the same door.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import kafka.errors as kafka_errors
from kafka.record import MemoryRecords


class NeedsTheConsumer(Exception):
    """The headers cannot answer here (a v0/v1 message format, an edge batch in a codec this
    process cannot decode): count with the record-decoding consumer instead."""


def count_fetched(
    records: bytes, aborted: Iterable[tuple[int, int]], position: int, end: int
) -> tuple[int, int]:
    """(committed records with offsets in [position, end), next offset to fetch) of one
    partition's records in one read_committed fetch response from `position`.

    `aborted` is the response's (producer id, first offset) of the aborted transactions. Stops at
    the first batch at or beyond `end`. A trailing partial batch (cut by the fetch's byte limit)
    is not read; the next offset is then where it begins.
    """
    pending = deque(sorted(aborted, key=lambda txn: txn[1]))
    aborted_producers: set[int] = set()
    count, next_offset = 0, position
    batches = MemoryRecords(records)
    while next_offset < end and (batch := batches.next_batch()) is not None:
        if batch.magic < 2:
            raise NeedsTheConsumer(f"message format v{batch.magic} (before Kafka 0.11) has no batch header")
        if batch.has_producer_id():
            # As the Java consumer: transactions aborted below this batch's end become active...
            while pending and pending[0][1] <= batch.last_offset:
                aborted_producers.add(pending.popleft()[0])
            # ...until the producer's ABORT marker.
            if batch.is_control_batch:
                if _is_abort_marker(batch):
                    aborted_producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_producers:
                next_offset = batch.next_offset
                continue
        if not batch.is_control_batch:
            count += _records_between(batch, position, end)
        next_offset = max(next_offset, batch.next_offset)
    return count, next_offset


def _is_abort_marker(batch: Any) -> bool:
    # A control batch holds one small uncompressed record: its key says ABORT (0) or COMMIT (1).
    record = next(batch, None)
    return bool(record is not None and record.abort)


def _records_between(batch: Any, low: int, high: int) -> int:
    """Records of a data batch with offsets in [low, high)."""
    first, last = batch.base_offset, batch.last_offset
    if last < low or first >= high:
        return 0
    if low <= first and last < high:
        return int(batch.records_count)
    if batch.records_count == batch.last_offset_delta + 1:  # contiguous offsets: no compaction
        return min(last, high - 1) - max(first, low) + 1
    try:
        return sum(1 for record in batch if low <= record.offset < high)
    except kafka_errors.UnsupportedCodecError as exc:
        raise NeedsTheConsumer(f"an edge batch at offset {first} needs a codec missing here: {exc}") from None
