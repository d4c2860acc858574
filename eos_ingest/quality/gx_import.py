"""GX's import, once per process, and the three tricks that make it cheaper, each gated where it is
measured to pay, with its figure, its upstream issue and its exit.

Every GX entry point calls `import_gx()` before its own GX imports, and wraps them in `quiet_gx()`.

1. Deferred modules (`defer`, every Python). GX 1.24 imports scipy.stats and altair at import time
   for two expectations (KL divergence, a KS test) and their charts, which the default suite never
   uses: a stand-in goes in sys.modules and the first attribute looked up on it imports the real
   module, which then replaces it there. GX's import 3.05 -> 2.18 s of CPU on Python 3.11 (medians
   of 3, 2 cores). Not importlib.util.LazyLoader: on Python 3.11 `import name` reads the module's
   __spec__, which makes a LazyLoader module load at once. Upstream: GX's import cost was
   great-expectations/great_expectations#2984 (closed 2021, before scipy.stats and altair came in);
   none open on these two. Exit: test_gx_import's precondition test fails when a GX upgrade no
   longer imports them: then remove GX_DEFERRED_MODULES.
2. Hidden packages (`hidden`, every Python). In a process without pyspark (the audit, the validate
   task), GX's pyspark bindings would import pyspark, its ML and Connect modules, scipy.sparse and
   grpc (~0.12 s of CPU); hidden, GX falls back as it does where pyspark is not installed. Exit: the
   same precondition test, for pyspark.
3. One frame-stack chunk (`in_one_chunk`, CPython without a cached chunk: FRAME_STACK_CHURNS).
   CPython 3.11+ keeps a thread's frames in 16 KiB chunks: a call that does not fit in the current
   chunk maps a new one and its return unmaps it. GX's import hovers around a chunk's end, so it paid
   one mmap and one munmap per such call: measured here, mmap calls of `import great_expectations`
   44,790 -> 1,238 on 3.11.7, 39,282 -> 1,028 on 3.12.1, 39,414 -> 1,024 on 3.13.0; CPU 3.24 ->
   2.92 s on 3.11 (medians of 5); earlier, a whole `eos-ingest audit` of 950,000 rows 1.86 -> 1.55 s
   of wall. Upstream: python/cpython#142183, fixed by caching one chunk per thread
   (python/cpython#145789) in 3.15, backported to 3.13.13 and to 3.14 (3.14.4 by its date; not
   measured here, and 3.14 is not yet supported). Exit: test_gx_import's
   chunk test fails on a Python the gate calls fixed that still churns, or on one it calls
   churning that no longer does; when 3.13.13 is the oldest Python supported, remove it.
"""

from __future__ import annotations

import gc
import importlib
import importlib.abc
import importlib.util
import logging
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

Result = TypeVar("Result")

# Imported by GX for its KL-divergence and KS-test expectations and their charts (trick 1).
GX_DEFERRED_MODULES = ("scipy.stats", "altair")

# CPython maps and unmaps a frame-stack chunk per call at a chunk's end (trick 3): every 3.11 and
# 3.12, 3.13 before 3.13.13, 3.14 before 3.14.4 (python/cpython#142183).
FRAME_STACK_CHURNS = sys.implementation.name == "cpython" and (
    sys.version_info < (3, 13, 13) or (3, 14) <= sys.version_info < (3, 14, 4)
)

_loading = threading.RLock()


