"""Helpers for tests that stop a real process at a fault hook and kill it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest


def wait_for_pause(job: subprocess.Popen[str], pause_file: Path, log: Path, timeout_s: float = 240) -> None:
    """Waits until the job (started in a session of its own) writes `pause_file` at its fault
    hook; fails the test, and kills the job's group, when it exits first or takes too long."""
    deadline = time.monotonic() + timeout_s
    while not pause_file.exists():
        if job.poll() is not None:
            pytest.fail(f"the job exited ({job.returncode}) before its commit:\n{log.read_text()[-5000:]}")
        if time.monotonic() > deadline:
            os.killpg(job.pid, signal.SIGKILL)
            pytest.fail("the job did not reach its commit in time")
        time.sleep(0.2)
