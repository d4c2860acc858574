"""kafka-python connections that keep the last bytes a broker sent before it closed.

kafka-python 3.0's transports read a socket until it would block; when that read also meets the
peer's close, they report the close and drop the bytes read with it. A broker that refuses a SASL
login answers with the error and closes the connection right after (after
connection.failed.authentication.delay.ms, 100 ms by default): on a busy machine both arrive in
one read, the refusal is lost, and the client retries a wrong password until its deadline, then
reports "no answer" instead of "refused" (seen in CI, and reproduced on a loaded machine).

These transports hand the bytes to the protocol first and report the close on the next read, which
comes at once: a closed socket is always readable.

Gated on the installed kafka-python: on (KEEPS_THE_LAST_BYTES) for the versions whose own
transports drop the bytes (3.0.0, where kafka.net came in, to 3.0.12, the lock's and the one
tested); on any other version the manager builds kafka-python's own transports, silently. To
report upstream (dpkp/kafka-python, not filed yet): docs/upstream/kafka-python-refused-login.md.
Exit: test_python_net fails when the installed version's own transport keeps the bytes while
the gate is on (then drop this module), or drops them while it is off (then widen KNOWN_TO_DROP).

The 256 KiB reads these transports made (kafka-python reads 4 KiB a call) are gone: no wall-clock
gain measured. The gate's count of 905,000 committed records (~180 MB of fetches) on the local
broker, 4 KiB vs 256 KiB reads alternated, 8 runs each on 2 cores shared with a chaos run: wall
medians 2.33 vs 2.22 s (each run 0.9 to 4.0 s), CPU 0.65 vs 0.55 s. They read 4 KiB, as kafka-python.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import ssl
from typing import Any

import kafka.errors as kafka_errors
from kafka.net.manager import KafkaConnectionManager
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

log = logging.getLogger(__name__)

# kafka-python versions whose own transports drop the bytes read with the peer's close (tested).
KNOWN_TO_DROP = ((3, 0, 0), (3, 0, 12))


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version string: "3.0.12" -> (3, 0, 12), "3.1.0rc1" -> (3, 1, 0)."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


KAFKA_PYTHON_VERSION = _release(importlib.metadata.version("kafka-python"))
KEEPS_THE_LAST_BYTES = KNOWN_TO_DROP[0] <= KAFKA_PYTHON_VERSION <= KNOWN_TO_DROP[1]

_RECV_BYTES = 4096  # kafka-python's own read size
# A non-blocking socket with nothing more to read now (TLS: no whole record yet).
_NOTHING_YET = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class _ClosesAfterTheLastBytes:
    """kafka-python's _sock_recv (read until the socket would block), keeping the last bytes."""

    _close_seen: Exception | None = None
    _sock: Any

    def _sock_recv(self) -> tuple[bytes, Exception | None]:
        if self._close_seen is not None:
            return b"", self._close_seen
        chunks: list[bytes] = []
        error: Exception | None = None
        while True:
            try:
                chunk = self._sock.recv(_RECV_BYTES)
            except _NOTHING_YET:
                break
            except Exception as exc:  # as kafka-python: the connection is lost
                log.debug("%s: error receiving network data", self, exc_info=True)
                error = kafka_errors.KafkaConnectionError(exc)
                break
            if not chunk:
                error = kafka_errors.KafkaConnectionError("socket disconnected")
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        if error is not None and data:
            self._close_seen = error
            return data, None
        return data, error


class _TCPTransport(_ClosesAfterTheLastBytes, KafkaTCPTransport):
    pass


class _SSLTransport(_ClosesAfterTheLastBytes, KafkaSSLTransport):
    pass


_KEEPING = {KafkaTCPTransport: _TCPTransport, KafkaSSLTransport: _SSLTransport}


class ConnectionManager(KafkaConnectionManager):
    """kafka-python's connection manager, with the transports above where KEEPS_THE_LAST_BYTES."""

    async def _build_transport(self, node: Any, timeout_at: float | None = None) -> Any:
        transport = await super()._build_transport(node, timeout_at=timeout_at)
        if not KEEPS_THE_LAST_BYTES:
            return transport
        # Built and TLS-handshaken by kafka-python, not yet reading: only its reads change.
        transport.__class__ = _KEEPING.get(type(transport), type(transport))
        return transport
