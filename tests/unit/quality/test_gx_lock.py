"""The GX lock of a state folder: held only around GX's shared files, waited for with a limit.

Real GX on pandas frames and real processes; no Spark, no broker.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.errors import ConfigError, GxLockTimeoutError
from eos_ingest.quality import context as gx_context
from tests.helpers.gx import frame, pipeline

SLOW_S = 3.0  # each validation's computation is made to take this long


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_GX_LOCK_TIMEOUT_S", raising=False)
    return tmp_path / "state"


def hold_lock(root: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process that takes the lock (as a stuck GX run would) and says when it has it."""
    root.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, sys, time\n"
        f"h = open({str(root / '.lock')!r}, 'a')\n"
        "fcntl.flock(h, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        f"time.sleep({seconds})\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_held_lock_fails_the_validation_within_the_timeout_naming_the_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = pipeline(tmp_path / "pipelines", "orders")
    data = frame()
    monkeypatch.setenv("EOS_GX_LOCK_TIMEOUT_S", "2")
    holder = hold_lock(gx_context.gx_root(), seconds=60)
    outcome: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            gx_context.validate(config, 1, "gate", data, 3)
        except Exception as exc:
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - started

    try:
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), "the validation waited for the lock without a limit"
    finally:
        holder.kill()
        holder.wait()
    error = outcome.get("error")
    assert isinstance(error, GxLockTimeoutError), error
    assert 2 <= outcome["seconds"] < 10
    message = str(error)
    assert str(gx_context.gx_root() / ".lock") in message
    assert "fuser" in message and gx_context.LOCK_TIMEOUT_ENV in message
    assert error.retriable  # nothing validated or stored: a later attempt runs it again


@pytest.mark.parametrize("raw", ["0", "-1", "soon"])
def test_a_bad_timeout_setting_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(gx_context.LOCK_TIMEOUT_ENV, raw)
    with pytest.raises(ConfigError, match=gx_context.LOCK_TIMEOUT_ENV):
        gx_context.lock_timeout_s()


def _validate_slowly(config: PipelineConfig, out: str, both_computing: Any) -> None:
    """In a child process: one validation whose computation (GX's validator) takes SLOW_S; the
    computation's start and end go to `out`."""
    from great_expectations.validator.v1_validator import Validator

    original = Validator.validate_expectation_suite

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Both computations start together, whenever each child's GX import ends: on a loaded
        # machine the two imports ended seconds apart and the overlap fell short although nothing
        # was serialised. If the lock keeps the other out, the wait times out and the overlap fails.
        with contextlib.suppress(threading.BrokenBarrierError):
            both_computing.wait(timeout=60)
        started = time.time()
        time.sleep(SLOW_S)
        result = original(self, *args, **kwargs)
        Path(out).write_text(json.dumps([started, time.time()]))
        return result

    Validator.validate_expectation_suite = slow  # type: ignore[method-assign]
    result, _, report = gx_context.validate(config, 1, "gate", frame(), 3)
    assert result.success and Path(report).is_file()


def test_two_validations_compute_at_the_same_time(tmp_path: Path) -> None:
    """The computations of two pipelines' validations overlap: the lock covers GX's files only."""
    folder = tmp_path / "pipelines"
    configs = [pipeline(folder, "orders"), pipeline(folder, "payments")]
    # Spawned, not forked: a fork of this worker (which holds librdkafka's and other threads of the
    # tests before) crashed once in the child's garbage collection (SIGSEGV, a fresh-clone run).
    spawn = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"{c.name}.json" for c in configs]
    both_computing = spawn.Barrier(2)
    children = [
        spawn.Process(target=_validate_slowly, args=(c, str(o), both_computing))
        for c, o in zip(configs, outs, strict=True)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(180)
        assert child.exitcode == 0
    (start_a, end_a), (start_b, end_b) = (json.loads(o.read_text()) for o in outs)
    overlap = min(end_a, end_b) - max(start_a, start_b)
    assert overlap > SLOW_S / 2, f"the computations were serialised (overlap {overlap:.1f} s)"
    index = gx_context.data_docs_index().read_text()
    assert "orders" in index and "payments" in index  # both results reached the shared Data Docs
