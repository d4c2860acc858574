"""Topic metadata errors: only UNKNOWN_TOPIC_OR_PART means a topic is missing; the retry policy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos_ingest.errors import KafkaAccessError, KafkaUnavailableError
from eos_ingest.kafka import admin as kafka_admin
from eos_ingest.kafka.admin import topic_problems, with_retries

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


# -- the retry policy of the offset and identity reads (no broker: a call that fails on purpose) -----

TRANSPORT = KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))


@pytest.mark.parametrize(
    ("deadline_s", "backoff_s", "max_attempts", "sleeps"),
    [
        # Back-off 0.1 s, 0.2 s, then 0.4 s cut to 0.2 s so the 4th try starts 0.5 s before the
        # deadline; after it less than 0.5 s is left: no 4th sleep (the old loop slept it away).
        pytest.param(1.0, 0.1, None, [0.1, 0.2, 0.2], id="deadline-ends-it-without-a-last-sleep"),
        pytest.param(30.0, 0.1, 3, [0.1, 0.2], id="max-attempts-ends-it-without-a-last-sleep"),
        pytest.param(30.0, 0.1, 1, [], id="one-attempt-no-sleep"),
        pytest.param(0.4, 0.1, None, [], id="deadline-below-half-a-second-one-attempt"),
    ],
)
def test_the_last_attempt_is_not_followed_by_a_sleep(
    deadline_s, backoff_s, max_attempts, sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The retry loop's clock is one that only its sleeps and attempts (1 ms each) move: the same
    # sleeps on a loaded machine too.
    now = [0.0]
    monkeypatch.setattr(kafka_admin, "time", SimpleNamespace(monotonic=lambda: now[0]))
    events: list[str | float] = []

    def call(left_s: float) -> None:
        assert left_s > 0
        events.append("attempt")
        now[0] += 0.001
        raise TRANSPORT

    def sleep(seconds: float) -> None:
        events.append(seconds)
        now[0] += seconds

    with pytest.raises(KafkaUnavailableError) as raised:
        with_retries(
            "reading partition offsets", "127.0.0.1:1", call, deadline_s, backoff_s, max_attempts, sleep=sleep
        )

    assert events[-1] == "attempt", events
    assert [e for e in events if e != "attempt"] == pytest.approx(sleeps, abs=0.01)
    assert events.count("attempt") == len(sleeps) + 1
    message = str(raised.value)
    assert message.startswith("Kafka at 127.0.0.1:1 did not answer while reading partition offsets (")
    assert f"({len(sleeps) + 1} attempt(s) in " in message and "Connection refused" in message
    assert "the batch is unchanged. Check that the broker is up" in message


def test_a_non_transient_error_is_raised_at_once_without_retry() -> None:
    denied = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    calls: list[float] = []

    def call(left_s: float) -> None:
        calls.append(left_s)
        raise denied

    with pytest.raises(KafkaException) as raised:
        with_retries("reading partition offsets", "b:9092", call, 30.0, 0.1, None, sleep=calls.append)
    assert raised.value is denied and len(calls) == 1


def test_a_transient_error_then_success_returns_the_result() -> None:
    answers: list[Exception | str] = [TRANSPORT, TRANSPORT, "offsets"]
    slept: list[float] = []

    def call(left_s: float) -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert with_retries("reading", "b:9092", call, 30.0, 0.5, None, sleep=slept.append) == "offsets"
    assert slept == [0.5, 1.0]


# librdkafka's FAIL lines as seen against the test broker's SASL_SSL listener.
_SASL_FAIL = (
    "FAIL [rdkafka#producer-1] [thrd:sasl_ssl://127.0.0.1:39094/bootstrap]: sasl_ssl://127.0.0.1:39094/bootstrap: "
    "SASL authentication error: Authentication failed during authentication due to invalid credentials with "
    "SASL mechanism SCRAM-SHA-512 (after 411ms in state AUTH_REQ)"
)
_TLS_FAIL = (
    "FAIL [rdkafka#producer-1] [thrd:sasl_ssl://127.0.0.1:39094/bootstrap]: sasl_ssl://127.0.0.1:39094/bootstrap: "
    "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not "
    "be verified, verify that ssl.ca.location is correctly configured (after 57ms in state SSL_HANDSHAKE)"
)
_PLAINTEXT_FAIL = (
    "FAIL [rdkafka#producer-1] [thrd:127.0.0.1:39094/bootstrap]: 127.0.0.1:39094/bootstrap: Disconnected: "
    "connection closed by peer: receive 0 after POLLIN (after 12ms in state APIVERSION_QUERY)"
)
_DOWN_FAIL = (
    "FAIL [rdkafka#producer-1] [thrd:127.0.0.1:9/bootstrap]: 127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 "
    "failed: Connection refused (after 0ms in state CONNECT)"
)


@pytest.mark.parametrize(
    ("lines", "told"),
    [
        ([_SASL_FAIL], "SASL authentication failed (Authentication failed during authentication"),
        ([_TLS_FAIL], "the TLS handshake failed (error:0A000086:SSL routines::certificate verify failed)"),
        ([_PLAINTEXT_FAIL] * 2, None),  # a broker going down looks the same, once or twice
        ([_PLAINTEXT_FAIL] * 3, "check security.protocol"),
        ([_DOWN_FAIL] * 5, None),  # no answer at all: retried, then KafkaUnavailableError
    ],
)
def test_librdkafka_lines_that_mean_the_broker_refused_the_settings(
    lines: list[str], told: str | None
) -> None:
    watch = kafka_admin.QuietLibrdkafkaLog("sasl_ssl://127.0.0.1:39094")
    for line in lines:
        watch.log(3, line)
    if told is None:
        assert watch.refusal is None
    else:
        assert watch.refusal is not None and told in watch.refusal


def test_a_refusal_ends_the_retries_at_once_with_a_kafka_access_error() -> None:
    calls = []

    def call(left_s: float) -> None:
        calls.append(left_s)
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))

    with pytest.raises(
        KafkaAccessError, match="refused the connection while testing: nope; the batch is unchanged"
    ):
        kafka_admin.with_retries(
            "testing", "b:1", call, 30.0, 1.0, sleep=lambda s: None, refusal=lambda: "nope"
        )
    assert len(calls) == 1


def _closed_on_first_request(broker: str) -> str:
    return (
        f"FAIL [rdkafka#producer-1] [thrd:{broker}]: {broker}: Disconnected: connection closed by peer: "
        "receive 0 after POLLIN (after 3ms in state APIVERSION_QUERY)"
    )


def test_a_node_that_closes_connections_after_the_cluster_answered_is_down_not_a_tls_listener() -> None:
    """make chaos, 2026-12-07: a node killed -9 behind its TCP proxy (which accepts and then closes)
    closed the plan's connections on their first request; the plan exited 2, "check
    security.protocol", where a broker going down is exit 75. A node with an id came from the
    cluster's metadata answer over the same protocol: its closing is never a TLS listener's."""
    watch = kafka_admin.QuietLibrdkafkaLog("127.0.0.1:28541,127.0.0.1:28542,127.0.0.1:28543")
    for _ in range(10):
        watch.log(3, _closed_on_first_request("127.0.0.1:28542/2"))
    assert watch.refusal is None


def test_one_of_several_bootstrap_addresses_closing_is_a_node_down_all_of_them_a_tls_listener() -> None:
    watch = kafka_admin.QuietLibrdkafkaLog("PLAINTEXT://Broker-A:9092, broker-b")
    for _ in range(5):
        watch.log(3, _closed_on_first_request("broker-a:9092/bootstrap"))
    assert watch.refusal is None  # broker-b has not closed so: broker-a may just be down
    watch.log(3, _closed_on_first_request("broker-b:9092/bootstrap"))
    assert watch.refusal is not None and "check security.protocol" in watch.refusal


def test_bootstrap_addresses_as_librdkafka_names_them() -> None:
    assert kafka_admin.bootstrap_addresses(" SASL_SSL://Kafka-1:9093,kafka-2 ,") == {
        "kafka-1:9093",
        "kafka-2:9092",
    }
    assert kafka_admin.bootstrap_addresses(None) == frozenset()
