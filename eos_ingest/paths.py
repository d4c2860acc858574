"""Where things are: the package's own files, the checkout (when running from one), the state folder.

Installed from a wheel, everything the code reads ships inside the package (``PACKAGE_DIR``):
the Spark job's entry point, the GX config template and the default suite, the UI templates.
Generated state lives in one folder, so `rm -rf` of it is a full reset:

1. ``$EOS_STATE_DIR`` when set;
2. else ``.state`` at the checkout, when the package runs from a checkout (``make setup``'s venv);
3. else a per-user folder: ``$XDG_STATE_HOME/eos-ingest``, default ``~/.local/state/eos-ingest``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _checkout() -> Path | None:
    """The repository root when this package is its eos_ingest/ folder, else None (installed)."""
    root = PACKAGE_DIR.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "eos-ingest"' in pyproject.read_text(errors="replace"):
        return root
    return None


CHECKOUT: Path | None = _checkout()
# The repository root. Only tests, benches and scripts use it; the library itself reads its files
# from PACKAGE_DIR and its state from state_dir(), so it also works installed from a wheel.
REPO_ROOT = CHECKOUT or PACKAGE_DIR.parent

JOB_SCRIPT = PACKAGE_DIR / "spark_job" / "ingest_batch.py"  # alone in its folder: see that file
GX_TEMPLATE = PACKAGE_DIR / "expectations" / "great_expectations.yml"
DEFAULT_SUITE = PACKAGE_DIR / "expectations" / "suites" / "eos_default.json"


def package_text(relative: str) -> str:
    """A package data file's text, read through the import system: it works when the package was
    imported from a zip too (a driver given the package with --py-files imports it from there)."""
    from importlib.resources import files

    return files("eos_ingest").joinpath(relative).read_text(encoding="utf-8")


def user_state_dir() -> Path:
    """The state folder of an installed package without EOS_STATE_DIR (XDG base directories)."""
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "eos-ingest"


def state_dir() -> Path:
    """The state folder: $EOS_STATE_DIR, else `.state` at the checkout, else user_state_dir()."""
    chosen = os.environ.get("EOS_STATE_DIR") or (CHECKOUT / ".state" if CHECKOUT else user_state_dir())
    return Path(chosen).resolve()


def spark_jars_dir() -> Path:
    """Local Kafka-source and Delta jars fetched by `make setup` (scripts/fetch-jars.sh)."""
    return state_dir() / "jars" / "spark"


def iceberg_jars_dir() -> Path:
    """Iceberg's Spark runtime and the JDBC catalog's drivers, for Iceberg tables (fetch-jars.sh)."""
    return state_dir() / "jars" / "iceberg"


def s3a_jars_dir() -> Path:
    """hadoop-aws, the AWS SDK and the Delta commit coordinator, for s3a:// tables (fetch-jars.sh)."""
    return state_dir() / "jars" / "s3a"
