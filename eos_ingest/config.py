"""Typed, validated pipeline config, read from ``pipelines/<name>.yaml``.

Shape (only ``name``, ``topics`` and, for json, ``value.schema`` are required)::

    name: demo                     # [a-z0-9_]+, equal to the file stem
    topics: [demo_events]          # 1+ Kafka topic names
    kafka:                         # librdkafka settings, passed through as strings; default:
      bootstrap.servers: ${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}
    kafka_conn_id: kafka_default   # Airflow connection whose settings join `kafka:`; null = none
    start_from: earliest           # earliest | latest: where a partition never seen before starts
    max_records_per_partition: 100000   # offsets per partition per batch, >= 1
    value:
      format: json                 # json (default) | raw
      schema: "id BIGINT, ts TIMESTAMP"   # Spark DDL: required for json, forbidden for raw
    output:
      path: tables/demo            # default tables/<name>; relative paths are under the state folder
      quarantine_path: tables/demo_quarantine   # default <path>_quarantine
      partition_by: [event_date]   # default; or kafka_topic, kafka_partition, schema columns; [] = none
    control_db_url: sqlite:///${EOS_STATE_DIR}/control.db   # default; postgresql+psycopg://... too
    schedule: "@hourly"            # Airflow 5-field cron or preset; null = manual runs only
    expectations: []               # extra GX expectation configs: mappings with a "type" key

``${VAR}`` and ``${VAR:-default}`` are expanded from the environment in every string value
(``:-`` also replaces an empty value, as in the shell); ``EOS_STATE_DIR`` always resolves, to
``paths.state_dir()`` when unset. Every problem is a ``ConfigError`` naming the file, the dotted
key, the value and the fix. Only local (or mounted) output paths are supported for now.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Hashable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eos_ingest import paths
from eos_ingest.errors import ConfigError
from eos_ingest.parser import INTERNAL_COLUMNS

RESERVED_COLUMNS = frozenset({"kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
                              "kafka_key", "batch_id", "event_date"})  # fmt: skip
START_FROM = ("earliest", "latest")
VALUE_FORMATS = ("json", "raw")
SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly",
                    "@yearly")  # fmt: skip
_KEYS = {
    "": ("name", "topics", "kafka", "kafka_conn_id", "start_from", "max_records_per_partition", "value",
         "output", "control_db_url", "schedule", "expectations"),
    "value": ("format", "schema"),
    "output": ("path", "quarantine_path", "partition_by"),
}  # fmt: skip
_DEFAULT_KAFKA = {"bootstrap.servers": "${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}"}
_SPARK_TYPES = ("BOOLEAN", "TINYINT", "BYTE", "SMALLINT", "SHORT", "INT", "INTEGER", "BIGINT", "LONG",
                "FLOAT", "REAL", "DOUBLE", "DECIMAL", "DEC", "NUMERIC", "STRING", "VARCHAR", "CHAR",
                "BINARY", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "INTERVAL", "ARRAY",
                "MAP", "STRUCT", "VARIANT")  # fmt: skip
_UNPARTITIONABLE = ("ARRAY", "MAP", "STRUCT", "BINARY", "VARIANT")  # Spark refuses them as partitions
_BUILTIN_PARTITIONS = ("event_date", "kafka_topic", "kafka_partition")
_SECRET_MARKERS = ("password", "secret", "sasl.jaas", "token")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_NAME = re.compile(r"[a-z0-9_]+")
_COLUMN = re.compile(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,?#-]+")


@dataclass(frozen=True)
class ValueConfig:
    """How record values decode: ``json`` with the Spark DDL ``schema``, or ``raw`` bytes."""

    format: str
    schema: str | None
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class OutputConfig:
    """Where batches land: absolute Delta table paths and the table's partition columns."""

    path: Path
    quarantine_path: Path
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

    @property
    def output_path(self) -> Path:
        """Absolute path of the output Delta table."""
        return self.output.path

    @property
    def quarantine_path(self) -> Path:
        """Absolute path of the quarantine Delta table."""
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
        shown["control_db_url"] = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", self.control_db_url)
        return shown


def is_secret_key(key: str) -> bool:
    """True for a librdkafka setting whose value must not be logged (passwords, JAAS, keys)."""
    k = key.lower()
    if any(marker in k for marker in _SECRET_MARKERS):
        return True
    # key.serializer, ssl.keystore.type, ssl.key.location name a class, a type or a file: not secrets.
    return "key" in k and k.rsplit(".", 1)[-1] not in ("serializer", "deserializer", "type", "location")


