"""stack/stack.sh: up is idempotent, down leaves no process and no open port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from eos_ingest import paths
from tests.helpers.ports import free_port, free_ports, port_open

pytestmark = pytest.mark.integration


def stack(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(paths.REPO_ROOT / "stack" / "stack.sh"), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_stack_up_twice_then_down_leaves_no_process_and_no_port() -> None:
    home = paths.state_dir() / f"stack-test-{os.getpid()}"
    port, controller = free_ports(2)
    env = {
        **os.environ,
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(controller),
        "KAFKA_HOME_DIR": str(home),
    }
    try:
        first = stack("up", env)
        assert first.returncode == 0, first.stderr
        pid = int(Path(home, "kafka.pid").read_text())
        assert port_open(port) and port_open(controller)

        second = stack("up", env)
        assert second.returncode == 0 and "already running" in second.stdout
        assert int(Path(home, "kafka.pid").read_text()) == pid

        down = stack("down", env)
        assert down.returncode == 0, down.stderr
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert not port_open(port) and not port_open(controller)
        assert stack("status", env).returncode == 3
    finally:
        stack("down", env)
        shutil.rmtree(home, ignore_errors=True)


def test_stack_up_refuses_a_port_taken_by_another_process() -> None:
    home = paths.state_dir() / f"stack-test-taken-{os.getpid()}"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = {
            **os.environ,
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(free_port()),
            "KAFKA_HOME_DIR": str(home),
        }
        refused = stack("up", env)
    shutil.rmtree(home, ignore_errors=True)
    assert refused.returncode == 1
    assert str(port) in refused.stderr and "taken" in refused.stderr
