"""A local Kafka cluster of stack/cluster.sh, and which of its nodes to break: the leader of a
partition, the coordinator of a transactional id (the leader of its transaction state partition),
the active controller (the quorum's leader). `make chaos CHAOS_BROKERS=3` kills these in turn;
the tests' cluster fixture (tests/fixtures/kafka_cluster.py) asks the same questions."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.chaos import produce

CLUSTER = Path(__file__).resolve().parents[2] / "stack" / "cluster.sh"
TRANSACTION_STATE = "__transaction_state"


@dataclass(frozen=True)
class KafkaCluster:
    """Nodes 1..nodes: node i listens on port + i - 1 for clients, controller_port + i - 1 for the
    quorum, and keeps its data in home/node-i."""

    home: Path
    port: int
    controller_port: int
    nodes: int = 3
    heap: str = "384m"
    # Set: node i's PROXIED listener binds proxied_port + i - 1 and advertises
    # proxied_advertised_port + i - 1, where a TCP fault proxy listens (bench/chaos/network.py).
    proxied_port: int | None = None
    proxied_advertised_port: int | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.nodes))

    @property
    def proxied_bootstrap(self) -> str:
        """The nodes' addresses behind the fault proxy (the bootstrap when there is none)."""
        if self.proxied_advertised_port is None:
            return self.bootstrap
        return ",".join(f"127.0.0.1:{self.proxied_advertised_port + i}" for i in range(self.nodes))

    def run(self, *args: str, timeout_s: float = 420) -> subprocess.CompletedProcess[str]:
        """cluster.sh with this cluster's nodes, ports and folder."""
        env = {
            **os.environ,
            "KAFKA_NODES": str(self.nodes),
            "KAFKA_CLUSTER_PORT": str(self.port),
            "KAFKA_CLUSTER_CONTROLLER_PORT": str(self.controller_port),
            "KAFKA_CLUSTER_HOME": str(self.home),
            "KAFKA_HEAP": self.heap,
            # Three JVMs starting at once on a loaded 2-core machine took 90 to 130 s here.
            "KAFKA_START_TIMEOUT": os.environ.get("KAFKA_START_TIMEOUT", "300"),
        }
        if self.proxied_port is not None and self.proxied_advertised_port is not None:
            env["KAFKA_CLUSTER_PROXIED_PORT"] = str(self.proxied_port)
            env["KAFKA_CLUSTER_PROXIED_ADVERTISED_PORT"] = str(self.proxied_advertised_port)
        return subprocess.run(
            [str(CLUSTER), *args], env=env, text=True, capture_output=True, timeout=timeout_s, check=False
        )

    @cached_property
    def admin(self) -> AdminClient:
        """One client for the cluster's life: a future outlives no client (its handle is destroyed
        with the client), and librdkafka reconnects to nodes that come back."""
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2})

    def create_topic(self, name: str, partitions: int) -> None:
        """A topic with a replica on every node (up to 3)."""
        topic = NewTopic(name, num_partitions=partitions, replication_factor=min(self.nodes, 3))
        self.admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)

    def leader(self, topic: str, partition: int, timeout_s: float = 30) -> int:
        """The node that leads `partition` of `topic` now (waits while it has none)."""
        deadline = time.monotonic() + timeout_s
        while True:
            meta = self.admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
            if meta.leader >= 0:
                return int(meta.leader)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}[{partition}] has no leader after {timeout_s} s")
            time.sleep(0.2)

    def preferred_leader(self, topic: str, partition: int) -> int:
        """The first replica of the partition's assignment, where a preferred election puts its lead."""
        return int(self.admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].replicas[0])

    def in_sync(self, topic: str) -> bool:
        """Every partition of `topic` has all its replicas in sync."""
        parts = self.admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        return all(len(p.isrs) == len(p.replicas) for p in parts)

    def coordinator(self, transactional_id: str) -> int:
        """The node that coordinates `transactional_id`: the leader of its transaction state
        partition, abs(Java hashCode of the id) % partitions (TransactionStateManager.partitionFor)."""
        topics = self.admin.list_topics(TRANSACTION_STATE, timeout=10).topics
        count = len(topics[TRANSACTION_STATE].partitions)
        return self.leader(TRANSACTION_STATE, java_abs(java_hash(transactional_id)) % count)

    def active_controller(self) -> int:
        """The quorum's leader, from the quorum state each node keeps (the newest epoch wins)."""
        best = (-1, -1)
        for state in self.home.glob("node-*/data/__cluster_metadata-0/quorum-state"):
            data = json.loads(state.read_text())
            best = max(best, (int(data.get("leaderEpoch", -1)), int(data.get("leaderId", -1))))
        if best[1] < 1:
            raise RuntimeError(f"no node of the cluster in {self.home} knows the quorum's leader")
        return best[1]

    def elect_preferred(self, topic: str, partition: int) -> None:
        """A preferred-leader election of one partition: its leader moves with no node down."""
        future = self.admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, partition)])
        future.result(timeout=60)


def java_hash(text: str) -> int:
    """Java's String.hashCode (a signed 32-bit int) of a string of the Basic Multilingual Plane."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_abs(value: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0."""
    return 0 if value == -(1 << 31) else abs(value)


def free_base(count: int, rng: random.Random | None = None) -> int:
    """The first of `count` consecutive free ports below the kernel's ephemeral range (cluster.sh
    numbers its nodes' ports from a base). Inside that range a client that keeps reconnecting to a
    dead node's port can be given that very port as its own (a TCP self-connect), and the node's
    restart then fails with "Address already in use": seen in a chaos run's first broker kill."""
    low = _ephemeral_low()
    rng = rng or random.Random()
    for _ in range(200):
        base = rng.randrange(max(1024, low - 12_000), low - count)
        if all(_bindable(p) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no run of {count} free ports on 127.0.0.1 below {low}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


KILL_ROLES = ("partition leader", "transaction coordinator", "active controller")


def kill_target(cluster: KafkaCluster | None, topic: str, number: int, rng: random.Random) -> tuple[int, str]:
    """The node the `number`th broker kill of a chaos run takes, and its role: on a single broker
    that broker; on a cluster, in turn, the leader of a random partition of `topic`, the coordinator
    of the newest transactional producer and the active controller."""
    if cluster is None:
        return 1, "the broker"
    role = KILL_ROLES[number % len(KILL_ROLES)]
    if role == "partition leader":
        partitions = cluster.admin.list_topics(topic, timeout=10).topics[topic].partitions
        return cluster.leader(topic, rng.choice(sorted(partitions))), role
    if role == "transaction coordinator" and produce.TRANSACTIONAL_IDS:
        return cluster.coordinator(produce.TRANSACTIONAL_IDS[-1]), role
    return cluster.active_controller(), KILL_ROLES[2]
