"""How a batch reaches Spark: the spark-submit command line, shared by the CLI and the DAGs."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from eos_ingest import paths
from eos_ingest.spark_session import DELTA_CONF, LOCAL_CONF, local_jars

JOB_SCRIPT = paths.JOB_SCRIPT  # package data: an installed wheel carries it


def spark_submit_binary() -> str:
    """spark-submit of the running interpreter's pyspark (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if not found:
        raise FileNotFoundError("spark-submit not found: run 'make setup' or install pyspark")
    return found


def spark_submit_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for spark-submit: pip's pyspark as SPARK_HOME and this interpreter for Python.

    Without them the launcher script looks for pyspark with whatever python3 is on PATH.
    """
    import pyspark

    env = dict(os.environ if base is None else base)
    env.setdefault("SPARK_HOME", str(Path(pyspark.__file__).parent))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The folder holding the eos_ingest this process imported (a checkout's root, or site-packages):
    # the job imports the same library, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(paths.PACKAGE_DIR.parent), env.get("PYTHONPATH", "")) if p
    )
    return env


def job_conf(master: str) -> dict[str, str]:
    """--conf settings of the job; local masters get the local niceties too."""
    # WARN: Spark's INFO lines (over 1,000 per batch) would bury the job's own phase lines.
    conf = {**DELTA_CONF, "spark.log.level": "WARN"}
    if master.startswith("local"):
        conf.update(LOCAL_CONF)
    return conf


def job_args(config_path: Path, batch_id: int, until_caught_up: bool = False) -> list[str]:
    return ["--config", str(config_path), "--batch-id", str(batch_id)] + (
        ["--until-caught-up"] if until_caught_up else []
    )


def spark_submit_argv(
    config_path: Path,
    batch_id: int,
    master: str = "local[*]",
    driver_memory: str = "2g",
    *,
    until_caught_up: bool = False,
) -> list[str]:
    """The full spark-submit command that runs one batch (and, with until_caught_up, the next ones)."""
    argv = [
        spark_submit_binary(),
        "--master",
        master,
        "--driver-memory",
        driver_memory,
        "--jars",
        ",".join(local_jars()),
    ]
    for key, value in job_conf(master).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(JOB_SCRIPT), *job_args(config_path, batch_id, until_caught_up)]
