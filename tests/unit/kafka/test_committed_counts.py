"""The gate's independent count when Kafka does not answer: a retriable error, never a traceback.

A chaos run saw `eos-ingest run` exit 1 with a raw `KafkaException(UNKNOWN_LEADER_EPOCH)` from the
count after a broker restart; a broker that never answers ended in a bare TimeoutError (exit 1 too).
Both must leave the batch planned and tell the CLI and Airflow to run again (exit 75).
"""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos_ingest.errors import EXIT_RETRIABLE, KafkaUnavailableError, exit_code
from eos_ingest.kafka.admin import transient
from eos_ingest.kafka.committed_counts import read_committed_counts


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_broker_that_never_answers_is_a_retriable_error_naming_what_was_counted() -> None:
    settings = {"bootstrap.servers": f"127.0.0.1:{closed_port()}", "log_level": 0}
    with pytest.raises(KafkaUnavailableError, match=r"orders\[3\] \[10, 20\).*run it again") as caught:
        read_committed_counts(settings, {("orders", 3): [(10, 20)]}, timeout_s=1.0)
    assert exit_code(caught.value) == EXIT_RETRIABLE


@pytest.mark.parametrize(
    "code",
    [KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.LEADER_NOT_AVAILABLE,
     KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN],
)  # fmt: skip
def test_errors_of_a_restarting_broker_are_transient(code: int) -> None:
    assert transient(KafkaException(KafkaError(code)))


def test_an_authorization_error_is_not_transient() -> None:
    assert not transient(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
