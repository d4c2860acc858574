"""stack/spark.sh: up is idempotent, status tells, down leaves no process and no open port."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from eos_ingest import paths
from tests.helpers.ports import free_ports, port_open

pytestmark = pytest.mark.integration


def spark(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(paths.REPO_ROOT / "stack" / "spark.sh"), command],
        env=env, capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip


def test_spark_up_twice_then_down_leaves_no_process_and_no_port() -> None:
    home = paths.state_dir() / f"spark-script-test-{os.getpid()}"
    names = ("SPARK_MASTER_PORT", "SPARK_MASTER_WEBUI_PORT", "SPARK_WORKER_WEBUI_PORT")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    env = {**os.environ, "PYTHON": sys.executable, "SPARK_CLUSTER_DIR": str(home)}
    env.update({k: str(v) for k, v in ports.items()})
    try:
        first = spark("up", env)
        assert first.returncode == 0, first.stderr
        pids = [(home / f"{role}.pid").read_text().strip() for role in ("master", "worker")]
        again = spark("up", env)
        assert again.returncode == 0 and "already running" in again.stdout
        assert [(home / f"{role}.pid").read_text().strip() for role in ("master", "worker")] == pids
        assert spark("status", env).returncode == 0
        assert (home / "logs" / "worker.log").is_file() and (home / "work").is_dir()
    finally:
        down = spark("down", env)
    assert down.returncode == 0, down.stderr
    assert spark("status", env).returncode == 3
    assert not any(port_open(p) for p in ports.values())
    assert all(subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0 for pid in pids)
    shutil.rmtree(home, ignore_errors=True)
