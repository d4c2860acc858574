"""This venv's Python in a fresh process (`python -c CODE` or `python -m MODULE`), for what the test
process has already imported (pyspark, GX, Airflow) or set (its environment)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def python_stdout(
    args: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None, timeout: float = 180
) -> str:
    """What `python ARGS` printed; its exit must be 0 (else its stderr's end is the failure)."""
    done = subprocess.run(
        [sys.executable, *args],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def python_json(
    args: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None, timeout: float = 180
) -> Any:
    """The JSON that `python ARGS` printed as its last line (what it logged before is passed over)."""
    return json.loads(python_stdout(args, env=env, cwd=cwd, timeout=timeout).strip().splitlines()[-1])
