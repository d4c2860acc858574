"""Deep Python work run in one frame-stack chunk, so CPython does not map and unmap memory per call.

CPython 3.11+ keeps a thread's frames in 16 KiB chunks: a call that does not fit in the current
chunk maps a new one, and its return unmaps it again. A deep, call-heavy run that hovers around a
chunk's end (GX's import, whose call depth moves in and out of a boundary in its loops) paid one
mmap and one munmap per such call. Measured with the import run through `in_one_chunk`: mmap calls
of a whole `eos-ingest audit` of 950,000 rows 47,600 -> 1,244, its wall 1.86 -> 1.55 s (medians of
5, alternated); of a 10,000-record `eos-ingest run` 55,000 -> 7,400 (most of those the JVM's).

`in_one_chunk` calls the function from a frame that declares a 512 KiB value stack it never uses:
that frame gets a 1 MiB chunk of its own, and every frame the call opens fits in the other half, so
no chunk is mapped or unmapped until it returns. The unused value stack costs address space only
(its pages are never touched); the frames after it touch what they would have touched anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")

# Value-stack slots (8 bytes each) of the calling frame: 512 KiB, so the chunk is 1 MiB and the
# call has ~512 KiB of frames (thousands of nested calls; an import nests a few hundred deep).
_SLOTS = 64 * 1024 + 8


def _call(fn: Callable[[], Result]) -> Result:
    return fn()


# The same function, its frame declaring _SLOTS value-stack slots that it never uses.
_call.__code__ = _call.__code__.replace(co_stacksize=_SLOTS)


def in_one_chunk(fn: Callable[[], Result]) -> Result:
    """`fn()`, with its frames (and theirs) in one frame-stack chunk of their own."""
    return _call(fn)
