"""The Kafka admin client of every command: librdkafka's log watched for a refused login or a
plaintext client on a TLS port (one line, at once), and bounded retries of what a broker may
answer later (tenacity), with one deadline for all of them."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    KafkaError,
    KafkaException,
)
from confluent_kafka.admin import AdminClient
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception

from eos_ingest.errors import KafkaAccessError, KafkaUnavailableError
from eos_ingest.kafka import clients as librdkafka_clients
from eos_ingest.redact import redact_text

T = TypeVar("T")
# The least time an attempt is started with: no retry begins with less left before the deadline.
_LAST_TRY_S = 0.5
# Errors that mean "the cluster did not answer (yet)", worth a bounded retry.
TRANSIENT_ERRORS = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    # A broker restarted: its partitions' leader epochs catch up with the clients' in moments.
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
}


# librdkafka's FAIL log lines that mean "the broker refused these settings", not "no answer yet":
# (pattern, what to tell the user). A retry cannot fix them, so they end the retries at once.
_REFUSALS = (
    (
        re.compile(r"SASL authentication error: (?P<cause>[^(]*)"),
        "SASL authentication failed ({cause}); check sasl.username, sasl.password and sasl.mechanism",
    ),
    (
        # "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker ..."
        re.compile(r"SSL handshake failed: (?P<cause>.*?)(?:: broker certificate|, verify that| \(after|$)"),
        "the TLS handshake failed ({cause}); check that ssl.ca.location is the CA that signed the "
        "broker's certificate and that the address matches that certificate",
    ),
    (
        # A TLS listener closes the connection on a plaintext client's first request.
        re.compile(
            r"(?:\w+://)?(?P<address>[^\s/]+)/(?P<node>\w+): Disconnected: connection closed by peer.*"
            r"in state APIVERSION_QUERY"
        ),
        "the broker closed the connection on the first request, as a TLS listener does to a plaintext "
        "client; check security.protocol (SSL or SASL_SSL) and the port",
    ),
)
# A plaintext client on a TLS listener sees every bootstrap address close the connection on its
# first request. A broker going down looks the same at its own address: killed, or behind a TCP
# proxy or load balancer that accepts a connection and closes it when its backend is gone (make
# chaos's network faults showed it on 2026-12-07: a plan exited 2, "check security.protocol", a
# second after a node's kill -9). So these lines count only on bootstrap connections (a node with
# an id came from a metadata answer: the cluster did answer this protocol), only once every
# bootstrap address has closed so, and only when repeated: _PLAINTEXT_ON_TLS_REPEATS lines in all.
_PLAINTEXT_ON_TLS_REPEATS = 3
_DEFAULT_PORT = "9092"


def bootstrap_addresses(bootstrap_servers: str | None) -> frozenset[str]:
    """host:port of each bootstrap server as librdkafka's log names it (no protocol, port 9092 if
    none given), lower case."""
    addresses = set()
    for server in (bootstrap_servers or "").split(","):
        address = server.strip().split("://")[-1].lower()
        if address:
            addresses.add(address if ":" in address else f"{address}:{_DEFAULT_PORT}")
    return frozenset(addresses)


class QuietLibrdkafkaLog:
    """librdkafka's own log lines (e.g. "%3|...|FAIL|rdkafka#..." per failed connect) go to Python
    logging at DEBUG, never raw to stderr: an unreachable broker is reported once, by our error.

    It also remembers the first line that shows the broker refused the settings (`refusal`), so the
    caller can stop retrying and say why in one line."""

    _log = logging.getLogger("eos_ingest.librdkafka")

    def __init__(self, bootstrap_servers: str | None = None) -> None:
        self.refusal: str | None = None
        self._bootstrap = bootstrap_addresses(bootstrap_servers)
        self._disconnects = 0
        self._closed_at: set[str] = set()  # bootstrap addresses that closed on the first request

    def log(self, level: int, msg: str, *args: object) -> None:
        # A `debug: conf` dump or a SASL error may quote a setting: redacted like every echo.
        text = redact_text(msg % args if args else msg)
        self._log.debug("%s", text)
        if self.refusal is None and "FAIL" in text:
            self.refusal = self._refusal(text)

    def _refusal(self, text: str) -> str | None:
        for index, (pattern, told) in enumerate(_REFUSALS):
            found = pattern.search(text)
            if found is None:
                continue
            if index == len(_REFUSALS) - 1:
                if found["node"] != "bootstrap":
                    return None
                self._disconnects += 1
                self._closed_at.add(found["address"].lower())
                if self._disconnects < _PLAINTEXT_ON_TLS_REPEATS or not self._closed_at >= self._bootstrap:
                    return None
            return told.format(cause=found.groupdict().get("cause", "").strip())
        return None


@dataclass
class _Admin:
    """An AdminClient and the log watcher that knows whether the broker refused its settings."""

    client: AdminClient
    watch: QuietLibrdkafkaLog

    def refusal(self) -> str | None:
        self.client.poll(0)  # serves the queued log lines to the watcher
        return self.watch.refusal


def admin_client(kafka_settings: Mapping[str, str], timeout_s: float = 15.0) -> AdminClient:
    """An AdminClient whose requests give up after `timeout_s` instead of librdkafka's minutes."""
    return watched_admin(kafka_settings, timeout_s).client


