"""Modules imported on their first use rather than when the module naming them is imported.

GX imports scipy.stats and altair at import time for two expectations (KL divergence, a KS test)
and their charts: ~0.7 s of CPU (GX's import 1.6 -> 0.9 s) that the default suite never uses, paid
by every job, gate, audit and validate task. `defer` puts a stand-in in sys.modules; the first
attribute looked up on it imports the real module, which then replaces it there.

Not importlib.util.LazyLoader: on Python 3.11 `import name` reads the module's __spec__, which
makes a LazyLoader module load at once.

`hidden` goes further for a package a process does not use at all: while GX imports in a process
without pyspark (the audit, the validate task), GX's pyspark bindings would import pyspark, its ML
and Connect modules, scipy.sparse and grpc (~0.12 s of CPU); hidden, GX falls back as it does where
pyspark is not installed.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

_loading = threading.RLock()


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
    """Put a stand-in in sys.modules for each of `names` not imported yet whose top-level package
    is installed (a missing one must still fail where it is imported); returns those deferred."""
    deferred = []
    with _loading:
        for name in names:
            if name in sys.modules or importlib.util.find_spec(name.partition(".")[0]) is None:
                continue
            sys.modules[name] = DeferredModule(name)
            deferred.append(name)
    return deferred


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
