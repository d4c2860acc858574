"""A fault-injecting TCP proxy on 127.0.0.1 in front of a database server (PostgreSQL here); stdlib
only. Beside bench/fault_proxy.py, the HTTP one in front of a REST catalog. The tests put it
between a job and the control DB (tests/integration/batch/test_postgres_restart.py,
test_unknown_commit_outcomes.py, tests/integration/storage/test_s3a_commit_timeout.py), the chaos
run between every job and its PostgreSQL (bench/chaos/delta_coordinator.py).

It forwards every connection byte for byte. A caller arms one fault for the next client message a
predicate matches (its bytes: a statement's text and its bound parameters; carrying() and
bound_text() build one); then

- `drop`: the message is forwarded and applied, the server's answer goes nowhere, and after
  `settle_s` (the server applies it) the connection is closed; for `refuse_s` after that, new
  connections are refused: a network partition right after the server wrote the row;
- `hold`: the message is forwarded, the answer goes nowhere, and the connection stays open until
  release(), then closes; what the server does meanwhile (a restart) is the caller's;
- `stall`: the message is not forwarded; from then on no connection forwards anything and new ones
  are accepted and left unanswered, until release() drops them all: a server that stops answering.

So the client cannot know whether its statement landed. Bounded: a hold waits at most HOLD_MAX_S,
the threads are daemons, close() ends it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# The bytes of one client message -> whether the armed fault takes it.
Match = Callable[[bytes], bool]
HOLD_MAX_S = 300.0
KINDS = ("drop", "hold", "stall")


def bound_text(value: str) -> bytes:
    """A text parameter of PostgreSQL's Bind message: its int32 length, then its bytes (so a path
    matches exactly, not as the prefix of a longer one such as <path>_quarantine)."""
    raw = value.encode()
    return struct.pack("!i", len(raw)) + raw


def carrying(*parts: bytes, without: tuple[bytes, ...] = ()) -> Match:
    """A predicate: the message holds every one of `parts` and none of `without`."""
    return lambda data: all(p in data for p in parts) and not any(w in data for w in without)


@dataclass
class _Fault:
    kind: str
    match: Match
    settle_s: float
    refuse_s: float
    on_fire: Callable[[], None] | None


class TcpFaultProxy:
    """Listens on 127.0.0.1:`port` (a free one), forwards to host:`target_port` (module doc).
    `fired` is set when the armed fault took a message."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.fired, self.released, self.stalled = threading.Event(), threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._fault: _Fault | None = None
        self._refuse_until = 0.0
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, name="tcp-fault-proxy", daemon=True).start()

    def arm(
        self,
        kind: str,
        match: Match,
        *,
        settle_s: float = 1.0,
        refuse_s: float = 0.0,
        on_fire: Callable[[], None] | None = None,
    ) -> None:
        """The next client message `match` takes gets `kind` (module doc); on_fire runs once it did."""
        assert kind in KINDS, kind
        with self._lock:
            self.fired.clear()
            self.released.clear()
            self._fault = _Fault(kind, match, settle_s, refuse_s, on_fire)

    def disarm(self) -> None:
        with self._lock:
            self._fault = None

    def release(self) -> None:
        """End a hold (its connection closes) or a stall (every held connection is dropped, as by a
        server restart, and new ones are forwarded again)."""
        self.released.set()
        self.stalled.clear()
        with self._lock:
            held, self._held = self._held, []
        for sock in held:
            _close(sock)

    def close(self) -> None:
        _close(self.server)
        self.release()

    def _take(self, data: bytes) -> _Fault | None:
        with self._lock:
            fault = self._fault
            if fault is None or not fault.match(data):
                return None
            self._fault = None
            return fault

    def _fire(self, fault: _Fault) -> None:
        self.fired.set()
        if fault.on_fire is not None:
            fault.on_fire()

    def _hold(self, *socks: socket.socket) -> None:
        with self._lock:
            self._held.extend(socks)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.stalled.is_set():
                self._hold(client)  # accepted, never answered
                continue
            if time.monotonic() < self._refuse_until:
                _close(client)  # unreachable: the client's connection attempt fails
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:  # the server is down (restarting): the client sees it so
                _close(client)
                continue
            upstream.settimeout(None)
            muted = threading.Event()
            for src, dst, outbound in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, muted, outbound), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, muted: threading.Event, outbound: bool) -> None:
        try:
            while data := src.recv(65536):
                if self.stalled.is_set():
                    self._hold(src, dst)  # nothing more is forwarded, until release()
                    return
                fault = self._take(data) if outbound else None
                if fault is not None and fault.kind == "stall":
                    self.stalled.set()
                    self._hold(src, dst)
                    self._fire(fault)
                    return
                if fault is not None:
                    muted.set()  # the server's answer goes nowhere
                    dst.sendall(data)
                    if fault.kind == "hold":
                        self._fire(fault)
                        self.released.wait(HOLD_MAX_S)
                    else:
                        time.sleep(fault.settle_s)  # the server applies it (autocommit)
                        self._refuse_until = time.monotonic() + fault.refuse_s
                        self._fire(fault)
                    break
                if outbound or not muted.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        if not outbound and muted.is_set():
            return  # a muted client's connection ends in its outbound pump (at release, for a hold)
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
