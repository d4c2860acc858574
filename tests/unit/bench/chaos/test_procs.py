"""The ports a chaos run gives its broker(s), PostgreSQL and the fault proxies' listeners."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import cluster
from bench.chaos.procs import Processes


@pytest.mark.parametrize(("brokers", "proxied"), [(1, False), (1, True), (3, False), (3, True)])
def test_every_port_a_run_binds_again_after_a_restart_is_below_the_ephemeral_range(
    tmp_path: Path, brokers: int, proxied: bool
) -> None:
    """A port of the ephemeral range can be handed to another process's client socket between the
    pick and the bind (or a restart): the short chaos run's broker once failed to start so."""
    procs = Processes(tmp_path, {}, brokers, proxied=proxied)
    ports = [procs.kafka_port, procs.controller_port, procs.pg_port]
    if procs.cluster is not None:
        c = procs.cluster
        ports += [p for base in (c.port, c.controller_port) for p in range(base, base + brokers)]
    if procs.proxied is not None:
        ports += [p for base in procs.proxied for p in range(base, base + brokers)]
    assert len(set(ports)) == len(ports), ports
    assert max(ports) < cluster._ephemeral_low(), ports
