"""The pipelines folder's files, each loaded on its own: a broken file is an entry with its error,
never a reason to hide the others (the Ingestion page, the DAG factory's report)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eos_ingest.config.pipeline import PipelineConfig, default_pipelines_dir, load_pipeline
from eos_ingest.config.pipeline_name import NAME
from eos_ingest.errors import ConfigError


@dataclass(frozen=True)
class PipelineFile:
    """One ``pipelines/<name>.yaml``: its validated config, or the error that stops it loading."""

    name: str
    path: Path
    config: PipelineConfig | None
    error: str | None


def _load(path: Path) -> PipelineFile:
    try:
        return PipelineFile(path.stem, path, load_pipeline(path), None)
    except ConfigError as exc:
        return PipelineFile(path.stem, path, None, str(exc))


def list_pipeline_files(pipelines_dir: Path | None = None) -> list[PipelineFile]:
    """Every ``*.yaml`` of the pipelines folder, sorted, each loaded on its own: a broken file
    becomes an entry with its error instead of hiding the others. ConfigError if there is no folder."""
    folder = pipelines_dir or default_pipelines_dir()
    if not folder.is_dir():
        raise ConfigError(f"pipelines folder {folder} does not exist; create it or set EOS_PIPELINES_DIR")
    return [_load(p) for p in sorted(folder.glob("*.yaml"))]


def find_pipeline_file(name: str, pipelines_dir: Path | None = None) -> PipelineFile | None:
    """The pipeline file called ``name``, loaded; None when there is none (or the name is not one)."""
    file = (pipelines_dir or default_pipelines_dir()) / f"{name}.yaml"
    # The name rule (config/pipeline_name.py) also stops "../x".
    if not NAME.fullmatch(name) or not file.is_file():
        return None
    return _load(file)