def default_pipelines_dir() -> Path:
    """The pipelines folder: $EOS_PIPELINES_DIR, else ``pipelines/`` at the repository root."""
    return Path(os.environ.get("EOS_PIPELINES_DIR") or paths.REPO_ROOT / "pipelines")


def load_pipeline(path: str | Path) -> PipelineConfig:
    """Read and validate one pipeline file; raise ConfigError naming the key, the value and the fix."""
    return _Loader(Path(path)).load()


def load_pipeline_by_name(name: str, pipelines_dir: Path | None = None) -> PipelineConfig:
    """Load ``<pipelines_dir>/<name>.yaml``; an unknown name lists the pipelines that exist."""
    folder = pipelines_dir or default_pipelines_dir()
    file = folder / f"{name}.yaml"
    if not _NAME.fullmatch(name) or not file.is_file():  # the name check also stops "../x"
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(
            f"no pipeline {name!r} in {folder}{_hint(name, known)}; known: {', '.join(known) or 'none'}"
        )
    return load_pipeline(file)


def load_all_pipelines(pipelines_dir: Path | None = None) -> list[PipelineConfig]:
    """Load every ``*.yaml`` of the folder, sorted by name (the DAG factory makes one DAG each)."""
    folder = pipelines_dir or default_pipelines_dir()
    if not folder.is_dir():
        raise ConfigError(f"pipelines folder {folder} does not exist; create it or set EOS_PIPELINES_DIR")
    return sorted((load_pipeline(p) for p in folder.glob("*.yaml")), key=lambda c: c.name)


def parse_ddl(ddl: str) -> list[tuple[str, str]]:
    """Split a Spark DDL schema into ``(name, type)`` pairs; ValueError says what is wrong.

    Light on purpose (no Spark here): top-level commas split columns, the first word is the name,
    the type must start with a Spark type. Spark has the last word when the batch is parsed.
    """
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(ddl + ","):
        depth += (ch in "(<") - (ch in ")>")
        if depth < 0:
            raise ValueError(f"unbalanced {ch!r} at character {i}")
        if ch == "," and depth == 0:
            parts.append(ddl[start:i].strip())
            start = i + 1
    if depth:
        raise ValueError("a '(' or '<' is not closed")
    columns: list[tuple[str, str]] = []
    for part in parts:
        m = _COLUMN.match(part)
        col_type = part[m.end() :].strip().removeprefix(":").strip() if m else ""
        if not m or not col_type:
            raise ValueError(f"column {part!r} is not `name TYPE`")
        name = m.group(1) or m.group(2)
        base = _base_type(col_type)
        if base not in _SPARK_TYPES:
            raise ValueError(f"column {name!r} has unknown type {base!r}{_hint(base, _SPARK_TYPES)}")
        if name.lower() in (n.lower() for n, _ in columns):
            raise ValueError(f"column {name!r} is declared twice (Spark names are case-insensitive)")
        if name.lower() in RESERVED_COLUMNS:
            reserved = ", ".join(sorted(RESERVED_COLUMNS))
            raise ValueError(f"column {name!r} collides with an output column ({reserved}); rename it")
        if name.lower() in INTERNAL_COLUMNS:
            raise ValueError(
                f"column {name!r} is a name the parser uses for its own columns "
                f"({', '.join(INTERNAL_COLUMNS)}); leave it out of value.schema, or rename the field "
                "in the records and here"
            )
        columns.append((name, col_type))
    return columns


