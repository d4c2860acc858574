"""Where things are: the package's own files, the checkout (when running from one), the state folder.

The files the code reads that are not modules: the UI templates (``PACKAGE_DIR/templates``), and two
of the repository's top-level folders, ``spark/`` (the spark-submit entry points) and
``expectations/`` (the GX config template and the default suite). The wheel ships those two inside
the package, as ``eos_ingest/spark_job/`` and ``eos_ingest/expectations/`` (pyproject.toml's
package-dir); from a checkout, or docker-compose's mounts of them beside ``eos_ingest/``, they are
read where they are.
Generated state lives in one folder, so `rm -rf` of it is a full reset:

1. ``$EOS_STATE_DIR`` when set;
2. else ``.state`` at the checkout, when the package runs from a checkout (``make setup``'s venv);
3. else a per-user folder: ``$XDG_STATE_HOME/eos-ingest``, default ``~/.local/state/eos-ingest``.
"""

from __future__ import annotations

import os
from importlib.resources import files
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

# A top-level folder of the repository -> its name inside an installed package (pyproject.toml's
# [tool.setuptools.package-dir] maps eos_ingest.<name> to the folder: one copy, in the repository).
SHIPPED_FOLDERS = {"spark": "spark_job", "expectations": "expectations"}


def _shipped(folder: str, marker: str) -> Path:
    """Where this installation has a shipped top-level folder: beside the package when it is there
    (a checkout; docker-compose mounts ./spark and ./expectations beside ./eos_ingest), else inside
    it (a wheel). `marker` is a file the folder holds, so that an unrelated folder of that name
    beside an installed package (site-packages/spark, say) is not taken for it."""
    beside = PACKAGE_DIR.parent / folder
    return beside if (beside / marker).is_file() else PACKAGE_DIR / SHIPPED_FOLDERS[folder]


SPARK_DIR = _shipped("spark", "ingest_batch.py")  # alone in its folder: see spark/ingest_batch.py
EXPECTATIONS_DIR = _shipped("expectations", "great_expectations.yml")
JOB_SCRIPT = SPARK_DIR / "ingest_batch.py"
TRAINING_SCRIPT = SPARK_DIR / "train_class_archive.py"
GX_TEMPLATE = EXPECTATIONS_DIR / "great_expectations.yml"
DEFAULT_SUITE = EXPECTATIONS_DIR / "suites" / "eos_default.json"


def shipped_text(file: Path) -> str:
    """The text of one of the files above. A driver given the package with --py-files imports it
    from a zip (spark/submit.py's package_zip, laid out as the wheel): then the file is read through
    the import system."""
    if file.is_file():
        return file.read_text(encoding="utf-8")
    return files("eos_ingest").joinpath(file.relative_to(PACKAGE_DIR).as_posix()).read_text(encoding="utf-8")


def user_state_dir() -> Path:
    """The state folder of an installed package without EOS_STATE_DIR (XDG base directories)."""
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "eos-ingest"


def state_dir() -> Path:
    """The state folder: $EOS_STATE_DIR, else `.state` at the checkout, else user_state_dir()."""
    chosen = os.environ.get("EOS_STATE_DIR") or (CHECKOUT / ".state" if CHECKOUT else user_state_dir())
    return Path(chosen).resolve()


def share_setup_state(folder: Path) -> None:
    """Link into `folder`, a state folder of its own (a benchmark's Airflow, a chaos run, the e2e
    tests' stack), what `make setup` wrote into this state folder once: the jars and the job's
    class-data archive (spark/class_archive.py; without it every local job loads and verifies its
    ~23,000 classes anew). A part setup has not written is left out."""
    for part in ("jars", "jvm"):
        if (state_dir() / part).is_dir():
            (folder / part).symlink_to(state_dir() / part, target_is_directory=True)


def spark_jars_dir() -> Path:
    """Local Kafka-source and Delta jars fetched by `make setup` (scripts/fetch-jars.sh)."""
    return state_dir() / "jars" / "spark"


def iceberg_jars_dir() -> Path:
    """Iceberg's Spark runtime and the JDBC catalog's drivers, for Iceberg tables (fetch-jars.sh)."""
    return state_dir() / "jars" / "iceberg"


def s3a_jars_dir() -> Path:
    """hadoop-aws, the AWS SDK and the Delta commit coordinator, for s3a:// tables (fetch-jars.sh)."""
    return state_dir() / "jars" / "s3a"
