"""The repository's DAG folder as Airflow's own DagBag parses it, for the unit tests of the DAGs.

Importing this module points Airflow at a throw-away AIRFLOW_HOME first (never ~/airflow): Airflow
reads its config when first imported.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from eos_ingest import paths

# Airflow reads its config when first imported: a throw-away AIRFLOW_HOME, never ~/airflow; one
# per pytest-xdist worker, as each writes its airflow.cfg there.
os.environ.setdefault(
    "AIRFLOW_HOME",
    str(paths.state_dir() / f"airflow-unit-tests-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"),
)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# Airflow's logging setup lowers the root level to INFO; py4j would then log "Closing down
# clientserver connection" from a destructor at exit, after pytest has closed the streams.
logging.getLogger("py4j").setLevel(logging.WARNING)

DAGS = paths.REPO_ROOT / "dags"
PIPELINES = paths.REPO_ROOT / "pipelines"


def dag_bag(pipelines_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The repository's dags/ as Airflow's DagBag, its pipelines read from `pipelines_dir`."""
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("EOS_PIPELINES_DIR", str(pipelines_dir))
    return DagBag(dag_folder=str(DAGS))
