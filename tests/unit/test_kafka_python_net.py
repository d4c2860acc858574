"""The last bytes before a close reach the protocol: a broker's "wrong password" answer is one.
A large answer is read in large chunks."""

from __future__ import annotations

import socket
import time
from typing import Any

from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaTCPTransport

from eos_ingest.kafka.python_net import _TCPTransport


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


def test_kafka_pythons_own_transport_still_drops_them() -> None:
    """Why kafka_python_net exists: when this fails, kafka-python keeps the bytes itself and the
    module can go."""
    assert _received_before_the_close(KafkaTCPTransport) == b""


def test_a_large_answer_arrives_whole_in_large_reads() -> None:
    payload = bytes(range(256)) * 640  # 160 KiB: what a socket pair holds before it is read
    data, recv_calls = _received(_TCPTransport, payload)
    assert data == payload
    assert recv_calls <= 4, recv_calls  # kafka-python's 4 KiB reads: 40 calls and more
