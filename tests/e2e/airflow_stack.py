"""`airflow standalone` through scripts/airflow.sh for a test module: started in a folder of its
own, with the pipelines and connections given, and stopped with nothing left behind."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eos_ingest import paths
from tests.e2e.airflow_api import AirflowApi
from tests.helpers.ports import free_port

AIRFLOW_SH = paths.REPO_ROOT / "scripts" / "airflow.sh"


def our_processes(airflow_home: Path) -> list[int]:
    """Pids whose environment holds this AIRFLOW_HOME: only processes this module started."""
    marker = f"AIRFLOW_HOME={airflow_home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@contextmanager
def running_airflow(
    root: Path, pipelines: Path, env_extra: dict[str, str], meanwhile: Callable[[], object] = lambda: None
) -> Iterator[tuple[AirflowApi, Path]]:
    """Airflow with its state under `root`, its DAGs from `pipelines`; yields (api, AIRFLOW_HOME).

    `env_extra` carries the connections (AIRFLOW_CONN_*) and anything else the DAGs should see;
    no AIRFLOW_* of the calling environment leaks in. `meanwhile` runs while Airflow starts (its
    start waits mostly on its components' imports and the health check's polls).
    """
    state = root / "state"
    state.mkdir()
    paths.share_setup_state(state)  # the jars and the jobs' class-data archive
    password = secrets.token_urlsafe(12)
    port = free_port()
    airflow_home = state / "airflow"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    env.update(
        EOS_STATE_DIR=str(state),
        EOS_AIRFLOW_HOME=str(airflow_home),
        EOS_AIRFLOW_PORT=str(port),
        EOS_AIRFLOW_ADMIN_PASSWORD=password,
        EOS_PIPELINES_DIR=str(pipelines),
        **env_extra,
    )
    try:
        up = subprocess.Popen(
            [str(AIRFLOW_SH), "up"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            meanwhile()
        finally:
            out, err = up.communicate(timeout=420)
        assert up.returncode == 0, f"airflow.sh up failed:\n{out}\n{err}"
        yield AirflowApi(f"http://127.0.0.1:{port}", "admin", password), airflow_home
    finally:
        down = subprocess.run([str(AIRFLOW_SH), "down"], env=env, text=True, capture_output=True, timeout=180)
        assert down.returncode == 0, down.stderr
        assert our_processes(airflow_home) == [], "airflow.sh down left processes behind"
        assert subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"]).returncode != 0
