"""Independent check of exactly-once: Kafka's committed records vs. the output tables.

Ground truth is a plain confluent-kafka consumer with isolation.level=read_committed reading every
committed range of the pipeline; it shares no code with the Spark job's read. The output (table +
quarantine, what their current version publishes, in the pipeline's table format: the reader of
storage/table_reader.py) must hold each of those identities exactly once and nothing else.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark.sql import functions as F

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.batches import RangeRecord
from eos_ingest.errors import KafkaUnavailableError
from eos_ingest.kafka.committed_counts import read_committed_consumer
from eos_ingest.kafka.offsets import fetch_snapshot
from eos_ingest.plan.ranges import PlannedRange, merge_ranges
from eos_ingest.storage.table_formats import output_reader
from eos_ingest.storage.table_names import OUTPUT_TABLES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Identity = tuple[str, int, int]


@dataclass
class VerifyReport:
    expected: int
    found: int
    duplicates: int
    missing: int
    unexpected: int
    # Output rows whose source records Kafka no longer has (retention): neither missing nor unexpected.
    unverifiable: int = 0
    # Output rows written by batches of an older incarnation of their topic (deleted and recreated):
    # never found; they sit at identities of the current topic until its batches replace them.
    older_topic: int = 0
    examples: dict[str, list[Identity]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.duplicates == 0 and self.missing == 0 and self.unexpected == 0 and self.older_topic == 0

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


def read_committed_identities(
    kafka_settings: Mapping[str, str],
    spans: Mapping[tuple[str, int], Sequence[tuple[int, int]]],
    timeout_s: float = 30.0,
) -> set[Identity]:
    """Identities of the committed records inside `spans`, read with a read_committed consumer."""
    return set(committed_identity_stream(kafka_settings, spans, timeout_s))


def committed_identity_stream(
    kafka_settings: Mapping[str, str],
    spans: Mapping[tuple[str, int], Sequence[tuple[int, int]]],
    timeout_s: float = 30.0,
) -> Iterator[Identity]:
    """The committed records inside `spans`, in (topic, partition, offset) order, a consume()
    batch at a time: memory stays O(one batch) whatever the number of records."""
    consumer = read_committed_consumer(kafka_settings)
    try:
        for topic, partition in sorted(spans):
            for start, end in sorted(spans[(topic, partition)]):
                for offsets in _interval_offsets(consumer, topic, partition, start, end, timeout_s):
                    for offset in offsets:
                        yield (topic, partition, offset)
    finally:
        consumer.close()


# consume() blocks until it has this many messages or _POLL_S passed: short, so the end of an
# interval at the end of the log costs no more than _POLL_S (the EOF event ends it).
_CONSUME_BATCH = 10_000
_POLL_S = 0.2
# Rows of the output's sorted identity stream per Spark partition that the driver fetches whole:
# ~8 MB of task result each, well under what a 1 GB driver keeps until Python reads it.
ROWS_PER_CHUNK = 200_000


def _interval_offsets(
    consumer: Consumer, topic: str, partition: int, start: int, end: int, timeout_s: float
) -> Iterator[list[int]]:
    """Offsets of the committed records in [start, end) of one partition, a consume() batch at a time."""
    consumer.assign([TopicPartition(topic, partition, start)])
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            messages = consumer.consume(_CONSUME_BATCH, _POLL_S)
            if not messages:
                if time.monotonic() > deadline:
                    raise KafkaUnavailableError(
                        f"verify: Kafka gave no answer within {timeout_s}s reading {topic}[{partition}] "
                        f"[{start}, {end}); check the broker and run verify again"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            offsets: list[int] = []
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        # End of the committed log: the interval is below the LSO, so it is done.
                        yield offsets
                        return
                    raise RuntimeError(f"verify: reading {topic}[{partition}] at {start}: {error}")
                offset = int(msg.offset() or 0)
                if offset >= end:
                    yield offsets
                    return
                offsets.append(offset)
                if offset + 1 >= end:
                    yield offsets
                    return
            yield offsets
    finally:
        consumer.unassign()


def output_row_stream(
    spark: SparkSession, tables: Sequence[DataFrame], topics: Sequence[str], expected_rows: int = 0
) -> Iterator[tuple[Identity, int | None, int]]:
    """(identity, batch_id, rows) of `topics` across the output tables (each read by its format's
    reader: TableReader.spark_rows), in identity order.

    Spark groups and sorts; the driver takes one sorted partition at a time (toLocalIterator), so
    its memory does not grow with the table. `expected_rows` sizes those partitions: with the
    session's few shuffle partitions, 5M rows made chunks of 1.2M rows that the driver's block
    manager evicted before Python fetched them (TaskResultLost)."""
    columns = ["kafka_topic", "kafka_partition", "kafka_offset", "batch_id"]
    frames = [table.where(F.col("kafka_topic").isin(list(topics))).select(*columns) for table in tables]
    if not frames:
        return
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    chunks = max(
        int(spark.conf.get("spark.sql.shuffle.partitions") or 1), -(-expected_rows // ROWS_PER_CHUNK)
    )
    grouped = (
        union.groupBy(*columns).count().repartitionByRange(chunks, *columns).sortWithinPartitions(*columns)
    )
    for row in grouped.toLocalIterator(prefetchPartitions=True):
        batch = None if row[3] is None else int(row[3])
        yield (row[0], int(row[1]), int(row[2])), batch, int(row[4])


def split_by_incarnation(
    records: Iterable[PlannedRange | RangeRecord], current_ids: Mapping[str, str | None]
) -> tuple[list[PlannedRange], set[tuple[int, str]]]:
    """The committed ranges of the current topic incarnations (what verify expects), and the
    (batch_id, topic) pairs whose ranges were planned under an older topic id.

    A range without a topic id (a PlannedRange, or a row from before schema version 2) or whose
    topic has no id now counts as current: nothing tells it apart."""
    current: list[PlannedRange] = []
    older: set[tuple[int, str]] = set()
    for rec in records:
        if isinstance(rec, PlannedRange):
            current.append(rec)
            continue
        now = current_ids.get(rec.range.topic)
        if rec.topic_id is not None and now is not None and rec.topic_id != now:
            older.add((rec.batch_id, rec.range.topic))
        elif rec.committed:
            current.append(rec.range)
    return current, older


class _Examples:
    """The first few identities of each kind; streams arrive sorted, so these are the smallest."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.kinds: dict[str, list[Identity]] = {
            k: [] for k in ("duplicates", "missing", "unexpected", "older_topic")
        }

    def add(self, kind: str, identity: Identity) -> None:
        seen = self.kinds[kind]
        if len(seen) < self.keep and (not seen or seen[-1] != identity):
            seen.append(identity)


