"""Pure planning: partition offsets in, offset ranges out (docs/exactly-once.md, step 1).

No I/O and no Kafka, Spark or database imports: `kafka_offsets` fetches the log-start and last
stable offsets, `control/store` supplies the committed offsets and persists the plan. Keeping the
decision here makes every rule testable by a table of cases.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from eos_ingest.errors import OffsetsLostError, PlanError, TopicRecreatedError

START_FROM = ("earliest", "latest")


@dataclass(frozen=True, order=True)
class TopicPartition:
    """One partition of one topic; orders by (topic, partition)."""

    topic: str
    partition: int


@dataclass(frozen=True)
class PartitionOffsets:
    """What the broker reports for a partition: log start and last stable offset (LSO).

    The LSO is the read_committed end: below it every transaction is decided, so a range that
    stops there never splits an open transaction.
    """

    topic: str
    partition: int
    log_start: int
    last_stable: int

    def __post_init__(self) -> None:
        where = f"topic {self.topic!r} partition {self.partition}"
        if self.partition < 0 or self.log_start < 0 or self.last_stable < 0:
            raise ValueError(f"{where}: partition and offsets must be >= 0, got {self}")
        if self.log_start > self.last_stable:
            raise ValueError(
                f"{where}: log start {self.log_start} > last stable offset {self.last_stable}; "
                "the offsets were read inconsistently, fetch them again"
            )


@dataclass(frozen=True)
class PlannedRange:
    """Offsets ``[start, end)`` of one partition in a batch."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"a range needs 0 <= start <= end, got {self}")

    @property
    def size(self) -> int:
        """Upper bound of the records in the range: aborted transactions and markers leave gaps."""
        return self.end - self.start


@dataclass(frozen=True)
class LostOffsets:
    """Offsets ``[committed, log_start)`` deleted by retention and skipped by an explicit override."""

    topic: str
    partition: int
    committed: int
    log_start: int

    @property
    def count(self) -> int:
        """How many offsets were skipped."""
        return self.log_start - self.committed


@dataclass(frozen=True)
class Plan:
    """The ranges of one batch, one per partition, sorted by (topic, partition)."""

    ranges: tuple[PlannedRange, ...]
    skipped: tuple[LostOffsets, ...] = ()
    new_partitions: tuple[TopicPartition, ...] = ()

    @property
    def has_records(self) -> bool:
        """False when every range is empty: such a plan does no Spark work."""
        return any(r.end > r.start for r in self.ranges)


def plan_ranges(
    committed: Mapping[TopicPartition, int],
    offsets: Sequence[PartitionOffsets],
    *,
    max_records_per_partition: int,
    start_from: str = "earliest",
    allow_data_loss: bool = False,
) -> Plan:
    """Plan one batch: a range ``[start, end)`` for every partition in ``offsets``.

    ``committed`` maps partitions to the next offset to ingest; a partition absent from it is new
    and starts at its log start. ``latest`` starts at the LSO instead, but only on a topic the
    pipeline has never seen (no partition of it in ``committed``): a partition added later to a
    known topic starts at its log start, as Spark's Kafka source does, so its records are read.
    (A recorded topic identity never exists without committed offsets: both are written in the
    same transaction.) Each partition is capped on
    its own at ``max_records_per_partition``, so a partition with a large lag never starves the
    others, and ``end`` never passes the LSO. Partitions in ``committed`` but not in ``offsets``
    are not planned.

    Raises OffsetsLostError when a committed offset is below the log start (unless
    ``allow_data_loss``, which starts at the log start and lists the gap in ``Plan.skipped``),
    TopicRecreatedError when the LSO is below the committed offset, and PlanError when both
    happen; one error lists every bad partition. ValueError for invalid inputs.
    """
    _check_inputs(committed, offsets, max_records_per_partition, start_from)
    ranges: list[PlannedRange] = []
    skipped: list[LostOffsets] = []
    new: list[TopicPartition] = []
    lost: list[LostOffsets] = []
    recreated: list[tuple[PartitionOffsets, int]] = []
    seen_topics = {tp.topic for tp in committed}
    for o in sorted(offsets, key=lambda o: (o.topic, o.partition)):
        tp = TopicPartition(o.topic, o.partition)
        if tp not in committed:
            latest = start_from == "latest" and o.topic not in seen_topics
            start = o.last_stable if latest else o.log_start
            new.append(tp)
        else:
            start = committed[tp]
            if start < o.log_start:
                gap = LostOffsets(o.topic, o.partition, committed=start, log_start=o.log_start)
                if not allow_data_loss:
                    lost.append(gap)
                    continue
                skipped.append(gap)
                start = o.log_start
            elif o.last_stable < start:
                recreated.append((o, start))
                continue
        # The end is fixed now, from offsets read at plan time: a retry must re-read the same range.
        end = min(o.last_stable, start + max_records_per_partition)
        ranges.append(PlannedRange(o.topic, o.partition, start, end))
    if lost or recreated:
        raise _plan_error(lost, recreated)
    return Plan(ranges=tuple(ranges), skipped=tuple(skipped), new_partitions=tuple(new))


