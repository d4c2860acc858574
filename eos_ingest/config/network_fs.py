"""A warning for state on a network file system: Delta's and SQLite's commits need local semantics.

Delta commits a table version by creating its log file only if it does not exist (put-if-absent),
and SQLite locks its file with POSIX locks; NFS, SMB/CIFS and FUSE file systems such as sshfs do
not give either reliably, so two writers may both "win" and exactly-once is gone. Local disks and
object stores (with Delta's log store for them) do. The file system of a path is the longest mount
point of /proc/mounts that holds it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path

from eos_ingest import paths

__all__ = ["NETWORK_FS_TYPES", "mount_of", "network_fs_warnings", "warn_once"]

log = logging.getLogger(__name__)

PROC_MOUNTS = Path("/proc/mounts")
NETWORK_FS_TYPES = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs", "davfs",
     "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone",
     "fuse.davfs2", "fuse.juicefs", "fuse.goofys"}
)  # fmt: skip
_warned: set[str] = set()


def _unescape(field: str) -> str:
    """/proc/mounts writes a space in a path as \\040 (and tab, newline, backslash alike)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: Path, mounts_text: str) -> tuple[str, str] | None:
    """(mount point, file system type) of the longest mount point that holds `path`."""
    target = os.path.abspath(path)
    best: tuple[str, str] | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point, fstype = _unescape(fields[1]), fields[2]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):  # a later mount over it wins
            best = (point, fstype)
    return best


def network_fs_warnings(places: Iterable[tuple[str, Path]], mounts_text: str | None = None) -> list[str]:
    """One warning per (what, path) on a network file system, saying why it matters."""
    if mounts_text is None:
        try:
            mounts_text = PROC_MOUNTS.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []  # not Linux: nothing to tell
    warnings = []
    for what, path in places:
        found = mount_of(path, mounts_text)
        if found and (found[1] in NETWORK_FS_TYPES or found[1].startswith(("nfs", "fuse.sshfs"))):
            point, fstype = found
            warnings.append(
                f"{what} {path} is on a network file system ({fstype} mounted at {point}): Delta's "
                "and SQLite's atomic commits need a local disk or an object store, so two writers "
                "there may both commit and lose exactly-once; move it to a local disk (EOS_STATE_DIR, "
                "output.path) or use a PostgreSQL control_db_url"
            )
    return warnings


def state_places(
    output_paths: Iterable[Path] = (), control_db_url: str | None = None
) -> list[tuple[str, Path]]:
    """The places a pipeline writes with atomic commits: the state folder, its tables, a SQLite DB."""
    places = [("the state folder (EOS_STATE_DIR)", paths.state_dir())]
    places += [("the Delta table", p) for p in output_paths]
    if control_db_url and control_db_url.startswith("sqlite:///"):
        places.append(("the SQLite control DB", Path(control_db_url.removeprefix("sqlite:///"))))
    return places


def warn_once(places: Iterable[tuple[str, Path]], mounts_text: str | None = None) -> list[str]:
    """Log each warning once per process; return the ones not logged before (the CLI prints them)."""
    fresh = [w for w in network_fs_warnings(places, mounts_text) if w not in _warned]
    for warning in fresh:
        _warned.add(warning)
        log.warning("%s", warning)
    return fresh
