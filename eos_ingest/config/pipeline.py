"""Typed, validated pipeline config, read from ``pipelines/<name>.yaml``.

Shape (only ``name``, ``topics`` and, for json, ``value.schema`` are required)::

    name: demo                     # [a-z0-9_]+, equal to the file stem
    topics: [demo_events]          # 1+ Kafka topic names
    kafka:                         # librdkafka settings, passed through as strings; default:
      bootstrap.servers: ${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}
    kafka_conn_id: kafka_default   # Airflow connection whose settings join `kafka:`; null = none
    aws_conn_id: null              # Airflow `aws` connection for s3a tables; default: the AWS_* variables
    start_from: earliest           # earliest | latest: where a partition never seen before starts
    max_records_per_partition: 100000   # offsets per partition per batch, >= 1
    value:
      format: json                 # json (default) | raw | avro (docs/formats.md)
      schema: "id BIGINT, ts TIMESTAMP"   # Spark DDL: required for json, forbidden for raw and avro
      # avro: schema_file (reader .avsc, required), schema_registry {url, username, password,
      # timeout_seconds} and/or writer_schemas {id: .avsc}; paths relative to this file
      schema_evolution: ignore     # ignore | add_columns | fail: a field the schema lacks (docs/formats.md)
    key: {format: raw}             # raw (kafka_key BINARY) | string (UTF-8 text) | avro (a struct:
                                   # schema_file, writer_schemas as for the value; its registry)
    metadata: {headers: none, timestamp_type: false}   # headers: none | map | array (docs/formats.md)
    output:
      path: tables/demo            # default tables/<name>; relative paths are under the state folder;
                                   # or s3a://bucket/prefix (docs/object-storage.md; PostgreSQL control DB)
      quarantine_path: tables/demo_quarantine   # default <path>_quarantine
      partition_by: [event_date]   # default; or kafka_topic, kafka_partition, schema columns; [] = none
    control_db_url: sqlite:///${EOS_STATE_DIR}/control.db   # postgresql+psycopg://... too; see below
    schedule: "@hourly"            # 5-field cron (UTC, checked with croniter) or preset; null = manual
    expectations: []               # extra GX expectations: mappings with a "type" and its fields
    maintenance: {schedule: "@daily", retention_hours: 168}   # optional: the eos_maintain__<name>
                                   # DAG (OPTIMIZE + VACUUM, docs/maintenance.md); none without it
    alerts: {max_lag_records: 100000, max_lag_seconds: 3600, schedule: "*/15 * * * *",
             on_failure_callback: my_alerts.notify}   # optional: the eos_alerts__<name> DAG fails
                                   # (and notifies) when the lag passes a limit (docs/alerts.md)

``${VAR}`` and ``${VAR:-default}`` are expanded from the environment in every string value
(``:-`` also replaces an empty value, as in the shell); ``EOS_STATE_DIR`` always resolves, to
``paths.state_dir()`` when unset. Without ``control_db_url`` in the file, the control DB is
``$EOS_CONTROL_DB_URL`` when set (a deployment's one DB for every pipeline), else the SQLite file
``<state folder>/control.db``; a ``control_db_url`` in the file always wins. The rules are the
pydantic model in ``config_model``; every problem of a file comes in one ``ConfigError``, a line
each naming the file, the dotted key, the value (secrets masked, see ``redact``) and the fix. Output
tables are local (or mounted) folders or s3a:// URIs (table_location.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eos_ingest import paths
from eos_ingest.config.model import (
    SCHEDULE_PRESETS,
    START_FROM,
    VALUE_FORMATS,
    PipelineFile,
    ValueSection,
)
from eos_ingest.config.network_fs import state_places, warn_once
from eos_ingest.config.pipeline_name import NAME
from eos_ingest.config.table_location import TableLocation
from eos_ingest.errors import ConfigError
from eos_ingest.redact import is_secret_key, redact_text, redact_url, redact_value, secrets_of
from eos_ingest.schema.avro import load_schema_file, spark_ddl
from eos_ingest.schema.ddl import hint, parse_ddl
from eos_ingest.schema.registry import RegistrySettings

__all__ = [
    "SCHEDULE_PRESETS",
    "START_FROM",
    "VALUE_FORMATS",
    "AlertsConfig",
    "MaintenanceConfig",
    "OutputConfig",
    "PipelineConfig",
    "ValueConfig",
    "default_pipelines_dir",
    "is_secret_key",
    "load_pipeline",
    "load_pipeline_by_name",
    "parse_ddl",
]

_DEFAULT_KAFKA = {"bootstrap.servers": "${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# (dotted key, value, fix): one problem of a file
Problem = tuple[str, Any, str]


@dataclass(frozen=True)
class ValueConfig:
    """How record values decode: ``json`` with the Spark DDL ``schema``, ``raw`` bytes, or ``avro``
    in the Schema Registry wire format into the reader schema ``avro_schema`` (JSON text; ``schema``
    is then its Spark DDL), the writer schemas coming from ``registry``."""

    format: str
    schema: str | None
    columns: tuple[tuple[str, str], ...]
    avro_schema: str | None = None
    registry: RegistrySettings | None = None
    # The .avsc files read (reader, then writers): a spark-submit ships them beside the pipeline file.
    schema_files: tuple[Path, ...] = ()
    # What a field the schema lacks does: ignore | add_columns | fail (formats/schema_evolution.py).
    schema_evolution: str = "ignore"


@dataclass(frozen=True)
class MaintenanceConfig:
    """OPTIMIZE + VACUUM of the tables (storage/maintenance.py): the DAG's schedule (None: manual runs
    only) and the VACUUM retention in hours (None: Delta's 7 days, or more while a batch is planned)."""

    schedule: str | None = "@daily"
    retention_hours: float | None = None


@dataclass(frozen=True)
class AlertsConfig:
    """Lag limits (service/lag_alerts.py): a limit is passed when the lag in offsets, or the age in
    seconds of the oldest unread record, is above it (None: not checked). The eos_alerts__<name>
    DAG checks them on `schedule` and calls `on_failure_callback` (a dotted path) when it fails."""

    max_lag_records: int | None = None
    max_lag_seconds: int | None = None
    schedule: str | None = "*/15 * * * *"
    on_failure_callback: str | None = None


@dataclass(frozen=True)
class MetadataConfig:
    """Kafka metadata as columns: the key's format (raw bytes or text), the headers (none, a map
    of key to value bytes, the last value of a repeated key winning, or Spark's array of
    key/value structs) and the timestamp type (0 CreateTime, 1 LogAppendTime). The defaults
    add nothing and keep kafka_key as bytes: the columns of a table made before them."""

    key_format: str = "raw"
    headers: str = "none"
    timestamp_type: bool = False
    # key_format avro: the key's reader schema (JSON text; kafka_key is its struct), its writer
    # schemas given as files (JSON text by id; the rest from the value's registry) and those
    # .avsc files (a spark-submit ships them beside the pipeline file).
    key_schema: str | None = None
    key_writer_schemas: Mapping[int, str] = field(default_factory=dict, hash=False)
    key_schema_files: tuple[Path, ...] = ()


@dataclass(frozen=True)
class OutputConfig:
    """Where batches land: absolute Delta table paths (or s3a:// URIs) and the partition columns."""

    path: TableLocation
    quarantine_path: TableLocation
    partition_by: tuple[str, ...]


@dataclass(frozen=True)
class PipelineConfig:
    """One validated pipeline: topics in, one Delta table (plus its quarantine table) out."""

    name: str
    topics: tuple[str, ...]
    kafka: dict[str, str] = field(hash=False)
    kafka_conn_id: str | None
    start_from: str
    max_records_per_partition: int
    value: ValueConfig
    output: OutputConfig
    control_db_url: str
    schedule: str | None
    expectations: tuple[dict[str, Any], ...] = field(hash=False)
    source: Path = field(compare=False)
    # True when the file has no `kafka:` section: its settings are then only the built-in default,
    # which an Airflow connection replaces (see airflow_conn.resolve_kafka_settings).
    kafka_is_default: bool = field(default=False, compare=False)
    # Airflow connection of type aws whose access joins the AWS_* variables (connections/aws.py); None = none.
    aws_conn_id: str | None = field(default=None)
    metadata: MetadataConfig = field(default_factory=MetadataConfig)
    # The `maintenance:` block: the eos_maintain__<name> DAG's schedule and VACUUM retention;
    # None when the file has none (no maintenance DAG).
    maintenance: MaintenanceConfig | None = None
    # The `alerts:` block: lag limits and the eos_alerts__<name> DAG; None when the file has none.
    alerts: AlertsConfig | None = None

    @property
    def output_path(self) -> TableLocation:
        """Absolute path (or s3a:// URI) of the output Delta table."""
        return self.output.path

    @property
    def quarantine_path(self) -> TableLocation:
        """Absolute path (or s3a:// URI) of the quarantine Delta table."""
        return self.output.quarantine_path

    @property
    def kafka_settings(self) -> dict[str, str]:
        """A copy of the file's librdkafka settings (callers may add to it)."""
        return dict(self.kafka)

    @property
    def payload_columns(self) -> list[tuple[str, str]]:
        """``(name, type)`` of every column of the value schema; empty for raw values."""
        return list(self.value.columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view for logs and the UI, with secrets masked as ``***``."""
        shown: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str))
        shown["kafka"] = {k: "***" if is_secret_key(k) else v for k, v in self.kafka.items()}
        shown["control_db_url"] = redact_url(self.control_db_url)
        registry = shown["value"].get("registry")
        if registry:
            registry["password"] = "***" if registry.get("password") else None
            registry["files"] = sorted(registry.get("files") or {})  # the ids; the texts are long
        shown["metadata"]["key_writer_schemas"] = sorted(shown["metadata"].get("key_writer_schemas") or {})
        return shown


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
    local = [p for p in (config.output_path, config.quarantine_path) if isinstance(p, Path)]  # s3a: no mount
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
    """Reads one file, expands ${VAR}, validates it with PipelineFile and gathers every problem."""

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
        doc = self.expand(raw, "")
        self.secrets = secrets_of(raw) + secrets_of(doc)
        try:
            context = {"stem": self.path.stem, "folder": self.path.resolve().parent}
            model = PipelineFile.model_validate(doc, context=context)
        except ValidationError as e:
            # A key whose ${VAR} is unset is reported once, for the variable.
            unset = [key for key, _, _ in self.problems]
            for p in map(_problem, e.errors(include_url=False)):
                if not any(u == p[0] or u.startswith((f"{p[0]}.", f"{p[0]}[")) for u in unset):
                    self.problems.append(p)
        if self.problems:
            raise self.error(self.problems)
        return self.config(model, kafka_is_default="kafka" not in doc)

    def config(self, model: PipelineFile, kafka_is_default: bool) -> PipelineConfig:
        value, output = model.value, model.output
        assert output.path is not None and output.quarantine_path is not None  # filled by PipelineFile
        kafka = model.kafka if model.kafka is not None else self.expand(_DEFAULT_KAFKA, "kafka")
        return PipelineConfig(
            name=model.name,
            topics=tuple(model.topics),
            kafka=dict(kafka),
            kafka_is_default=kafka_is_default,
            kafka_conn_id=model.kafka_conn_id,
            aws_conn_id=model.aws_conn_id,
            start_from=model.start_from,
            max_records_per_partition=model.max_records_per_partition,
            value=_value_config(value),
            metadata=_metadata_config(model),
            output=OutputConfig(output.path, output.quarantine_path, tuple(output.partition_by)),
            control_db_url=model.control_db_url,
            schedule=model.schedule,
            expectations=tuple(model.expectations),
            maintenance=(
                MaintenanceConfig(model.maintenance.schedule, model.maintenance.retention_hours)
                if model.maintenance is not None
                else None
            ),
            alerts=AlertsConfig(**model.alerts.model_dump()) if model.alerts is not None else None,
            source=self.path.resolve(),
        )


def _metadata_config(model: PipelineFile) -> MetadataConfig:
    key = model.key
    files = (key.schema_file, *key.writer_schemas.values()) if key.schema_file else ()
    return MetadataConfig(
        key.format,
        model.metadata.headers,
        model.metadata.timestamp_type,
        key_schema=load_schema_file(key.schema_file) if key.schema_file else None,
        key_writer_schemas={i: load_schema_file(path) for i, path in key.writer_schemas.items()},
        key_schema_files=files,
    )


def _value_config(value: ValueSection) -> ValueConfig:
    if value.format != "avro":
        return ValueConfig(
            format=value.format,
            schema=value.schema_,
            columns=value.columns,
            schema_evolution=value.schema_evolution,
        )
    reader = value.reader_schema
    assert reader is not None  # the model requires schema_file for avro
    sr = value.schema_registry
    registry = RegistrySettings(
        url=sr.url if sr else None,
        username=sr.username if sr else None,
        password=sr.password if sr else None,
        timeout_seconds=sr.timeout_seconds if sr else 10.0,
        conn_id=sr.conn_id if sr else None,
        files={i: load_schema_file(path) for i, path in value.writer_schemas.items()},
    )
    assert value.schema_file is not None
    return ValueConfig(
        "avro",
        spark_ddl(reader),
        value.columns,
        avro_schema=reader,
        registry=registry,
        schema_files=(value.schema_file, *value.writer_schemas.values()),
        schema_evolution=value.schema_evolution,
    )


def _problem(error: Any) -> Problem:
    """(dotted key, value, fix) of one pydantic error, in the words of the file's keys."""
    loc: tuple[str | int, ...] = error["loc"]
    ctx = error.get("ctx") or {}
    # A default that is checked (no value.schema given) is located by the field's name, not its key.
    loc = tuple("schema" if p == "schema_" else p for p in loc)
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    key += ctx.get("at", "")
    key = ctx.get("key") or key  # a check across sections names the key it is about
    value = ctx.get("value", error.get("input"))
    if error["type"] == "eos_config":
        return key, value, ctx["fix"]
    if error["type"] == "extra_forbidden":
        known = PipelineFile.known_keys(loc[:-1])
        return key, value, f"unknown key{hint(str(loc[-1]), known)}; known: {', '.join(known)}"
    if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return key, value, "it must be a mapping of keys to values"
    return key, value, str(error["msg"])