@contextmanager
def quiet_gx() -> Iterator[None]:
    """GX logs hundreds of INFO lines on import and context creation: keep them out of task logs."""
    logger = logging.getLogger("great_expectations")
    before = logger.level
    logger.setLevel(max(before, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(before)


def import_gx(hide: Iterable[str] = ()) -> None:
    """Import GX, with the cyclic garbage collector paused while it does (once per process).

    The import allocates so many objects that the collections they trigger cost ~20% of its
    ~2.5 s of CPU (measured: 2.5 -> 2.1 s); an import leaves no garbage cycles worth collecting.
    Then gc.freeze() moves what exists to the permanent generation, so later full collections
    do not walk GX's modules again: one such collection cost 0.18 s of a fresh process's first
    Data Docs update (0.36 -> 0.18 s). The module's docstring gives the three tricks.

    `hide`: packages GX must import as if they were not installed, when not imported yet
    (`hidden`), for a process that will not use them with GX."""
    if "great_expectations" in sys.modules:
        return  # imported, or being imported by another thread: its import statement waits for it
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        # Used by none of the default suite's checks; a suite that uses them imports them then.
        defer(GX_DEFERRED_MODULES)  # finding scipy.stats imports scipy: with the collector paused too
        with quiet_gx(), hidden(hide):
            run = in_one_chunk if FRAME_STACK_CHURNS else _plain_call
            run(lambda: importlib.import_module("great_expectations"))
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


# Trick 1: deferred modules.


class DeferredModule(types.ModuleType):
    """Stands in for a module not imported yet; every attribute it lacks comes from the real one."""

    def __getattr__(self, attr: str) -> Any:  # called only for attributes the stand-in lacks
        return getattr(load(self), attr)


def load(stand_in: DeferredModule) -> types.ModuleType:
    """The real module of `stand_in`, imported now if it is not yet."""
    name = stand_in.__name__
    with _loading:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]  # else import_module would return the stand-in itself
            try:
                importlib.import_module(name)
            except BaseException:
                sys.modules.setdefault(name, stand_in)  # the next use tries again
                raise
        return sys.modules[name]


def defer(names: Iterable[str]) -> list[str]:
    """Put a stand-in in sys.modules for each of `names` not imported yet that is installed (a
    missing one must still fail where it is imported); returns those deferred.

    The stand-in carries the real module's spec, found before it goes in: another library's
    importlib.util.find_spec(name) reads sys.modules[name].__spec__ and raises ValueError on None.
    Finding a submodule's spec imports its parent package (scipy, not scipy.stats: cheap)."""
    deferred = []
    with _loading:
        for name in names:
            if name in sys.modules or importlib.util.find_spec(name.partition(".")[0]) is None:
                continue
            spec = importlib.util.find_spec(name)
            if spec is None:
                continue
            stand_in = DeferredModule(name)
            stand_in.__spec__ = spec
            sys.modules[name] = stand_in
            deferred.append(name)
    return deferred


# Trick 2: hidden packages.


class _HiddenPackages(importlib.abc.MetaPathFinder):
    """Fails one thread's imports of some packages as if they were not installed."""

    def __init__(self, packages: frozenset[str], thread: int) -> None:
        self.packages, self.thread = packages, thread

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.partition(".")[0] in self.packages and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden while GX imports)", name=name)
        return None


@contextmanager
def hidden(packages: Iterable[str]) -> Iterator[frozenset[str]]:
    """While the block runs, the calling thread's imports of `packages` (those not imported yet)
    raise ModuleNotFoundError; other threads import them as usual. Yields the packages hidden."""
    finder = _HiddenPackages(frozenset(p for p in packages if p not in sys.modules), threading.get_ident())
    if not finder.packages:
        yield finder.packages
        return
    sys.meta_path.insert(0, finder)
    try:
        yield finder.packages
    finally:
        sys.meta_path.remove(finder)


# Trick 3: one frame-stack chunk. `in_one_chunk` calls the function from a frame that declares a
# 512 KiB value stack it never uses: that frame gets a 1 MiB chunk of its own, and every frame the
# call opens fits in the other half, so no chunk is mapped or unmapped until it returns. The unused
# value stack costs address space only (its pages are never touched).

# Value-stack slots (8 bytes each) of the calling frame: 512 KiB, so the chunk is 1 MiB and the
# call has ~512 KiB of frames (thousands of nested calls; an import nests a few hundred deep).
_SLOTS = 64 * 1024 + 8


def _plain_call(fn: Callable[[], Result]) -> Result:
    return fn()


def _call_with_a_large_frame(fn: Callable[[], Result]) -> Result:
    return fn()


# The same function, its frame declaring _SLOTS value-stack slots that it never uses.
_call_with_a_large_frame.__code__ = _call_with_a_large_frame.__code__.replace(co_stacksize=_SLOTS)


def in_one_chunk(fn: Callable[[], Result]) -> Result:
    """`fn()`, with its frames (and theirs) in one frame-stack chunk of their own."""
    return _call_with_a_large_frame(fn)
