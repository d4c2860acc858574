"""Records deleted after the plan: which pending ranges are lost, what the plan does with the
pending batch (by a table of cases, like the planner's), and Spark's error recognized."""

from __future__ import annotations

import pytest

from eos_ingest.errors import OffsetsLostError
from eos_ingest.plan.data_loss import (
    PendingAction,
    accepted_loss_note,
    decide_pending,
    pending_batch_lost_error,
    pending_losses,
    spark_data_loss,
)
from eos_ingest.plan.ranges import LostOffsets, PlannedRange, TopicPartition

R0 = PlannedRange("orders", 0, 100, 200)
R1 = PlannedRange("orders", 1, 50, 50)  # empty: nothing to read, so nothing lost
R2 = PlannedRange("orders", 2, 10, 20)


@pytest.mark.parametrize(
    ("log_starts", "expected"),
    [
        pytest.param({}, [], id="no-log-starts-known"),
        pytest.param({TopicPartition("orders", 0): 100}, [], id="log-start-at-range-start"),
        pytest.param({TopicPartition("orders", 0): 99}, [], id="log-start-below"),
        pytest.param(
            {TopicPartition("orders", 0): 150}, [LostOffsets("orders", 0, 100, 150)], id="partly-lost"
        ),
        pytest.param(
            {TopicPartition("orders", 0): 250}, [LostOffsets("orders", 0, 100, 250)], id="wholly-lost"
        ),
        pytest.param({TopicPartition("orders", 1): 60}, [], id="empty-range-ignored"),
        pytest.param(
            {TopicPartition("orders", 0): 101, TopicPartition("orders", 2): 15},
            [LostOffsets("orders", 0, 100, 101), LostOffsets("orders", 2, 10, 15)],
            id="two-partitions",
        ),
        pytest.param({TopicPartition("other", 0): 500}, [], id="other-topic"),
    ],
)
def test_pending_losses_are_the_non_empty_ranges_starting_below_the_log_start(log_starts, expected) -> None:
    assert pending_losses([R0, R1, R2], log_starts) == expected


def test_pending_batch_lost_error_names_batch_partition_offsets_and_the_override() -> None:
    error = pending_batch_lost_error("orders", 7, [LostOffsets("orders", 0, 100, 150)])
    text = str(error)
    assert isinstance(error, OffsetsLostError) and not error.retriable
    for part in ("batch 7", "'orders' partition 0", "offset 100", "starts at 150", "--allow-data-loss"):
        assert part in text


TP = TopicPartition
LOST_0 = LostOffsets("orders", 0, 100, 150)

# (log starts read now, --allow-data-loss, expected action, expected lost ranges)
DECISION_CASES = [
    pytest.param({}, False, PendingAction.RESUME, (), id="no-log-starts-resume"),
    pytest.param({TP("orders", 0): 100}, False, PendingAction.RESUME, (), id="intact-resume"),
    pytest.param({TP("orders", 0): 100}, True, PendingAction.RESUME, (), id="intact-with-override-resume"),
    pytest.param({TP("orders", 1): 60}, False, PendingAction.RESUME, (), id="empty-range-lost-resume"),
    pytest.param({TP("orders", 0): 150}, False, PendingAction.REFUSE, (LOST_0,), id="lost-refuse"),
    pytest.param({TP("orders", 0): 150}, True, PendingAction.ABANDON, (LOST_0,), id="lost-override-abandon"),
    pytest.param(
        {TP("orders", 0): 150, TP("orders", 2): 20},
        True,
        PendingAction.ABANDON,
        (LOST_0, LostOffsets("orders", 2, 10, 20)),
        id="two-lost-override-abandon",
    ),
]


@pytest.mark.parametrize(("log_starts", "allow", "action", "lost"), DECISION_CASES)
def test_decide_pending_resumes_an_intact_batch_and_refuses_or_abandons_a_lost_one(
    log_starts, allow, action, lost
) -> None:
    decision = decide_pending("orders", 7, [R0, R1, R2], log_starts, allow_data_loss=allow)

    assert (decision.action, decision.lost) == (action, lost)
    # Only a refusal raises, only an abandon leaves a reason on the batch.
    assert (decision.error is not None) is (action is PendingAction.REFUSE)
    assert (decision.abandon_reason is not None) is (action is PendingAction.ABANDON)


def test_a_refusal_raises_the_pending_batch_lost_error_and_changes_nothing() -> None:
    decision = decide_pending("orders", 7, [R0], {TP("orders", 0): 150}, allow_data_loss=False)

    assert isinstance(decision.error, OffsetsLostError)
    assert str(decision.error) == str(pending_batch_lost_error("orders", 7, [LOST_0]))


def test_an_abandon_names_the_lost_offsets_in_its_reason() -> None:
    decision = decide_pending(
        "orders", 7, [R0, R2], {TP("orders", 0): 150, TP("orders", 2): 20}, allow_data_loss=True
    )

    assert decision.abandon_reason == (
        "abandoned: offsets deleted by Kafka after planning: orders[0] [100, 150), orders[2] [10, 20)"
    )


@pytest.mark.parametrize(
    ("skipped", "note"),
    [
        pytest.param((), None, id="nothing-skipped"),
        pytest.param(
            (LOST_0,), "data loss accepted, offsets deleted by retention: orders[0] [100, 150)", id="one"
        ),
        pytest.param(
            (LOST_0, LostOffsets("b", 3, 0, 5)),
            "data loss accepted, offsets deleted by retention: orders[0] [100, 150), b[3] [0, 5)",
            id="two",
        ),
    ],
)
def test_accepted_loss_note_names_each_skipped_range(skipped, note) -> None:
    assert accepted_loss_note(skipped) == note


# The message Spark 4.1.3's Kafka source raised on the real broker after DeleteRecords (abridged).
SPARK_TEXT = (
    "An error occurred while calling o54.count.\n"
    ": org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because "
    "they are not available in Kafka any more;\neither the data was aged out by Kafka or the topic may "
    "have been deleted before all the data in the\ntopic was processed.\nReason: Could not read records "
    "in offset [100, 200) for topic partition orders-0\nwith consumer group spark-kafka-relation-x."
)


@pytest.mark.parametrize(
    ("exc", "names"),
    [
        pytest.param(
            RuntimeError(SPARK_TEXT), ["topic 'orders' partition 0: offsets [100, 200)"], id="spark"
        ),
        pytest.param(
            RuntimeError("Job aborted: [KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] lost"),
            [
                "topic 'orders' partition 0: planned [100, 200)",
                "topic 'orders' partition 2: planned [10, 20)",
            ],
            id="error-class-only",
        ),
        pytest.param(RuntimeError("Py4JJavaError: executor lost"), None, id="unrelated"),
        pytest.param(ValueError("Connection refused"), None, id="other-error"),
    ],
)
def test_spark_data_loss_recognizes_only_the_data_loss_error(exc, names) -> None:
    lost = spark_data_loss(exc, "orders", 7, [R0, R1, R2])
    if names is None:
        assert lost is None
        return
    assert isinstance(lost, OffsetsLostError)
    text = str(lost)
    assert (
        "batch 7 of pipeline 'orders'" in text
        and "eos-ingest run --pipeline orders --allow-data-loss" in text
    )
    for name in names:
        assert name in text


def test_spark_data_loss_finds_the_error_in_a_cause() -> None:
    try:
        try:
            raise RuntimeError(SPARK_TEXT)
        except RuntimeError as inner:
            raise ValueError("task failed") from inner
    except ValueError as outer:
        lost = spark_data_loss(outer, "orders", 7, [R0])
    assert lost is not None and "offsets [100, 200)" in str(lost)
