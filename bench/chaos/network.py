"""Network faults between a chaos run's jobs and its brokers (--network-faults N).

Every job's Kafka clients (the planner, Spark's reads, the gate's independent count, verify) reach
the brokers through Toxiproxy (bench/toxiproxy.py): one proxy per node, in front of the node's
PROXIED listener (stack/stack.sh, stack/cluster.sh), which advertises the proxy's port, so a client
that bootstraps there reconnects there. The producers and the end check connect straight: what the
faults test is the ingest, not the source of truth it is checked against.

The N faults are spread over the chaos phase; each takes one node's proxy (a random node) for a few
seconds, the kinds in turn: added latency, connection resets (every connection reset shortly after
it opens, mid-fetch included), a black hole (the node accepts and never answers) and a slow close.
A job that meets one rides it out or gives up within its bounds with the retriable exit 75; the end
check then finds every committed record exactly once.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import toxiproxy

# (toxic, its attributes, how it is told in the result)
FAULTS: tuple[tuple[str, dict[str, int], str], ...] = (
    ("latency", {"latency": 1500, "jitter": 500}, "latency 1.5 s"),
    ("reset_peer", {"timeout": 300}, "connection resets"),
    ("timeout", {"timeout": 0}, "black hole"),
    ("slow_close", {"delay": 5000}, "slow close"),
)


@dataclass
class NetworkFaults:
    """Toxiproxy's server and one proxy per node: node i's proxy listens on advertised_port + i - 1
    and forwards to its PROXIED listener at proxied_port + i - 1."""

    home: Path
    nodes: int
    proxied_port: int
    advertised_port: int
    api_port: int
    rng: random.Random
    injected: list[dict[str, Any]] = field(default_factory=list)
    _server: Any = None
    _client: toxiproxy.Toxiproxy | None = None

    @property
    def bootstrap(self) -> str:
        """The brokers as the jobs reach them: through the proxies."""
        return ",".join(f"127.0.0.1:{self.advertised_port + i}" for i in range(self.nodes))

    def up(self) -> None:
        self._client, self._server = toxiproxy.start(self.api_port, self.home / "toxiproxy.log")
        for i in range(self.nodes):
            self._client.proxy(
                f"node-{i + 1}", f"127.0.0.1:{self.advertised_port + i}", f"127.0.0.1:{self.proxied_port + i}"
            )

    def inject(self, number: int, stop: threading.Event) -> str:
        """The `number`th fault: on one node's proxy for 5 to 20 s (cut short when `stop` is set),
        then taken off; what it was, for the run's events."""
        assert self._client is not None, "NetworkFaults.up() first"
        kind, attributes, label = FAULTS[number % len(FAULTS)]
        node = self.rng.randint(1, self.nodes)
        seconds = round(self.rng.uniform(5, 20), 1)
        name = self._client.add(f"node-{node}", kind, "downstream", **attributes)
        try:
            stop.wait(seconds)
        finally:
            self._client.remove(f"node-{node}", name)
        self.injected.append({"fault": label, "node": node, "seconds": seconds})
        return f"{label} on node {node}'s proxy for {seconds} s"

    def clear(self) -> None:
        """Every toxic off (the end of the chaos phase: the catch-up and the end check run clean)."""
        if self._client is not None:
            self._client.reset()

    def down(self) -> None:
        if self._server is not None:
            toxiproxy.stop(self._server)
            self._server = None

    def report(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for entry in self.injected:
            by_kind[entry["fault"]] = by_kind.get(entry["fault"], 0) + 1
        return {"injected": len(self.injected), "by_kind": by_kind, "faults": self.injected}
