"""Running a system under measurement: wall seconds, output lines stamped on arrival, and the peak
RSS of the JVM and of the Python processes in its process tree (psutil, every 0.2 s)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

import psutil

POLL_S = 0.2


class RssPoller:
    """Polls the process tree under `pid` in a thread; peaks in MB of java and of python processes."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_jvm_mb = 0.0
        self.peak_python_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        jvm = python = 0
        for proc in tree:
            try:
                name = proc.name()
                rss = proc.memory_info().rss
            except psutil.Error:
                continue
            if name == "java":
                jvm += rss
            elif name.startswith("python") or name in ("airflow", "eos-ingest"):
                python += rss
        self.peak_jvm_mb = max(self.peak_jvm_mb, jvm / 1e6)
        self.peak_python_mb = max(self.peak_python_mb, python / 1e6)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(POLL_S)


@dataclass
class Measured:
    argv: list[str]
    returncode: int
    seconds: float
    peak_jvm_mb: float
    peak_python_mb: float
    lines: list[tuple[float, str]] = field(default_factory=list)  # stderr and stdout, stamped
    stdout: str = ""

    def tail(self, chars: int = 4000) -> str:
        return "\n".join(text for _, text in self.lines)[-chars:]

    def figures(self) -> dict[str, float | None]:
        return {
            "seconds": round(self.seconds, 2),
            "peak_rss_jvm_mb": round(self.peak_jvm_mb) or None,  # None: no JVM in the tree
            "peak_rss_python_mb": round(self.peak_python_mb) or None,
        }


def run_measured(argv: Sequence[str], env: dict[str, str] | None = None, timeout_s: float = 3600) -> Measured:
    """Run argv to its end; raises RuntimeError with the output's tail when it fails or times out."""
    lines: list[tuple[float, str]] = []
    out: list[str] = []
    lock = threading.Lock()
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def pump(stream: IO[str], keep: list[str] | None) -> None:
        for line in stream:
            with lock:
                lines.append((time.monotonic() - started, line.rstrip("\n")))
            if keep is not None:
                keep.append(line)

    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, None), daemon=True),
    ]
    for reader in readers:
        reader.start()
    with RssPoller(proc.pid) as poller:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        seconds = time.monotonic() - started
    for reader in readers:
        reader.join(timeout=10)
    measured = Measured(
        list(argv), proc.returncode, seconds, poller.peak_jvm_mb, poller.peak_python_mb, lines, "".join(out)
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {proc.returncode}:\n{measured.tail()}")
    return measured
