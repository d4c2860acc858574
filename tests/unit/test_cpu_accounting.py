"""tests/cpu_accounting.py: what a test file's CPU is made of."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cpu_accounting import TAG, file_cpu, snapshot


def test_a_file_counts_from_its_start_new_processes_whole_and_a_gone_process_once() -> None:
    start = {(1, 0): ("pytest", 0, 10.0), (2, 5): ("java", 1, 4.0), (3, 6): ("java", 0, 2.0)}
    seen = {
        **start,
        (2, 5): ("java", 1, 9.0),  # reaped by the worker (pid 1): in the worker's own count
        (3, 6): ("java", 0, 7.0),  # a daemon stopped by the teardown: as last seen
        (4, 8): ("python", 0, 3.0),  # new, then gone with no parent of ours: whole
        (6, 9): ("eos-ingest", 1, 1.0),  # a CLI the worker reaped, and the JVM the CLI reaped:
        (7, 9): ("java", 6, 8.0),  # both in the worker's count
        (8, 9): ("python", 3, 0.5),  # a child of the stopped daemon: in the daemon's count
    }
    end = {(1, 0): ("pytest", 0, 20.0), (5, 9): ("postgres", 0, 1.5)}
    assert file_cpu(start, seen, end) == {"pytest": 10.0, "java": 5.0, "python": 3.0, "postgres": 1.5}


def test_the_snapshot_holds_a_child_and_a_process_that_left_the_tree_but_carries_the_tag() -> None:
    tag = f"test-{os.getpid()}"
    env = {**os.environ, TAG: tag}
    # A grandchild whose parent exits at once: it is re-parented away from this process.
    code = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    orphans: list[int] = []
    try:
        seen = {pid: ppid for (pid, _), (_, ppid, _) in snapshot(tag).items()}
        assert os.getpid() in seen and seen[child.pid] == os.getpid()
        # The tagged grandchild, whose parent is neither this process nor one of its children.
        orphans = [pid for pid, ppid in seen.items() if ppid not in seen]
        orphans.remove(os.getpid())
        assert len(orphans) == 1, seen
    finally:
        child.kill()
        child.wait()
        for pid in orphans:
            os.kill(pid, 9)
