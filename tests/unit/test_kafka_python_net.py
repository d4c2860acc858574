"""The last bytes before a close reach the protocol: a broker's "wrong password" answer is one."""

from __future__ import annotations

import socket
import time
from typing import Any

from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaTCPTransport

from eos_ingest.kafka_python_net import _TCPTransport


class _Recorder:
    _sensors = None

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.lost: Exception | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def connection_lost(self, error: Exception | None) -> None:
        self.lost = error or ConnectionError("closed")


def _received_before_the_close(transport_class: Any) -> bytes:
    """What the protocol receives when the answer and the peer's close are in one read."""
    net = NetworkSelector()
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.sendall(b"SaslAuthenticate: refused")
    peer.close()  # both wait in the socket before the transport's first read
    transport = transport_class(net, ours)
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
    return b"".join(protocol.data)


def test_the_bytes_read_with_the_close_reach_the_protocol_before_the_close() -> None:
    assert _received_before_the_close(_TCPTransport) == b"SaslAuthenticate: refused"


def test_kafka_pythons_own_transport_still_drops_them() -> None:
    """Why kafka_python_net exists: when this fails, kafka-python keeps the bytes itself and the
    module can go."""
    assert _received_before_the_close(KafkaTCPTransport) == b""
