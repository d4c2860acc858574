"""Topic metadata errors: only UNKNOWN_TOPIC_OR_PART means a topic is missing."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from eos_ingest.kafka_offsets import topic_problems

UNKNOWN = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
NO_LEADER = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
DENIED = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)


@pytest.mark.parametrize(
    ("errors", "missing", "other"),
    [
        pytest.param({"a": None, "b": None}, [], None, id="all-fine"),
        pytest.param({"a": None}, ["b"], None, id="absent-from-metadata"),
        pytest.param({"a": None, "b": UNKNOWN}, ["b"], None, id="unknown-topic"),
        pytest.param({"a": NO_LEADER, "b": None}, [], NO_LEADER, id="leader-not-available-is-not-missing"),
        pytest.param({"a": DENIED, "b": None}, [], DENIED, id="other-error-is-not-missing"),
        pytest.param({"a": UNKNOWN, "b": NO_LEADER}, ["a"], NO_LEADER, id="both"),
    ],
)
def test_only_unknown_topic_or_part_means_missing(errors, missing, other) -> None:
    assert topic_problems(["a", "b"], errors) == (missing, other)