def watched_admin(kafka_settings: Mapping[str, str], timeout_s: float) -> _Admin:
    watch = QuietLibrdkafkaLog(kafka_settings.get("bootstrap.servers"))
    conf: dict[str, Any] = {"socket.timeout.ms": int(timeout_s * 1000), **kafka_settings}
    conf.setdefault("logger", watch)
    return _Admin(librdkafka_clients.build(AdminClient, conf), watch)


def transient(exc: BaseException) -> bool:
    """A KafkaException whose KafkaError means "the cluster did not answer (yet)"."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() in TRANSIENT_ERRORS


def with_retries(
    what: str,
    bootstrap: str,
    call: Callable[[float], T],
    deadline_s: float,
    backoff_s: float,
    max_attempts: int | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    refusal: Callable[[], str | None] | None = None,
) -> T:
    """call(seconds left) until it succeeds or raises a non-transient error (raised as it is).

    All within deadline_s in total (and at most max_attempts), so an unreachable broker fails in
    deadline_s, not a sum of timeouts. Back-off backoff_s, then twice that, ..., cut short so the
    next attempt still has half a second before the deadline; the retries stop when less than that
    is left, so every sleep is followed by an attempt and the last attempt by none. Then
    KafkaUnavailableError naming the broker and the cause.

    `refusal` (see _Admin.refusal) tells a broker that answered but refused the settings (wrong
    password, unknown CA, plaintext on a TLS port) from one that did not answer: its failures are
    not retried but raised at once as KafkaAccessError saying what to check.
    """
    end = time.monotonic() + deadline_s

    def attempt(left_s: float) -> T:
        try:
            return call(left_s)
        except KafkaException:
            refused = refusal() if refusal is not None else None
            if refused is not None:
                raise KafkaAccessError(
                    f"Kafka at {bootstrap} refused the connection while {what}: {refused}; "
                    "the batch is unchanged."
                ) from None
            raise

    def left() -> float:
        return end - time.monotonic()

    def backoff(state: RetryCallState) -> float:
        return max(0.0, min(backoff_s * 2 ** (state.attempt_number - 1), left() - _LAST_TRY_S))

    def stop(state: RetryCallState) -> bool:
        out_of_attempts = max_attempts is not None and state.attempt_number >= max_attempts
        return out_of_attempts or left() < _LAST_TRY_S

    retrying = Retrying(stop=stop, wait=backoff, retry=retry_if_exception(transient), sleep=sleep)
    try:
        return retrying(lambda: attempt(max(left(), _LAST_TRY_S)))
    except RetryError as exc:
        attempts = exc.last_attempt.attempt_number
        last = exc.last_attempt.exception()
    error = last.args[0] if last is not None and last.args else last
    reason = error.str() if isinstance(error, KafkaError) else last
    raise KafkaUnavailableError(
        f"Kafka at {bootstrap} did not answer while {what} ({attempts} attempt(s) in {deadline_s - left():.0f} s: "
        f"{reason}); the batch is unchanged. Check that the broker is up and reachable from here and "
        "that bootstrap.servers is right, then run again."
    )


def topic_problems(
    topics: Sequence[str], errors: Mapping[str, KafkaError | None]
) -> tuple[list[str], KafkaError | None]:
    """(missing topics, first other metadata error) from each listed topic's metadata error.

    Only a topic absent from the metadata or reported UNKNOWN_TOPIC_OR_PART is missing; any other
    error (LEADER_NOT_AVAILABLE for a topic just created or a broker restarting, ...) is not proof
    that the topic is gone, so the caller retries it."""
    missing = [t for t in topics if t not in errors or _code(errors[t]) == KafkaError.UNKNOWN_TOPIC_OR_PART]
    other = next((errors[t] for t in topics if t not in missing and errors[t] is not None), None)
    return missing, other


def _code(error: KafkaError | None) -> int | None:
    return None if error is None else error.code()