def ranges_to_kafka_json(ranges: Iterable[PlannedRange]) -> tuple[str, str]:
    """Spark's ``startingOffsets`` and ``endingOffsets`` JSON for the non-empty ranges.

    Shape ``{"topic": {"0": offset, ...}}``, topics and partitions sorted; the end is exclusive,
    as in Spark. ValueError when no range has records: such a plan must not start a Spark read.
    """
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in _non_empty(ranges):
        starting.setdefault(r.topic, {})[str(r.partition)] = r.start
        ending.setdefault(r.topic, {})[str(r.partition)] = r.end
    return json.dumps(starting), json.dumps(ending)


def ranges_to_assign_json(ranges: Iterable[PlannedRange]) -> str:
    """Spark's ``assign`` JSON (``{"topic": [0, 1]}``) for the non-empty ranges.

    Use ``assign``, not ``subscribe``: Spark requires specific starting offsets to name every
    assigned partition, and the empty ranges are left out of the offsets JSON.
    """
    assign: dict[str, list[int]] = {}
    for r in _non_empty(ranges):
        assign.setdefault(r.topic, []).append(r.partition)
    return json.dumps(assign)


def _non_empty(ranges: Iterable[PlannedRange]) -> list[PlannedRange]:
    chosen = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.topic, r.partition))
    pairs = [(r.topic, r.partition) for r in chosen]
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"a partition appears in more than one range: {pairs}")
    if not chosen:
        raise ValueError("no range has records; a plan without records does no Spark read")
    return chosen


def _check_inputs(
    committed: Mapping[TopicPartition, int],
    offsets: Sequence[PartitionOffsets],
    max_records: int,
    start_from: str,
) -> None:
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
        raise ValueError(f"max_records_per_partition must be an integer >= 1, got {max_records!r}")
    if start_from not in START_FROM:
        raise ValueError(f"start_from must be 'earliest' or 'latest', got {start_from!r}")
    for tp, offset in committed.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"committed keys must be TopicPartition, got {tp!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"committed offset of {tp} must be an integer >= 0, got {offset!r}")
    seen: set[tuple[str, int]] = set()
    for o in offsets:
        if (o.topic, o.partition) in seen:
            raise ValueError(f"topic {o.topic!r} partition {o.partition} appears twice in offsets")
        seen.add((o.topic, o.partition))


def _plan_error(lost: list[LostOffsets], recreated: list[tuple[PartitionOffsets, int]]) -> PlanError:
    parts = []
    if lost:
        lines = "\n".join(
            f"  - topic {g.topic!r} partition {g.partition}: committed offset {g.committed} < "
            f"log start {g.log_start} ({g.count} offsets deleted before they were ingested)"
            for g in lost
        )
        parts.append(
            f"records lost to retention in {len(lost)} partition(s):\n{lines}\n"
            "Fix: re-point the pipeline's committed offsets for these partitions, or run once with the "
            "explicit override --allow-data-loss, which starts at the log start and records the skipped "
            "offsets on the batch."
        )
    if recreated:
        lines = "\n".join(
            f"  - topic {o.topic!r} partition {o.partition}: last stable offset {o.last_stable} < "
            f"committed offset {c}"
            for o, c in recreated
        )
        parts.append(
            f"offsets went backwards in {len(recreated)} partition(s), so the topic was probably "
            f"deleted and recreated:\n{lines}\n"
            "Fix: reset the pipeline's committed offsets for the topics listed (to earliest or latest), after "
            "checking which records the output table already holds."
        )
    message = "cannot plan the batch: " + "\n".join(parts)
    if not recreated:
        return OffsetsLostError(message)
    return TopicRecreatedError(message) if not lost else PlanError(message)


def merge_ranges(ranges: Iterable[PlannedRange]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Per partition, the sorted union of [start, end) intervals (empty ones dropped)."""
    by_tp: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in sorted(ranges, key=lambda r: (r.topic, r.partition, r.start)):
        if r.end <= r.start:
            continue
        spans = by_tp.setdefault((r.topic, r.partition), [])
        if spans and r.start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], r.end))
        else:
            spans.append((r.start, r.end))
    return by_tp
