"""Loading a pipeline file (``pipelines/<name>.yaml``) into its PipelineConfig.

``${VAR}`` and ``${VAR:-default}`` are expanded from the environment in every string value
(``:-`` also replaces an empty value, as in the shell); ``EOS_STATE_DIR`` always resolves, to
``paths.state_dir()`` when unset. Every problem of a file comes in one ``ConfigError``, a line each
naming the file, the dotted key, the value (secrets masked, see ``redact``) and the fix. The keys,
their defaults and rules are PipelineConfig's (config/model.py); pipelines/demo.yaml shows them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eos_ingest import paths
from eos_ingest.config.checks import SCHEDULE_PRESETS, replaced
from eos_ingest.config.kafka import DEFAULT_KAFKA, START_FROM
from eos_ingest.config.model import PipelineConfig
from eos_ingest.config.network_fs import state_places, warn_once
from eos_ingest.config.optional_dags import AlertsConfig, MaintenanceConfig
from eos_ingest.config.output import OutputConfig
from eos_ingest.config.pipeline_name import NAME
from eos_ingest.config.value import VALUE_FORMATS, MetadataConfig, ValueConfig
from eos_ingest.errors import ConfigError
from eos_ingest.redact import is_secret_key, redact_text, redact_value, secrets_of
from eos_ingest.schema.ddl import hint, parse_ddl

__all__ = [
    "SCHEDULE_PRESETS",
    "START_FROM",
    "VALUE_FORMATS",
    "AlertsConfig",
    "MaintenanceConfig",
    "MetadataConfig",
    "OutputConfig",
    "PipelineConfig",
    "ValueConfig",
    "default_pipelines_dir",
    "is_secret_key",
    "load_pipeline",
    "load_pipeline_by_name",
    "parse_ddl",
    "replaced",
]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# (dotted key, value, fix): one problem of a file
Problem = tuple[str, Any, str]


def default_pipelines_dir(dags_folder: Path | None = None) -> Path:
    """The pipelines folder: $EOS_PIPELINES_DIR; else ``pipelines/`` beside the DAGs folder, when
    the caller knows it (the DAG files, the UI plugin); else ``pipelines/`` at the checkout, when
    running from one; else ``pipelines/`` in the working directory."""
    if os.environ.get("EOS_PIPELINES_DIR"):
        return Path(os.environ["EOS_PIPELINES_DIR"])
    if dags_folder is not None:
        return dags_folder.parent / "pipelines"
    return (paths.CHECKOUT or Path.cwd()) / "pipelines"


def load_pipeline(path: str | Path) -> PipelineConfig:
    """Read and validate one pipeline file; raise ConfigError naming the key, the value and the fix.

    A state folder, table or SQLite control DB on a network file system is logged as a warning
    (once per process; the CLI's stderr shows it): their commits need local semantics."""
    config = _Loader(Path(path)).load()
    # s3a: no mount; an Iceberg pipeline has no quarantine path (its quarantine is a table of the warehouse)
    local = [p for p in (config.output.path, config.output.quarantine_path) if isinstance(p, Path)]
    places = state_places(local, config.control_db_url)
    warn_once(places)
    return config


def load_pipeline_by_name(name: str, pipelines_dir: Path | None = None) -> PipelineConfig:
    """Load ``<pipelines_dir>/<name>.yaml``; an unknown name lists the pipelines that exist."""
    folder = pipelines_dir or default_pipelines_dir()
    file = folder / f"{name}.yaml"
    if not NAME.fullmatch(name) or not file.is_file():  # the name check also stops "../x"
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(
            f"no pipeline {name!r} in {folder}{hint(name, known)}; known: {', '.join(known) or 'none'}"
        )
    return load_pipeline(file)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice: PyYAML would silently keep the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key_node.value!r} is given twice", key_node.start_mark
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


