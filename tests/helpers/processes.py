"""Helpers for tests that stop a real process at a fault hook and kill it."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest


def finish(job: subprocess.Popen[str], log: Path, timeout_s: float = 240) -> tuple[int, str]:
    """The job's exit code and its log, once it ended (at most `timeout_s`)."""
    job.wait(timeout=timeout_s)
    return job.returncode, log.read_text()


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


class AttemptInThread:
    """run_fenced(batch) in a thread of this process (the job's steps and its failure handling,
    without a spark-submit's ~15 s), held at the fault point whose file is `pause` (the test sets the
    point's variable): the test acts there, then lets it go on. Without `pause`, the test acts while
    it runs (a broker's kill). `error` is what the attempt raised."""

    def __init__(self, spark, config, store, batch, pause: Path | None = None) -> None:
        from eos_ingest.batch.sequence import run_fenced

        self.pause = pause
        self.error: BaseException | None = None

        def attempt() -> None:
            try:
                run_fenced(spark, config, store, batch)
            except BaseException as exc:  # handed to the test
                self.error = exc

        self.thread = threading.Thread(target=attempt, name="eos-test-attempt")
        self.thread.start()

    def wait_for_pause(self, timeout_s: float = 240) -> None:
        assert self.pause is not None, "an attempt made without a pause never waits at one"
        deadline = time.monotonic() + timeout_s
        while not self.pause.exists():
            assert self.thread.is_alive(), f"the attempt ended before its pause: {self.error!r}"
            assert time.monotonic() < deadline, "the attempt did not reach its pause in time"
            time.sleep(0.2)

    def go_on(self) -> None:
        if self.pause is not None:
            self.pause.unlink(missing_ok=True)

    def join(self, timeout_s: float = 300) -> None:
        self.thread.join(timeout=timeout_s)

    def ended(self, timeout_s: float) -> BaseException | None:
        """Waits up to `timeout_s` for the attempt's end (failing the test past it); what it raised."""
        self.join(timeout_s)
        assert not self.thread.is_alive(), f"the attempt did not end within {timeout_s:.0f} s"
        return self.error
