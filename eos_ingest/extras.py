"""The optional parts of eos-ingest, each behind an extra of pyproject.toml and imported only where
used: without the extra, the import fails with the extra's name and the pip command, not with a bare
`No module named ...` (tests/unit/test_declared_dependencies.py checks that what the package imports
at module level is in `[project] dependencies`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from eos_ingest.errors import MissingExtraError

# Each extra, with the top-level modules whose absence means that extra is not installed.
EXTRAS = {
    "iceberg": ("pyiceberg",),
    "postgres": ("psycopg",),
    "airflow": ("airflow",),
}


@contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Raise a MissingExtraError naming `extra` when the block fails to import one of its modules.

    `what` says what needs it ("an Iceberg table's reads without Spark"). An import error of any other
    module is not this extra's and propagates unchanged.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in EXTRAS[extra]:
            raise
        raise MissingExtraError(
            f"{what} needs the module {exc.name!r}, which eos-ingest's `{extra}` extra installs: "
            f"pip install 'eos-ingest[{extra}]'"
        ) from exc
