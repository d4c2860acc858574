"""Installed versions of other projects, for the gates of the doors into their internals
(jvm, quality/site, kafka/header_counts, storage/delta/staged_write): each door is on for the minor
series pyproject pins, where it was written and tested (tests/unit/test_versions.py)."""

from __future__ import annotations

import importlib.metadata
import re


def release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version string: "4.1.3" -> (4, 1, 3), "4.2.0rc1+local" -> (4, 2, 0)."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


def installed(*distributions: str) -> tuple[int, ...]:
    """The release of the first of `distributions` installed; () when none is."""
    for name in distributions:
        try:
            return release(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue
    return ()
