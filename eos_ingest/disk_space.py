"""Where a full disk is, for the one line an operator acts on: a folder's file system, its free
bytes and its mount point. Used by the table's writes (storage/full_disks.py) and the control DB's
SQLite file (control/engine.py), so it sits below both. Standard library only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def free_bytes(folder: Path) -> int | None:
    """Free bytes on the file system of `folder`, None when no part of its path exists."""
    # The folder may not exist yet (a first write): its nearest existing parent is on the same disk.
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return None


def mount_of(folder: Path) -> str:
    """The mount point the folder lives on."""
    path = folder
    while not path.exists():
        path = path.parent
    path = path.resolve()
    while not os.path.ismount(path):
        path = path.parent
    return str(path)


def describe(folder: Path) -> str:
    """'the file system of <folder> (<n> bytes free now, on <mount>)', the disk an error names."""
    free = free_bytes(folder)
    if free is None:
        return f"the file system of {folder}"
    return f"the file system of {folder} ({free:,} bytes free now, on {mount_of(folder)})"
