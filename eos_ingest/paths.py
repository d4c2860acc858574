"""Where generated state lives: one git-ignored folder, so `rm -rf` of it is a full reset."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    """The state folder: $EOS_STATE_DIR, else `.state` at the repository root."""
    return Path(os.environ.get("EOS_STATE_DIR") or REPO_ROOT / ".state").resolve()


def spark_jars_dir() -> Path:
    """Local Kafka-source and Delta jars fetched by `make setup` (scripts/fetch-jars.sh)."""
    return state_dir() / "jars" / "spark"