def _base_type(col_type: str) -> str:
    return re.split(r"[\s(<]", col_type, maxsplit=1)[0].upper()


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


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
    """Validates one file; every check goes through `check` so that messages share one shape."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.shown = str(path.resolve().relative_to(paths.REPO_ROOT))
        except ValueError:
            self.shown = str(path)

    def check(self, ok: object, key: str, value: Any, fix: str) -> None:
        if not ok:
            raise ConfigError(f"{self.shown}: {key} = {value!r} is not valid; {fix}")

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
            fix = f"environment variable {var} is not set; set it or write ${{{var}:-default}}"
            self.check(env is not None or default is not None, key, value, fix)
            if env or (env is not None and default is None):
                return env
            return default or ""  # `:-` also replaces an empty value, as in the shell

        return _VAR.sub(one, value) if isinstance(value, str) else value

    def section(self, doc: Any, key: str) -> dict[str, Any]:
        """Check that ``doc`` is a mapping with only known keys, with 'did you mean' on a typo."""
        self.check(isinstance(doc, dict), key or "<file>", doc, "it must be a mapping of keys to values")
        for k, v in doc.items():
            fix = f"unknown key{_hint(str(k), _KEYS[key])}; known: {', '.join(_KEYS[key])}"
            self.check(k in _KEYS[key], f"{key}.{k}" if key else str(k), v, fix)
        return dict(doc)

    def choice(self, doc: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
        value = doc.get(key.rsplit(".", 1)[-1], choices[0])
        self.check(value in choices, key, value, f"use {' or '.join(repr(c) for c in choices)}")
        return str(value)

    def path_of(self, key: str, value: Any) -> Path:
        self.check(isinstance(value, str) and value.strip(), key, value, "give a non-empty path")
        self.check("://" not in value, key, value, "only local or mounted paths are supported for now")
        path = Path(value).expanduser()
        return (path if path.is_absolute() else paths.state_dir() / path).resolve()

    def load(self) -> PipelineConfig:
        try:
            with self.path.open(encoding="utf-8") as f:  # a stream, so YAML errors name the file
                raw = yaml.load(f, Loader=_StrictLoader)
        except OSError as e:
            raise ConfigError(f"{self.shown}: cannot read the file ({e.strerror})") from e
        except yaml.YAMLError as e:
            fix = "fix the syntax (quote values that start with @ or *)"
            raise ConfigError(f"{self.shown}: not valid YAML; {fix}:\n{e}") from e
        doc = self.section(self.expand(raw, ""), "")
        name: Any = doc.get("name")
        ok: object = isinstance(name, str) and _NAME.fullmatch(name) and name == self.path.stem
        self.check(ok, "name", name, f"set it to the file name {self.path.stem!r} ([a-z0-9_]+)")
        value = self.value(self.section(doc.get("value", {}), "value"))
        conn_id = doc.get("kafka_conn_id", "kafka_default")
        ok = conn_id is None or (isinstance(conn_id, str) and conn_id.strip())
        self.check(ok, "kafka_conn_id", conn_id, "give an Airflow connection id, or null for none")
        return PipelineConfig(
            name=name,
            topics=self.topics(doc.get("topics")),
            kafka=self.kafka(doc.get("kafka", self.expand(_DEFAULT_KAFKA, "kafka"))),
            kafka_is_default="kafka" not in doc,
            kafka_conn_id=conn_id,
            start_from=self.choice(doc, "start_from", START_FROM),
            max_records_per_partition=self.max_records(doc.get("max_records_per_partition", 100_000)),
            value=value,
            output=self.output(self.section(doc.get("output", {}), "output"), name, value.columns),
            control_db_url=self.db_url(doc.get("control_db_url")),
            schedule=self.schedule(doc.get("schedule", "@hourly")),
            expectations=self.expectations(doc.get("expectations", [])),
            source=self.path.resolve(),
        )

    def topics(self, topics: Any) -> tuple[str, ...]:
        ok: object = isinstance(topics, list) and topics
        self.check(ok, "topics", topics, "give a list of one or more topics, e.g. [orders]")
        for i, t in enumerate(topics):
            ok = isinstance(t, str) and _TOPIC.fullmatch(t) and t not in (".", "..")
            self.check(ok, f"topics[{i}]", t, "a Kafka topic name is 1-249 characters of [a-zA-Z0-9._-]")
            self.check(topics.index(t) == i, f"topics[{i}]", t, "the topic is listed twice; remove one")
        return tuple(topics)

    def kafka(self, kafka: Any) -> dict[str, str]:
        self.check(isinstance(kafka, dict), "kafka", kafka, "give a mapping of librdkafka settings")
        settings: dict[str, str] = {}
        for k, v in kafka.items():
            v = str(v).lower() if isinstance(v, bool) else v  # YAML true is True; librdkafka wants "true"
            ok = isinstance(k, str) and isinstance(v, str | int | float)
            self.check(ok, f"kafka.{k}", v, "a librdkafka setting is `name: value` with a scalar value")
            settings[k] = str(v)
        # Exactly-once rests on reading committed transactions only: config must not weaken it.
        level = settings.get("isolation.level", "read_committed")
        fix = "remove it; reads are always read_committed"
        self.check(level == "read_committed", "kafka.isolation.level", level, fix)
        return settings

    def max_records(self, value: Any) -> int:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)  # what a ${VAR} gives is always a string
        ok: object = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        self.check(ok, "max_records_per_partition", value, "use a whole number >= 1, e.g. 100000")
        return int(value)

    def value(self, doc: dict[str, Any]) -> ValueConfig:
        fmt = self.choice(doc, "value.format", VALUE_FORMATS)
        schema: Any = doc.get("schema")
        if fmt == "raw":
            fix = "remove it (raw values stay bytes) or use format json"
            self.check(schema is None, "value.schema", schema, fix)
            return ValueConfig(format=fmt, schema=None, columns=())
        fix = 'give the Spark DDL of the values, e.g. "id BIGINT, name STRING"'
        self.check(isinstance(schema, str) and schema.strip(), "value.schema", schema, fix)
        try:
            return ValueConfig(format=fmt, schema=schema, columns=tuple(parse_ddl(schema)))
        except ValueError as e:
            raise ConfigError(f"{self.shown}: value.schema = {schema!r} is not valid; {e}") from None

    def output(self, doc: dict[str, Any], name: str, columns: tuple[tuple[str, str], ...]) -> OutputConfig:
        path = self.path_of("output.path", doc.get("path", f"tables/{name}"))
        quarantine = self.path_of("output.quarantine_path", doc.get("quarantine_path", f"{path}_quarantine"))
        fix = "it must differ from output.path"
        self.check(quarantine != path, "output.quarantine_path", str(quarantine), fix)
        partition_by = doc.get("partition_by", ["event_date"])
        self.check(
            isinstance(partition_by, list),
            "output.partition_by",
            partition_by,
            "give a list of columns, e.g. [event_date]",
        )
        allowed = {n.lower(): (n, _base_type(t)) for n, t in columns}
        allowed.update({n: (n, "") for n in _BUILTIN_PARTITIONS})
        names = [n for n, _ in allowed.values()]
        chosen: list[str] = []
        for i, col in enumerate(partition_by):
            key = f"output.partition_by[{i}]"
            canonical, base = allowed.get(str(col).lower(), ("", ""))
            self.check(
                isinstance(col, str) and canonical,
                key,
                col,
                f"use one of {', '.join(names)}{_hint(str(col), names)}",
            )
            self.check(base not in _UNPARTITIONABLE, key, col, f"a {base} column cannot partition a table")
            self.check(canonical not in chosen, key, col, "the column is listed twice; remove one")
            chosen.append(canonical)  # the schema's spelling, so the writer finds the column
        return OutputConfig(path=path, quarantine_path=quarantine, partition_by=tuple(chosen))

    def db_url(self, url: Any) -> str:
        if url is None:
            return f"sqlite:///{paths.state_dir() / 'control.db'}"
        ok = isinstance(url, str) and re.match(r"(sqlite|postgresql)(\+\w+)?://", url)
        self.check(ok, "control_db_url", url, "use sqlite:///<file> or postgresql+psycopg://user@host/db")
        if url.startswith("sqlite:///") and not url.startswith(("sqlite:////", "sqlite:///:memory:")):
            # A relative SQLite path would follow the working directory of each Airflow process.
            return f"sqlite:///{paths.state_dir() / url.removeprefix('sqlite:///')}"
        return str(url)

    def schedule(self, value: Any) -> str | None:
        fields = value.split() if isinstance(value, str) else []
        cron = len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields)
        fix = f"use a 5-field cron, one of {', '.join(SCHEDULE_PRESETS)}, or null"
        self.check(value is None or value in SCHEDULE_PRESETS or cron, "schedule", value, fix)
        return value if value is None else str(value)

    def expectations(self, value: Any) -> tuple[dict[str, Any], ...]:
        fix = "give a list of expectation configs, or []"
        self.check(isinstance(value, list), "expectations", value, fix)
        for i, e in enumerate(value):
            ok = isinstance(e, dict) and isinstance(e.get("type"), str)
            example = "{type: expect_column_values_to_not_be_null, column: id}"
            self.check(ok, f"expectations[{i}]", e, f'each item is a mapping with a "type", e.g. {example}')
        return tuple(value)
