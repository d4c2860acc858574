"""Records deleted by retention after a batch was planned: how to recognize it and what to say.

Two places meet it. At plan time a pending batch whose ranges start below today's log start can
never be read again: `decide_pending` says what the plan does with it (the control store applies
it in its transaction), and `accepted_loss_note` words the losses a plan skips. At read time Spark's Kafka
source, with failOnDataLoss=true, raises a JVM error (KafkaIllegalStateException, error class
KAFKA_DATA_LOSS.*, "Some data may have been lost"); `spark_data_loss` turns it into an
OffsetsLostError so the job fails the batch instead of leaving it planned for ever.
Pure: no Kafka, Spark or database imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from eos_ingest.errors import OffsetsLostError
from eos_ingest.plan.ranges import LostOffsets, PlannedRange, TopicPartition

# What Spark 4.1's Kafka source raises when failOnDataLoss=true meets deleted offsets (seen on a
# real broker after DeleteRecords): the JVM class, its error class prefix and its message text.
SPARK_DATA_LOSS_MARKERS = (
    "KafkaIllegalStateException",
    "KAFKA_DATA_LOSS",
    "Some data may have been lost",
    "OffsetOutOfRangeException",
)
# "Could not read records in offset [0, 31) for topic partition orders-0"
_SPARK_RANGE = re.compile(r"offset \[(\d+), (\d+)\) for topic partition (\S+)-(\d+)")


def allow_data_loss_fix(pipeline: str) -> str:
    return (
        f"Fix: eos-ingest run --pipeline {pipeline} --allow-data-loss skips the lost offsets, starts at "
        "the log start and records the skip on the batch's note; without it nothing is skipped."
    )


def pending_losses(
    ranges: Sequence[PlannedRange], log_starts: Mapping[TopicPartition, int]
) -> list[LostOffsets]:
    """The non-empty ranges that start below their partition's log start (unknown partitions: none).

    `committed` of each result is the range's start, which is the committed offset of a
    scheduled batch's partition."""
    lost = []
    for r in ranges:
        log_start = log_starts.get(TopicPartition(r.topic, r.partition))
        if r.end > r.start and log_start is not None and r.start < log_start:
            lost.append(LostOffsets(r.topic, r.partition, committed=r.start, log_start=log_start))
    return lost


def describe(lost: Sequence[LostOffsets]) -> str:
    return ", ".join(f"{g.topic}[{g.partition}] [{g.committed}, {g.log_start})" for g in lost)


def pending_batch_lost_error(pipeline: str, batch_id: int, lost: Sequence[LostOffsets]) -> OffsetsLostError:
    lines = "\n".join(
        f"  - topic {g.topic!r} partition {g.partition}: the batch starts at offset {g.committed}, the "
        f"log now starts at {g.log_start} ({g.count} offsets deleted)"
        for g in lost
    )
    return OffsetsLostError(
        f"planned batch {batch_id} of pipeline {pipeline!r} can no longer be read: Kafka deleted "
        f"records of its ranges after it was planned (retention or DeleteRecords):\n{lines}\n"
        f"The batch is unchanged and nothing was read. {allow_data_loss_fix(pipeline)} The pending "
        "batch is then abandoned and a new one planned from the log start."
    )


class PendingAction(Enum):
    """What a plan does with the pipeline's pending (planned, scheduled) batch."""

    RESUME = "resume"  # every range still readable: return it unchanged, a retry re-runs the same ranges
    REFUSE = "refuse"  # records of its ranges deleted, no override: raise, change nothing
    ABANDON = "abandon"  # deleted and --allow-data-loss: abandon it, plan anew from the log start


@dataclass(frozen=True)
class PendingDecision:
    action: PendingAction
    lost: tuple[LostOffsets, ...] = ()
    error: OffsetsLostError | None = None  # REFUSE: what the plan raises
    abandon_reason: str | None = None  # ABANDON: kept in the abandoned batch's error


def decide_pending(
    pipeline: str,
    batch_id: int,
    ranges: Sequence[PlannedRange],
    log_starts: Mapping[TopicPartition, int],
    *,
    allow_data_loss: bool,
) -> PendingDecision:
    """The data-loss policy for a pending batch, given its ranges and the log starts read now."""
    lost = tuple(pending_losses(ranges, log_starts))
    if not lost:
        return PendingDecision(PendingAction.RESUME)
    if not allow_data_loss:
        return PendingDecision(
            PendingAction.REFUSE, lost, error=pending_batch_lost_error(pipeline, batch_id, lost)
        )
    reason = f"abandoned: offsets deleted by Kafka after planning: {describe(lost)}"
    return PendingDecision(PendingAction.ABANDON, lost, abandon_reason=reason)


def accepted_loss_note(skipped: Sequence[LostOffsets]) -> str | None:
    """The note a plan's batch carries for the offsets it skips under --allow-data-loss; None: none."""
    return f"data loss accepted, offsets deleted by retention: {describe(skipped)}" if skipped else None


def _texts(exc: BaseException) -> list[str]:
    """The text of exc and of its Python causes."""
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts.append(f"{type(current).__name__}: {current}")  # a Py4JJavaError's holds the JVM's
        current = current.__cause__ or current.__context__
    return texts


def spark_data_loss(
    exc: BaseException, pipeline: str, batch_id: int, ranges: Sequence[PlannedRange]
) -> OffsetsLostError | None:
    """An OffsetsLostError for Spark's failOnDataLoss error, naming what it can; None for any other."""
    text = "\n".join(_texts(exc))
    if not any(marker in text for marker in SPARK_DATA_LOSS_MARKERS):
        return None
    by_name = {f"{r.topic}-{r.partition}": r for r in ranges}
    named = []
    for start, end, topic_name, partition in _SPARK_RANGE.findall(text):
        r = by_name.get(f"{topic_name}-{partition}")
        where = (
            f"topic {r.topic!r} partition {r.partition}" if r else f"topic partition {topic_name}-{partition}"
        )
        line = f"  - {where}: offsets [{start}, {end}) could not be read"
        if line not in named:
            named.append(line)
    if not named:
        named = [
            f"  - topic {r.topic!r} partition {r.partition}: planned [{r.start}, {r.end})" for r in ranges
        ]
    return OffsetsLostError(
        f"batch {batch_id} of pipeline {pipeline!r}: Kafka deleted records of its ranges after the batch "
        "was planned (retention or DeleteRecords), so Spark's read (failOnDataLoss=true) failed:\n"
        + "\n".join(named)
        + f"\nThe batch is marked failed and nothing was written or committed. {allow_data_loss_fix(pipeline)}"
    )
