"""Topic and cluster identity checks by tables of cases: recorded ids and Kafka's ids in, verdict out."""

from __future__ import annotations

import pytest

from eos_ingest.control.batches import RangeRecord
from eos_ingest.errors import ClusterMismatchError, PlanError, TopicRecreatedError
from eos_ingest.plan.identity import KafkaIdentity, TopicIdentity, check_batch_identity, check_identities
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.service.verify import split_by_incarnation

TI = TopicIdentity


def now(cluster: str | None = "C1", **ids: str | None) -> KafkaIdentity:
    return KafkaIdentity(cluster_id=cluster, topic_ids=ids, bootstrap="broker-a:9092")


# (recorded, current, topics, identities to record)
ACCEPTED = [
    pytest.param({}, now(a="A1"), ["a"], [TI("a", "A1", "C1")], id="first-plan-records-the-ids"),
    pytest.param({"a": TI("a", "A1", "C1")}, now(a="A1"), ["a"], [], id="same-ids-record-nothing"),
    pytest.param(
        {"a": TI("a", "A1", "C1")},
        now(a="A1", b="B1"),
        ["a", "b"],
        [TI("b", "B1", "C1")],
        id="topic-added-to-the-pipeline-is-recorded",
    ),
    pytest.param(
        {"a": TI("a", None, None)}, now(a="A1"), ["a"], [TI("a", "A1", "C1")], id="unknown-ids-are-filled"
    ),
    pytest.param(
        {"a": TI("a", "A1", "C1")}, now(a=None), ["a"], [], id="broker-without-topic-ids-is-not-a-mismatch"
    ),
    pytest.param(
        {"a": TI("a", "A1", "C1")}, now(None, a="A1"), ["a"], [], id="unknown-cluster-id-is-not-a-mismatch"
    ),
    pytest.param(
        {"gone": TI("gone", "G1", "C0")}, now(a="A1"), ["a"], [TI("a", "A1", "C1")], id="other-topics-ignored"
    ),
]


@pytest.mark.parametrize(("recorded", "current", "topics", "expected"), ACCEPTED)
def test_matching_or_unknown_identities_are_accepted(recorded, current, topics, expected) -> None:
    assert check_identities("p", recorded, current, topics) == expected


# (recorded, current, error type, words the message must hold)
REFUSED = [
    pytest.param(
        {"a": TI("a", "A1", "C1")},
        now(a="A2"),
        TopicRecreatedError,
        ["'a'", "A1", "A2", "eos-ingest reset-offsets --pipeline p --topic a --to earliest --reason"],
        id="topic-recreated",
    ),
    pytest.param(
        {"a": TI("a", "A1", "C1"), "b": TI("b", "B1", "C1")},
        now(a="A2", b="B2"),
        TopicRecreatedError,
        ["'a'", "A1", "A2", "'b'", "B1", "B2", "2 topic(s)"],
        id="every-recreated-topic-is-named",
    ),
    pytest.param(
        {"a": TI("a", "A1", "C1")},
        now("C2", a="A1"),
        ClusterMismatchError,
        ["C1", "C2", "broker-a:9092", "bootstrap.servers", "reset-offsets"],
        id="other-cluster",
    ),
    pytest.param(
        {"a": TI("a", "A1", "C1")},
        now("C2", a="A9"),
        ClusterMismatchError,
        ["C1", "C2", "broker-a:9092"],
        id="other-cluster-wins-over-topic-ids",
    ),
]


@pytest.mark.parametrize(("recorded", "current", "error", "words"), REFUSED)
def test_a_changed_identity_is_refused_naming_both_ids_and_the_fix(recorded, current, error, words) -> None:
    with pytest.raises(error) as raised:
        check_identities("p", recorded, current, sorted(current.topic_ids))
    assert isinstance(raised.value, PlanError)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


def test_a_pending_batch_of_the_old_topic_is_named_in_the_fix() -> None:
    with pytest.raises(TopicRecreatedError, match="eos-ingest abandon --pipeline p --batch-id 7"):
        check_identities("p", {"a": TI("a", "A1", "C1")}, now(a="A2"), ["a"], pending_batch=7)


R = PlannedRange("a", 0, 0, 10)

# (ranges with their planned topic id, recorded, current, error or None)
BATCH_CASES = [
    pytest.param([(R, "A1")], {"a": TI("a", "A1", "C1")}, now(a="A1"), None, id="same-topic"),
    pytest.param(
        [(R, None)], {"a": TI("a", "A1", "C1")}, now(a="A2"), None, id="planned-before-v2-unchecked"
    ),
    pytest.param([(R, "A1")], {}, now(a="A1"), None, id="nothing-recorded"),
    pytest.param([(R, "A1")], {"a": TI("a", "A2", "C1")}, now(a="A2"), TopicRecreatedError, id="recreated"),
    pytest.param(
        [(R, "A1")], {"a": TI("a", "A1", "C1")}, now("C2", a="A1"), ClusterMismatchError, id="cluster"
    ),
]


@pytest.mark.parametrize(("ranges", "recorded", "current", "error"), BATCH_CASES)
def test_a_batch_is_read_only_from_the_topic_it_was_planned_on(ranges, recorded, current, error) -> None:
    if error is None:
        check_batch_identity(3, "p", ranges, recorded, current)
        return
    with pytest.raises(error) as raised:
        check_batch_identity(3, "p", ranges, recorded, current)
    assert "batch 3" in str(raised.value) and "nothing was read" in str(raised.value)


# verify: which committed ranges form the expectation, which batches wrote rows of an older topic.
RR = RangeRecord
SPLIT_CASES = [
    pytest.param([RR(1, True, R, "A1")], {"a": "A1"}, [R], set(), id="current-topic"),
    pytest.param([RR(1, True, R, "A0")], {"a": "A1"}, [], {(1, "a")}, id="older-topic"),
    pytest.param(
        [RR(1, True, R, None)], {"a": "A1"}, [R], set(), id="range-from-schema-v1-counts-as-current"
    ),
    pytest.param([RR(1, True, R, "A0")], {"a": None}, [R], set(), id="broker-without-ids"),
    pytest.param([RR(2, False, R, "A1")], {"a": "A1"}, [], set(), id="uncommitted-not-expected"),
    pytest.param(
        [RR(2, False, R, "A0")], {"a": "A1"}, [], {(2, "a")}, id="uncommitted-older-rows-still-older"
    ),
    pytest.param([R], {"a": "A1"}, [R], set(), id="plain-range-is-current"),
]


@pytest.mark.parametrize(("records", "current_ids", "expected", "older"), SPLIT_CASES)
def test_verify_expects_only_the_current_topic_and_names_older_batches(
    records, current_ids, expected, older
) -> None:
    assert split_by_incarnation(records, current_ids) == (expected, older)
