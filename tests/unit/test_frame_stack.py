"""in_one_chunk: a call-heavy run around a frame-stack chunk's end maps no chunk per call.

Without it, CPython maps a new 16 KiB chunk for a call that does not fit in the current one and
unmaps it when that call returns; each such call then costs a fresh page, which the process's
minor page faults count. The baseline run shows the effect exists here (else the test skips).
"""

from __future__ import annotations

import resource
from collections.abc import Callable

import pytest

from eos_ingest.quality.frame_stack import in_one_chunk

CALLS_PER_DEPTH = 200


def _leaf() -> None:
    return None


def _descend(depth: int) -> None:
    if depth:
        _descend(depth - 1)
        return
    for _ in range(CALLS_PER_DEPTH):
        _leaf()


def _every_depth() -> None:
    # Some start depth puts the leaf's frame just past a chunk's end: each of its calls maps a chunk.
    for depth in range(400):
        _descend(depth)


def _minor_faults(run: Callable[[], object]) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    run()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_call_heavy_run_maps_no_chunk_per_call() -> None:
    _every_depth()  # warm: the interpreter's own first-call allocations
    baseline = _minor_faults(_every_depth)
    if baseline < CALLS_PER_DEPTH:
        pytest.skip(f"this Python maps no frame-stack chunk per call here ({baseline} minor faults)")
    in_chunk = _minor_faults(lambda: in_one_chunk(_every_depth))
    print(f"minor page faults: {baseline} plain, {in_chunk} in one chunk")
    assert in_chunk < baseline / 4


def test_the_result_and_errors_of_the_call_come_back() -> None:
    assert in_one_chunk(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        in_one_chunk(lambda: 1 // 0)
