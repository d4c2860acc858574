"""The CPU each test file costs, with every process it started: `make test` is CPU-bound on 2 cores,
so a file's seconds of wall time say little of what it takes from the others, and its CPU does.

Each worker counts, for each test file, the CPU (user + system, its reaped children's included) of
the processes that are its own: its descendants, and the processes that carry its tag in their
environment (stacks started with setsid/nohup, such as `airflow standalone` or a broker, leave the
tree, but keep the environment). A process seen at the file's start counts from there; a new one
counts whole. A process that is gone at the file's end counts in its parent's reaped children's
CPU when its parent was one of the worker's (a spark-submit under the CLI under the worker: the
CLI's count holds the JVM's, the worker's the CLI's); otherwise (a daemon stopped by the file's
teardown or killed by a test) as last seen by a sampler every few seconds.
Missed: what a process used after its last sample when its parent had gone first (it was
re-parented away in between), a few seconds at most.
The counts go to .state/test-cpu/<worker>.json; the controller merges them into .state/test-cpu.json
and prints the costliest files after the run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_ingest.paths import state_dir

TAG = "EOS_TEST_CPU_TAG"
TICKS = os.sysconf("SC_CLK_TCK")
SHOWN = 15  # files in the summary
SAMPLE_S = 3.0

Seen = dict[tuple[int, int], tuple[str, int, float]]  # (pid, start time) -> comm, ppid, CPU seconds


def _processes() -> Iterator[tuple[int, int, str, int, float]]:
    """(pid, ppid, comm, start time, CPU seconds with reaped children) of every process."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after its last ')'.
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        ppid, started = int(fields[1]), int(fields[19])
        cpu = sum(int(f) for f in fields[11:15]) / TICKS  # utime, stime, cutime, cstime
        yield int(entry.name), ppid, comm, started, cpu


def _tagged(pid: int, tag: bytes) -> bool:
    try:
        return tag in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def snapshot(tag: str) -> Seen:
    """The CPU of this process's own processes, by (pid, start time) so a reused pid is new."""
    me = os.getpid()
    rows = list(_processes())
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid, *_ in rows:
        children[ppid].append(pid)
    own, stack = set(), [me]
    while stack:
        pid = stack.pop()
        own.add(pid)
        stack.extend(children[pid])
    marker = f"{TAG}={tag}".encode()
    return {
        (pid, started): ("pytest" if pid == me else comm, ppid, cpu)  # xdist retitles its workers
        for pid, ppid, comm, started, cpu in rows
        if pid in own or (pid != me and _tagged(pid, marker))
    }


def file_cpu(start: Seen, seen: Seen, end: Seen) -> dict[str, float]:
    """CPU seconds by command between `start` and `end`, with `seen` the last sample of each process."""
    ours = {pid for pid, _ in end} | {pid for pid, _ in seen}
    by_comm: defaultdict[str, float] = defaultdict(float)
    for key, (comm, ppid, cpu) in {**seen, **end}.items():
        if key not in end and ppid in ours:
            # Reaped by a parent of ours, alive or gone: in that parent's children's CPU, which
            # goes up the chain to the first one still alive or counted as last seen.
            continue
        by_comm[comm] += cpu - start.get(key, (comm, 0, 0.0))[2]
    return dict(sorted(by_comm.items(), key=lambda kv: -kv[1]))


class CpuAccounting:
    def __init__(self) -> None:
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.tag = f"{self.worker}-{os.getpid()}"
        os.environ[TAG] = self.tag  # inherited by every process the tests start
        self.out = state_dir() / "test-cpu"
        self.files: dict[str, dict[str, float]] = {}
        self.start: Seen | None = None
        self.seen: Seen = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._sample, name="cpu-accounting", daemon=True).start()

    def _sample(self) -> None:
        while True:
            time.sleep(SAMPLE_S)
            latest = snapshot(self.tag)
            with self.lock:
                if self.start is not None:
                    self.seen.update(latest)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        if self.start is None:
            start = snapshot(self.tag)
            with self.lock:
                self.start, self.seen = start, dict(start)
        yield
        if nextitem is None or nextitem.path != item.path:
            end = snapshot(self.tag)
            with self.lock:
                by_comm = file_cpu(self.start or {}, self.seen, end)
                self.start, self.seen = None, {}
            name = str(item.path.relative_to(item.config.rootpath))
            self.files[name] = {c: round(s, 1) for c, s in by_comm.items() if s >= 0.05}
            # Written after each file, not at the session's end, which xdist's controller may not
            # wait for.
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / f"{self.worker}.json").write_text(json.dumps(self.files, indent=1))


def register(config: pytest.Config) -> None:
    """Counts in this process unless it is an xdist controller, whose workers run the tests."""
    controller = not hasattr(config, "workerinput") and (config.getoption("numprocesses", None) or 0)
    if not controller and Path("/proc/self/stat").exists():
        config.pluginmanager.register(CpuAccounting(), "cpu_accounting")


def merge() -> dict[str, dict[str, float]]:
    """Every worker's counts as .state/test-cpu.json; the parts are removed."""
    parts = state_dir() / "test-cpu"
    merged: dict[str, dict[str, float]] = {}
    for part in sorted(parts.glob("*.json")) if parts.is_dir() else []:
        merged.update(json.loads(part.read_text()))
        part.unlink()
    if merged:
        (state_dir() / "test-cpu.json").write_text(json.dumps(merged, indent=1, sort_keys=True))
    return merged


def summary(merged: dict[str, dict[str, float]]) -> list[str]:
    totals = {name: sum(by_comm.values()) for name, by_comm in merged.items()}
    lines = [f"CPU of the test files, their processes included: {sum(totals.values()):,.0f} s in all"]
    for name, total in sorted(totals.items(), key=lambda kv: -kv[1])[:SHOWN]:
        top = ", ".join(f"{c} {s:.0f}" for c, s in list(merged[name].items())[:3])
        lines.append(f"{total:8.0f} s  {name}  ({top})")
    return lines
