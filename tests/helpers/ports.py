"""Ports on 127.0.0.1: free ones for the servers a test starts, and whether one is listening."""

from __future__ import annotations

import socket

from bench.chaos.procs import free_ports

__all__ = ["free_port", "free_ports", "port_open"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0
