"""Where the Data Docs site is, and which of its files may be served: paths only, GX is not imported."""

from __future__ import annotations

from pathlib import Path

from eos_ingest.quality.context import data_docs_index


def data_docs_root() -> Path:
    """The Data Docs site folder, resolved: <GX context root>/data_docs (quality/context.py).

    The GX context lives in <state folder>/gx and its site (expectations/great_expectations.yml,
    ``base_directory: data_docs/``) in its data_docs/ folder. Only the site is served, not the
    suites and raw validation results beside it."""
    return data_docs_index().resolve().parent


def data_docs_relpath(report_path: str | None) -> str | None:
    """`report_path` relative to the Data Docs root (POSIX), or None when it lies elsewhere."""
    if not report_path:
        return None
    try:
        return Path(report_path).resolve().relative_to(data_docs_root()).as_posix()
    except ValueError:
        return None


def resolve_data_docs_file(relpath: str) -> Path | None:
    """The file at `relpath` under the Data Docs root, or None: a `..` part, an absolute path, a
    symlink leading out of the root, a folder or a missing file are all None (a 404 for a server)."""
    root = data_docs_root()
    parts = Path(relpath).parts
    if not relpath or Path(relpath).is_absolute() or ".." in parts or "\x00" in relpath:
        return None
    file = (root / relpath).resolve()
    if not file.is_relative_to(root) or not file.is_file():
        return None
    return file
