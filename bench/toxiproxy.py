"""Toxiproxy (scripts/build-toxiproxy.sh), the TCP fault proxy between Kafka clients and brokers:
its server started and stopped, its proxies made, toxics added to them and taken off. The tests'
network faults (tests/fixtures/toxiproxy.py) and `make chaos`'s (bench/chaos/network.py) use it.

A broker reached through it has a PROXIED listener (stack/stack.sh) that advertises the proxy's
port, so a client that bootstraps through the proxy reconnects through it, Spark's Kafka source
included.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eos_ingest import paths

SERVER = paths.state_dir() / "tools" / "toxiproxy-server"


@dataclass
class Toxiproxy:
    """A running Toxiproxy server (its API at `api`) and the proxies made on it, by name."""

    api: str
    proxies: dict[str, str] = field(default_factory=dict)  # name -> the address it listens on

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.api}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def proxy(self, name: str, listen: str, upstream: str) -> None:
        """A proxy `name` that listens on `listen` (host:port) and forwards to `upstream`."""
        self._call(
            "POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        )
        self.proxies[name] = listen

    def add(self, proxy: str, kind: str, stream: str = "downstream", **attributes: int) -> str:
        """Adds a toxic of `kind` (latency, reset_peer, timeout, slow_close, ...) to `proxy`, on
        every connection, open ones included; returns its name for remove()."""
        name = f"{kind}_{stream}"
        body = {"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics", body)
        return name

    def remove(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def reset(self) -> None:
        """Every toxic off and every proxy enabled again."""
        self._call("POST", "/reset")


def start(api_port: int, log_path: Path, timeout_s: float = 30) -> tuple[Toxiproxy, subprocess.Popen[bytes]]:
    """Toxiproxy's server on 127.0.0.1:api_port, its output in `log_path`; (client, process).
    A RuntimeError names the fix when the server is not built or does not start."""
    if not SERVER.exists():
        raise RuntimeError(f"no Toxiproxy server at {SERVER}: run `make setup` (scripts/build-toxiproxy.sh)")
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(SERVER), "-host", "127.0.0.1", "-port", str(api_port)], stdout=log, stderr=subprocess.STDOUT
        )
    client = Toxiproxy(f"http://127.0.0.1:{api_port}")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client._call("GET", "/version")
            return client, server
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop(server)
                raise RuntimeError(
                    f"Toxiproxy did not start (exit {server.poll()}); see {log_path}"
                ) from None
            time.sleep(0.1)


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
