"""The last bytes before a close reach the protocol: a broker's "wrong password" answer is one.
Only on the kafka-python versions known to drop them."""

from __future__ import annotations

import asyncio
import importlib.metadata
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaTCPTransport

from eos_ingest.kafka import python_net
from eos_ingest.kafka.python_net import KAFKA_PYTHON_VERSION, KEEPS_THE_LAST_BYTES, _release, _TCPTransport


class _Recorder:
    _sensors = None

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.lost: Exception | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def connection_lost(self, error: Exception | None) -> None:
        self.lost = error or ConnectionError("closed")


class _CountingSocket:
    """A socket that counts its recv calls."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.recv_calls = sock, 0

    def recv(self, size: int) -> bytes:
        self.recv_calls += 1
        return self.sock.recv(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def _received_before_the_close(transport_class: Any, payload: bytes = b"SaslAuthenticate: refused") -> bytes:
    """What the protocol receives when the answer and the peer's close are in one read."""
    return _received(transport_class, payload)[0]


def _received(transport_class: Any, payload: bytes) -> tuple[bytes, int]:
    """What the protocol receives of `payload`, sent with the peer's close, and the recv calls made."""
    net = NetworkSelector()
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.sendall(payload)
    peer.close()  # both wait in the socket before the transport's first read
    counting = _CountingSocket(ours)
    transport = transport_class(net, counting)
    protocol = _Recorder()
    transport.set_protocol(protocol)

    async def until_lost() -> None:
        transport.resume_reading()
        deadline = time.monotonic() + 5
        while protocol.lost is None and time.monotonic() < deadline:
            await net.sleep(0.01)

    try:
        net.run(until_lost)
    finally:
        net.close()
    assert protocol.lost is not None, "the close was never reported"
    return b"".join(protocol.data), counting.recv_calls


def test_the_bytes_read_with_the_close_reach_the_protocol_before_the_close() -> None:
    assert _received_before_the_close(_TCPTransport) == b"SaslAuthenticate: refused"


def test_the_fix_is_on_exactly_where_kafka_pythons_own_transport_drops_them() -> None:
    """Why python_net exists, and its exit: when this fails with the fix on, the installed
    kafka-python keeps the bytes itself and the module can go; with the fix off, this version
    still drops them and KNOWN_TO_DROP must take it in."""
    drops = _received_before_the_close(KafkaTCPTransport) == b""
    assert drops == KEEPS_THE_LAST_BYTES, f"kafka-python {KAFKA_PYTHON_VERSION}: drops {drops}"


def test_the_gate_reads_the_installed_version() -> None:
    assert _release("3.0.12") == (3, 0, 12) and _release("3.1.0rc1+local") == (3, 1, 0)
    assert _release(importlib.metadata.version("kafka-python")) == KAFKA_PYTHON_VERSION
    assert KEEPS_THE_LAST_BYTES  # requirements.lock's kafka-python==3.0.12 needs the fix


def _run(coroutine: Any) -> Any:
    """The coroutine's result, from a loop of its own in a thread: an earlier test of the session
    (the browser tests' Playwright) may leave an event loop running in this thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_outside_the_known_versions_the_manager_builds_kafka_pythons_own_transports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = KafkaTCPTransport.__new__(KafkaTCPTransport)

    async def own_transport(self: Any, node: Any, timeout_at: float | None = None) -> Any:
        return built

    monkeypatch.setattr(python_net.KafkaConnectionManager, "_build_transport", own_transport)
    manager = python_net.ConnectionManager.__new__(python_net.ConnectionManager)
    for keeps, expected in ((True, _TCPTransport), (False, KafkaTCPTransport)):
        monkeypatch.setattr(python_net, "KEEPS_THE_LAST_BYTES", keeps)
        built.__class__ = KafkaTCPTransport
        assert type(_run(manager._build_transport(None))) is expected