class _Loader:
    """Reads one file, expands ${VAR}, validates it with PipelineConfig and gathers every problem."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.shown = str(path.resolve().relative_to(paths.CHECKOUT or Path.cwd()))
        except ValueError:
            self.shown = str(path)
        self.problems: list[Problem] = []
        # Values that must not appear in a message: the file's secrets, before and after ${VAR}.
        self.secrets: list[str] = []

    def error(self, problems: list[Problem]) -> ConfigError:
        # A value is shown after ${VAR} expansion: a secret key's value is masked, a URL loses its
        # password, and any secret of the file that still made it into the text is masked too.
        lines = [
            f"{self.shown}: {key} = {redact_value(key, value)!r} is not valid; {fix}"
            for key, value, fix in problems
        ]
        if len(lines) == 1:
            return ConfigError(redact_text(lines[0], self.secrets))
        text = f"{self.shown}: {len(lines)} problems, fix each:\n- " + "\n- ".join(lines)
        return ConfigError(redact_text(text, self.secrets))

    def expand(self, value: Any, key: str) -> Any:
        """Expand ${VAR} and ${VAR:-default} in every string, depth first."""
        if isinstance(value, dict):
            return {k: self.expand(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v, f"{key}[{i}]") for i, v in enumerate(value)]

        def one(m: re.Match[str]) -> str:
            var, default = m.group(1), m.group(2)
            env = os.environ.get(var)
            if var == "EOS_STATE_DIR" and not env:
                env = str(paths.state_dir())
            if env is None and default is None:
                fix = f"environment variable {var} is not set; set it or write ${{{var}:-default}}"
                self.problems.append((key, value, fix))
                return m.group(0)
            if env or (env is not None and default is None):
                return env
            return default or ""  # `:-` also replaces an empty value, as in the shell

        return _VAR.sub(one, value) if isinstance(value, str) else value

    def read(self) -> Any:
        try:
            with self.path.open(encoding="utf-8") as f:  # a stream, so YAML errors name the file
                return yaml.load(f, Loader=_StrictLoader)
        except OSError as e:
            raise ConfigError(f"{self.shown}: cannot read the file ({e.strerror})") from e
        except yaml.YAMLError as e:
            fix = "fix the syntax (quote values that start with @ or *)"
            # PyYAML quotes the offending line, which may hold a secret written in the file.
            raise ConfigError(f"{self.shown}: not valid YAML; {fix}:\n{redact_text(str(e))}") from e

    def load(self) -> PipelineConfig:
        raw = self.read()
        if not isinstance(raw, dict):
            raise self.error([("<file>", raw, "it must be a mapping of keys to values")])
        kafka_is_default = "kafka" not in raw
        doc = self.expand(raw if not kafka_is_default else {**raw, "kafka": DEFAULT_KAFKA}, "")
        self.secrets = secrets_of(raw) + secrets_of(doc)
        source = self.path.resolve()
        try:
            config = PipelineConfig.model_validate(
                doc, context={"stem": self.path.stem, "folder": source.parent}
            )
        except ValidationError as e:
            # A key whose ${VAR} is unset is reported once, for the variable.
            unset = [key for key, _, _ in self.problems]
            for p in map(_problem, e.errors(include_url=False)):
                if not any(u == p[0] or u.startswith((f"{p[0]}.", f"{p[0]}[")) for u in unset):
                    self.problems.append(p)
        if self.problems:
            raise self.error(self.problems)
        return config.model_copy(update={"source": source, "kafka_is_default": kafka_is_default})


def _problem(error: Any) -> Problem:
    """(dotted key, value, fix) of one pydantic error, in the words of the file's keys."""
    loc: tuple[str | int, ...] = error["loc"]
    ctx = error.get("ctx") or {}
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    key += ctx.get("at", "")
    key = ctx.get("key") or key  # a check across sections names the key it is about
    value = ctx.get("value", error.get("input"))
    if error["type"] == "eos_config":
        return key, value, ctx["fix"]
    if error["type"] == "extra_forbidden":
        known = PipelineConfig.known_keys(loc[:-1])
        return key, value, f"unknown key{hint(str(loc[-1]), known)}; known: {', '.join(known)}"
    if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return key, value, "it must be a mapping of keys to values"
    return key, value, str(error["msg"])
