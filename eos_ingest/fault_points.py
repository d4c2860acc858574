"""Fault injection for the exactly-once tests: a named point where a process pauses while a file
exists, so that a test can kill it there or let another process overtake it. Off unless the
variable naming the point is set (never in production configs)."""

from __future__ import annotations

import os
import time
from pathlib import Path

# Bound on one pause: a test that forgets to release it does not leave a process behind for good.
MAX_PAUSE_S = 600


def pause_if_asked(variable: str) -> None:
    """When $variable names a file: write this process's pid into it, then wait while it exists."""
    marker = os.environ.get(variable)
    if not marker:
        return
    path = Path(marker)
    path.write_text(str(os.getpid()))
    deadline = time.monotonic() + MAX_PAUSE_S
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