def compare_streams(
    expected: Iterable[Identity],
    found: Iterable[tuple[Identity, int | None, int]],
    gone: Mapping[tuple[str, int], Sequence[tuple[int, int]]] | None = None,
    older_batches: set[tuple[int, str]] | None = None,
    examples: int = 5,
) -> VerifyReport:
    """Walk both sorted streams once: duplicates (extra copies), missing and unexpected identities.

    `expected`: committed identities, sorted, each once. `found`: (identity, batch_id, rows),
    sorted by identity. `gone`: per partition, committed spans below today's log start (Kafka
    cannot vouch for their rows). Rows of `older_batches` ((batch_id, topic) planned under an older
    topic incarnation) are reported apart, never found. Memory: O(examples)."""
    gone = gone or {}
    older_batches = older_batches or set()
    ex = _Examples(examples)
    tally = Counter[str]()
    pending = iter(expected)
    nxt = next(pending, None)

    def settle(identity: Identity, rows: int) -> None:
        nonlocal nxt
        while nxt is not None and nxt < identity:
            tally["missing"] += 1
            ex.add("missing", nxt)
            nxt = next(pending, None)
        tally["found"] += rows
        if rows > 1:
            tally["duplicates"] += rows - 1
            ex.add("duplicates", identity)
        if nxt == identity:
            tally["matched"] += 1
            nxt = next(pending, None)
        elif any(s <= identity[2] < e for s, e in gone.get(identity[:2], ())):
            tally["unverifiable"] += 1
        else:
            tally["unexpected"] += 1
            ex.add("unexpected", identity)

    current: Identity | None = None
    rows = 0
    for identity, batch, n in found:
        if batch is not None and (batch, identity[0]) in older_batches:
            tally["older_topic"] += n
            ex.add("older_topic", identity)
            continue
        if identity != current:
            if current is not None:
                settle(current, rows)
            current, rows = identity, 0
        rows += n
    if current is not None:
        settle(current, rows)
    while nxt is not None:
        tally["missing"] += 1
        ex.add("missing", nxt)
        nxt = next(pending, None)
    return VerifyReport(
        expected=tally["matched"] + tally["missing"],
        found=tally["found"],
        duplicates=tally["duplicates"],
        missing=tally["missing"],
        unexpected=tally["unexpected"],
        unverifiable=tally["unverifiable"],
        older_topic=tally["older_topic"],
        examples=ex.kinds,
    )


