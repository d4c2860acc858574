"""Reports pipeline files that do not load as this file's Airflow import error (it has no DAG).

dags/eos_pipelines.py makes the DAGs of every pipeline file that loads and skips the others, so one
broken file never hides the other pipelines. The broken ones are listed here, each with its file
name and the loader's message (key, value, fix), and the UI shows them under "DAG Import Errors".
"""

from __future__ import annotations

from eos_ingest.config import default_pipelines_dir, load_pipeline
from eos_ingest.errors import ConfigError


def broken_pipeline_files() -> list[str]:
    """One line per pipeline file that does not load: the file and why."""
    folder = default_pipelines_dir()
    if not folder.is_dir():
        return [f"{folder}: the pipelines folder does not exist; create it or set EOS_PIPELINES_DIR"]
    broken = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            load_pipeline(path)
        except Exception as exc:  # an unexpected error must name its file too
            broken.append(
                str(exc) if isinstance(exc, ConfigError) else f"{path}: {type(exc).__name__}: {exc}"
            )
    return broken


_broken = broken_pipeline_files()
if _broken:
    raise ConfigError(
        f"{len(_broken)} pipeline file(s) have no DAG until fixed (the other pipelines are fine):\n"
        + "\n".join(f"- {line}" for line in _broken)
    )