def verify_pipeline(
    spark: SparkSession, config: PipelineConfig, committed: Iterable[PlannedRange | RangeRecord]
) -> VerifyReport:
    """verify() of the pipeline's output tables (the table and the quarantine table that exist), in
    its table format, against Kafka's committed records of `committed` ranges."""
    reader = output_reader(config)
    tables = [t for which in OUTPUT_TABLES if (t := reader.spark_rows(spark, which)) is not None]
    return verify(spark, config.kafka_settings, committed, tables, config.topics)


def verify(
    spark: SparkSession,
    kafka_settings: Mapping[str, str],
    committed: Iterable[PlannedRange | RangeRecord],
    tables: Sequence[DataFrame],
    topics: Sequence[str],
) -> VerifyReport:
    """Compare Kafka's committed records of `committed` ranges with the output tables' rows.

    With RangeRecords (ControlStore.range_records: every batch's ranges and their topic ids), only
    committed ranges of each topic's current id form the expectation; rows whose batch planned its
    ranges under an older topic id are counted as `older_topic`, never as found. Both sides stream
    in identity order, so memory does not grow with the number of records."""
    snapshot = fetch_snapshot(kafka_settings, topics)
    current, older_batches = split_by_incarnation(committed, snapshot.identity.topic_ids)
    spans = merge_ranges(current)
    log_starts = {(o.topic, o.partition): o.log_start for o in snapshot.offsets}
    readable, below = clip_to_log_start(spans, log_starts)
    return compare_streams(
        committed_identity_stream(kafka_settings, readable),
        output_row_stream(
            spark, tables, topics, sum(end - start for ivs in spans.values() for start, end in ivs)
        ),
        below,
        older_batches,
    )


def clip_to_log_start(
    spans: Mapping[tuple[str, int], Sequence[tuple[int, int]]], log_starts: Mapping[tuple[str, int], int]
) -> tuple[dict[tuple[str, int], list[tuple[int, int]]], dict[tuple[str, int], list[tuple[int, int]]]]:
    """Split committed spans into what Kafka still holds and what retention already deleted."""
    readable: dict[tuple[str, int], list[tuple[int, int]]] = {}
    below: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for tp, intervals in spans.items():
        start_of_log = log_starts.get(tp, 0)
        for start, end in intervals:
            if start < start_of_log:
                below.setdefault(tp, []).append((start, min(end, start_of_log)))
            if end > start_of_log:
                readable.setdefault(tp, []).append((max(start, start_of_log), end))
    return readable, below
