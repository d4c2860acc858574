"""The pydantic model of a pipeline file: every key's rule and fix, checked in one pass.

Each validator raises `problem(fix)`; pydantic collects the problems of every key, and
config.load_pipeline turns them into one ConfigError naming the file, the key, the value and the
fix of each. The model holds the file's values (with defaults, paths resolved); config/pipeline.py turns
it into the frozen PipelineConfig the rest of the package uses.
"""

from __future__ import annotations

import contextlib
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from croniter import CroniterBadDateError, CroniterError, croniter
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from eos_ingest import paths
from eos_ingest.config import expectation_types as gx_types
from eos_ingest.config.pipeline_name import BACKFILL_PREFIX, MAX_NAME, NAME
from eos_ingest.config.table_location import TableLocation, TableUriError, is_object_store, object_store_uri
from eos_ingest.schema.avro import AvroSchemaError, load_schema_file, spark_ddl
from eos_ingest.schema.ddl import base_type, hint, parse_ddl

START_FROM = ("earliest", "latest")
CONTROL_DB_ENV = "EOS_CONTROL_DB_URL"  # the control DB of pipelines whose file names none
VALUE_FORMATS = ("json", "raw", "avro")
# value.schema_evolution (formats/schema_evolution.py): what a field the schema lacks does to a batch.
SCHEMA_EVOLUTION = ("ignore", "add_columns", "fail")
SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly",
                    "@yearly")  # fmt: skip
_UNPARTITIONABLE = ("ARRAY", "MAP", "STRUCT", "BINARY", "VARIANT")  # Spark refuses them as partitions
_BUILTIN_PARTITIONS = ("event_date", "kafka_topic", "kafka_partition")
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_CRON_FIX = (
    "use a 5-field cron 'minute hour day-of-month month day-of-week' in UTC, e.g. '30 2 * * *' "
    f"(02:30 every day) or '*/15 * * * *', one of {', '.join(SCHEDULE_PRESETS)}, or null for manual runs"
)
_EXAMPLE = "{type: expect_column_values_to_not_be_null, column: id}"
_UNSET = object()


def problem(fix: str, *, at: str = "", value: Any = _UNSET, key: str = "") -> PydanticCustomError:
    """A problem of the key being validated; `at` names a key below it, `value` replaces its input,
    `key` names another key of the file (a check across sections)."""
    ctx: dict[str, Any] = {"fix": fix, "at": at, "key": key}
    if value is not _UNSET:
        ctx["value"] = value
    return PydanticCustomError("eos_config", "{fix}", ctx)


def _choice(choices: tuple[str, ...]) -> BeforeValidator:
    def check(value: Any) -> str:
        if value not in choices:
            raise problem(f"use {' or '.join(repr(c) for c in choices)}")
        return str(value)

    return BeforeValidator(check)


def _name(value: Any, info: ValidationInfo) -> str:
    stem = info.context["stem"] if info.context else value
    if not (isinstance(value, str) and NAME.fullmatch(value) and value == stem):
        raise problem(f"set it to the file name {stem!r} ([a-z0-9_]+)")
    if len(value) > MAX_NAME:
        raise problem(
            f"use at most {MAX_NAME} characters, so that the DAG id {BACKFILL_PREFIX}<name> fits Airflow"
        )
    return value


def _topic_list(value: Any) -> Any:
    if not (isinstance(value, list) and value):
        raise problem("give a list of one or more topics, e.g. [orders]")
    return value


def _topic(value: Any) -> str:
    if not (isinstance(value, str) and _TOPIC.fullmatch(value) and value not in (".", "..")):
        raise problem("a Kafka topic name is 1-249 characters of [a-zA-Z0-9._-]")
    return value


def _distinct_topics(topics: list[str]) -> list[str]:
    for i, t in enumerate(topics):
        if topics.index(t) != i:
            raise problem("the topic is listed twice; remove one", at=f"[{i}]", value=t)
    return topics


def _kafka(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):  # only a given `kafka:` is checked; absent, config/pipeline.py's default
        raise problem("give a mapping of librdkafka settings")
    settings: dict[str, str] = {}
    for k, v in value.items():
        v = str(v).lower() if isinstance(v, bool) else v  # YAML true is True; librdkafka wants "true"
        if not (isinstance(k, str) and isinstance(v, str | int | float)):
            raise problem("a librdkafka setting is `name: value` with a scalar value", at=f".{k}", value=v)
        settings[k] = str(v)
    # Exactly-once rests on reading committed transactions only: config must not weaken it.
    level = settings.get("isolation.level", "read_committed")
    if level != "read_committed":
        raise problem("remove it; reads are always read_committed", at=".isolation.level", value=level)
    return settings


def _conn_id(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise problem("give an Airflow connection id, or null for none")
    return value


def _max_records(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # what a ${VAR} gives is always a string
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise problem("use a whole number >= 1, e.g. 100000")
    return value


def _local_path(value: Any) -> Path:
    if not (isinstance(value, str) and value.strip()):
        raise problem("give a non-empty path")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else paths.state_dir() / path).resolve()


def _table_location(value: Any) -> TableLocation:
    """A local folder (resolved), or s3a://bucket/prefix kept as a URI (no trailing slash)."""
    if not (isinstance(value, str) and "://" in value):
        return _local_path(value)
    try:
        return object_store_uri(value)
    except TableUriError as e:
        raise (problem(e.fix) if e.shown is None else problem(e.fix, value=e.shown)) from None


def _db_url(url: Any) -> str:
    """The file's control_db_url; without one $EOS_CONTROL_DB_URL (a deployment's default, e.g.
    the PostgreSQL of docker-compose.yaml); without that the SQLite file in the state folder."""
    from_env = url is None and bool(os.environ.get(CONTROL_DB_ENV))
    if url is None and not from_env:
        return f"sqlite:///{paths.state_dir() / 'control.db'}"
    if from_env:
        url = os.environ[CONTROL_DB_ENV]
    if not (isinstance(url, str) and re.match(r"(sqlite|postgresql)(\+\w+)?://", url)):
        fix = "use sqlite:///<file> or postgresql+psycopg://user@host/db"
        if from_env:  # the file has no control_db_url: the value is the environment's
            raise problem(f"{fix} in ${CONTROL_DB_ENV}, or set control_db_url in the file", value=url)
        raise problem(fix)
    if url.startswith("sqlite:///") and not url.startswith(("sqlite:////", "sqlite:///:memory:")):
        # A relative SQLite path would follow the working directory of each Airflow process.
        return f"sqlite:///{paths.state_dir() / url.removeprefix('sqlite:///')}"
    return url


def check_schedule(value: Any) -> str | None:
    """An Airflow preset, a 5-field cron croniter takes (as Airflow does) that fires, or None."""
    if value is None or value in SCHEDULE_PRESETS:
        return value
    if not isinstance(value, str) or value.startswith("@") or len(value.split()) != 5:
        raise problem(_CRON_FIX)
    try:
        croniter(value).get_next(datetime, start_time=datetime(2000, 1, 1))
    except CroniterBadDateError:
        raise problem(f"it never fires (no such date); {_CRON_FIX}") from None
    except CroniterError as e:  # what Airflow's timetable validation refuses
        raise problem(f"{e}; {_CRON_FIX}") from None
    return value


def _expectation_list(value: Any) -> Any:
    if not isinstance(value, list):
        raise problem("give a list of expectation configs, or []")
    return value


# Checks that name an engine's types. The gate and the audit validate pandas frames (Arrow's
# conversion of the Spark rows and of the table), and value.schema already fixes every column's
# type, so such a check would compare unlike type names rather than the data.
_ENGINE_TYPED = ("expect_column_values_to_be_of_type", "expect_column_values_to_be_in_type_list")


def _expectation(item: Any) -> dict[str, Any]:
    if not (isinstance(item, dict) and isinstance(item.get("type"), str)):
        raise problem(f'each item is a mapping with a "type", e.g. {_EXAMPLE}')
    if item["type"] in _ENGINE_TYPED:
        raise problem(
            "column types are fixed by value.schema (a row that does not fit goes to quarantine); "
            "remove this expectation, or check values instead (e.g. expect_column_values_to_match_regex)",
            at=".type",
            value=item["type"],
        )
    found = gx_types.check_expectation(item)
    if found:
        at, value, fix = found
        raise problem(fix, at=f".{at}", value=value)
    return dict(item)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _schema_path(value: Any, info: ValidationInfo) -> Path:
    """An .avsc path; a relative one is beside the pipeline file (as it is shipped with it)."""
    if not (isinstance(value, str) and value.strip()):
        raise problem("give the path of an Avro schema file (.avsc)")
    folder = Path((info.context or {}).get("folder") or Path.cwd())
    path = Path(value).expanduser()
    path = (path if path.is_absolute() else folder / path).resolve()
    # A spark-submit job gets the pipeline file and its schema files side by side (submit.shipped).
    beside = folder / path.name
    return beside if not path.exists() and beside.is_file() else path


def _avro_text(path: Path) -> str:
    try:
        return load_schema_file(path)
    except AvroSchemaError as e:
        raise problem(f"{e}; give an Avro record schema (.avsc)", value=str(path)) from None


def _url(value: Any, info: ValidationInfo) -> str | None:
    if value is None and info.data.get("conn_id"):
        return None  # the connection gives it
    if not (isinstance(value, str) and re.match(r"https?://[^/\s]+", value)):
        raise problem(
            "use http(s)://host:port of a Schema Registry (Confluent REST API), e.g. http://127.0.0.1:8081"
        )
    if "@" in value.split("://", 1)[1].split("/", 1)[0]:  # never echo it: it holds credentials
        raise problem("no credentials in the url: set username and password", value="http://***@…")
    return value.rstrip("/")


def _timeout(value: Any) -> float:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)  # what a ${VAR} gives is always a string
    if not (isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 300):
        raise problem("use seconds, more than 0 and at most 300, e.g. 10")
    return float(value)


def _reader_schema_file(value: Any, handler: Any, info: ValidationInfo, of: str, example: str) -> Path | None:
    """`schema_file` of a value or key section: an Avro record schema with format avro, else absent."""
    if info.data.get("format") != "avro":
        if value is not None:
            raise problem("remove it, or use format avro (it is the Avro reader schema)")
        return None
    if value is None:
        raise problem(f"give the reader schema of the {of}, e.g. {example} (an Avro record)")
    path: Path = handler(value)
    _avro_text(path)
    return path


class RegistrySection(_Section):
    """`value.schema_registry:` -- where writer schemas are looked up by id."""

    # An Airflow connection (host, port, login, password) joined with the keys below (connections/registry.py).
    conn_id: Annotated[str | None, BeforeValidator(_conn_id)] = None
    url: Annotated[str | None, BeforeValidator(_url)] = Field(default=None, validate_default=True)
    username: str | None = None  # basic auth, e.g. ${SCHEMA_REGISTRY_USER}
    password: str | None = None  # e.g. ${SCHEMA_REGISTRY_PASSWORD}; never shown
    timeout_seconds: Annotated[float, BeforeValidator(_timeout)] = 10.0


def _writer_schemas(value: Any, info: ValidationInfo) -> dict[int, Path]:
    if not isinstance(value, dict):
        raise problem("give a mapping of schema id to .avsc path, e.g. {1: schemas/orders_v1.avsc}")
    out: dict[int, Path] = {}
    for key, path in value.items():
        if not (isinstance(key, int) or (isinstance(key, str) and key.isdigit())):
            raise problem("a schema id is a whole number >= 0", at=f".{key}", value=key)
        try:
            out[int(key)] = _schema_path(path, info)
            _avro_text(out[int(key)])
        except PydanticCustomError as e:
            raise problem(str(e), at=f".{key}", value=path) from None
    return out


class ValueSection(_Section):
    """`value:` -- json with a Spark DDL schema, raw bytes, or Avro in the Schema Registry wire format."""

    format: Annotated[str, _choice(VALUE_FORMATS)] = "json"
    schema_: str | None = Field(default=None, alias="schema", validate_default=True)
    # avro: the reader schema (table columns), and where each record's writer schema comes from.
    schema_file: Annotated[Path | None, BeforeValidator(_schema_path)] = Field(
        default=None, validate_default=True
    )
    schema_registry: RegistrySection | None = None
    writer_schemas: Annotated[dict[int, Path], BeforeValidator(_writer_schemas)] = Field(
        default={}, validate_default=True
    )
    # ignore (default: today's tables, unknown fields dropped and counted) | add_columns | fail
    schema_evolution: Annotated[str, _choice(SCHEMA_EVOLUTION)] = "ignore"

    @field_validator("schema_", mode="before")
    @classmethod
    def _schema(cls, schema: Any, info: ValidationInfo) -> str | None:
        fmt = info.data.get("format")  # absent when it was refused: nothing to check against
        if fmt == "raw" and schema is not None:
            raise problem("remove it (raw values stay bytes) or use format json")
        if fmt == "avro" and schema is not None:
            raise problem("remove it: Avro columns come from value.schema_file (the reader schema)")
        if fmt == "json":
            if not (isinstance(schema, str) and schema.strip()):
                raise problem('give the Spark DDL of the values, e.g. "id BIGINT, name STRING"')
            try:
                parse_ddl(schema)
            except ValueError as e:
                raise problem(str(e)) from None
        return schema

    @field_validator("schema_file", mode="wrap")
    @classmethod
    def _schema_file(cls, value: Any, handler: Any, info: ValidationInfo) -> Path | None:
        path = _reader_schema_file(value, handler, info, "values", "schemas/orders.avsc")
        if path is None:
            return None
        try:
            parse_ddl(spark_ddl(_avro_text(path)))  # the same column rules as a json schema
        except ValueError as e:
            raise problem(str(e), value=str(path)) from None
        return path

    @field_validator("schema_registry", "writer_schemas", mode="after")
    @classmethod
    def _avro_only(cls, value: Any, info: ValidationInfo) -> Any:
        fmt = info.data.get("format")
        if value and fmt != "avro":
            raise problem("remove it, or use format avro")
        registry_absent = "schema_registry" in info.data and info.data["schema_registry"] is None
        if fmt == "avro" and info.field_name == "writer_schemas" and not value and registry_absent:
            raise problem(
                "Avro needs the writer schemas: give value.schema_registry.url, or value.writer_schemas "
                "({<schema id>: <.avsc path>}) when there is no registry",
                value=None,
            )
        return value

    @field_validator("schema_evolution", mode="after")
    @classmethod
    def _evolution(cls, value: str, info: ValidationInfo) -> str:
        if value != "ignore" and info.data.get("format") == "raw":
            raise problem("remove it: raw values have no schema to evolve (or use format json or avro)")
        return value

    @property
    def reader_schema(self) -> str | None:
        """The Avro reader schema's JSON text (format avro)."""
        return load_schema_file(self.schema_file) if self.format == "avro" and self.schema_file else None

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        if self.format == "avro":
            text = self.reader_schema
            return tuple(parse_ddl(spark_ddl(text))) if text else ()
        return tuple(parse_ddl(self.schema_)) if self.format == "json" and self.schema_ else ()


HEADER_SHAPES = ("none", "map", "array")
KEY_FORMATS = ("raw", "string", "avro")


class KeySection(_Section):
    """`key:` -- the kafka_key column: raw bytes (default, as before), UTF-8 text, or Avro in the
    Schema Registry wire format decoded into the struct of `schema_file` (formats/avro_key.py)."""

    format: Annotated[str, _choice(KEY_FORMATS)] = "raw"
    # avro: the key's reader schema (kafka_key's struct), and writer schemas by id; the rest come
    # from value.schema_registry, which the key shares.
    schema_file: Annotated[Path | None, BeforeValidator(_schema_path)] = Field(
        default=None, validate_default=True
    )
    writer_schemas: Annotated[dict[int, Path], BeforeValidator(_writer_schemas)] = {}

    @field_validator("schema_file", mode="wrap")
    @classmethod
    def _schema_file(cls, value: Any, handler: Any, info: ValidationInfo) -> Path | None:
        return _reader_schema_file(value, handler, info, "keys", "schemas/order_key.avsc")

    @field_validator("writer_schemas", mode="after")
    @classmethod
    def _avro_only(cls, value: dict[int, Path], info: ValidationInfo) -> dict[int, Path]:
        if value and info.data.get("format") != "avro":
            raise problem("remove it, or use format avro")
        return value


def _flag(value: Any) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"  # what a ${VAR} gives is always a string
    if not isinstance(value, bool):
        raise problem("use true or false")
    return value


class MetadataSection(_Section):
    """`metadata:` -- Kafka metadata columns beyond the identity, timestamp and key; off by default,
    so a table keeps the columns it had."""

    headers: Annotated[str, _choice(HEADER_SHAPES)] = "none"
    timestamp_type: Annotated[bool, BeforeValidator(_flag)] = False


def _retention(value: Any) -> float:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)  # what a ${VAR} gives is always a string
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise problem("use a number of hours >= 0, e.g. 168 (Delta's default, 7 days)")
    return float(value)


class MaintenanceSection(_Section):
    """`maintenance:` -- the eos_maintain__<name> DAG (OPTIMIZE + VACUUM, docs/maintenance.md)."""

    schedule: Annotated[str | None, BeforeValidator(check_schedule)] = "@daily"
    retention_hours: Annotated[float | None, BeforeValidator(_retention)] = None


def _lag_limit(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # what a ${VAR} gives is always a string
    if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise problem("use a whole number >= 1 (records, or seconds), e.g. 100000 or 3600; or leave it out")
    return value


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def _callback_path(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and _DOTTED.fullmatch(value)):
        raise problem(
            "give the dotted path of a callable or an Airflow BaseNotifier (class or instance) in a "
            "module the Airflow workers import, e.g. my_alerts.notify_slack (docs/alerts.md)"
        )
    return value


class AlertsSection(_Section):
    """`alerts:` -- the eos_alerts__<name> DAG: fail, and notify, when the lag passes a limit
    (service/lag_alerts.py, docs/alerts.md)."""

    max_lag_records: Annotated[int | None, BeforeValidator(_lag_limit)] = None
    max_lag_seconds: Annotated[int | None, BeforeValidator(_lag_limit)] = Field(
        default=None, validate_default=True
    )
    schedule: Annotated[str | None, BeforeValidator(check_schedule)] = "*/15 * * * *"
    on_failure_callback: Annotated[str | None, BeforeValidator(_callback_path)] = None

    @field_validator("max_lag_seconds", mode="after")
    @classmethod
    def _a_limit(cls, seconds: int | None, info: ValidationInfo) -> int | None:
        # max_lag_records absent from info.data: it was refused, and that problem is reported.
        if seconds is None and "max_lag_records" in info.data and info.data["max_lag_records"] is None:
            raise problem("give max_lag_records, max_lag_seconds or both, e.g. {max_lag_seconds: 3600}")
        return seconds


def _partition_list(value: Any) -> Any:
    if not isinstance(value, list):
        raise problem("give a list of columns, e.g. [event_date]")
    return value


# None: not given, PipelineFile fills it
_Path = Annotated[Path | str | None, BeforeValidator(_table_location)]


class OutputSection(_Section):
    """`output:`; PipelineFile fills the default paths and checks the partition columns."""

    path: _Path = None
    quarantine_path: _Path = None
    partition_by: Annotated[tuple[Any, ...], BeforeValidator(_partition_list)] = ("event_date",)


class PipelineFile(_Section):
    """One pipeline file, every default filled in. Validate with context={"stem": <file stem>}."""

    name: Annotated[str, BeforeValidator(_name)] = Field(default=None, validate_default=True)
    topics: Annotated[
        list[Annotated[str, BeforeValidator(_topic)]],
        BeforeValidator(_topic_list),
        AfterValidator(_distinct_topics),
    ] = Field(default=None, validate_default=True)
    kafka: Annotated[dict[str, str] | None, BeforeValidator(_kafka)] = None
    kafka_conn_id: Annotated[str | None, BeforeValidator(_conn_id)] = "kafka_default"
    aws_conn_id: Annotated[str | None, BeforeValidator(_conn_id)] = None
    start_from: Annotated[str, _choice(START_FROM)] = "earliest"
    max_records_per_partition: Annotated[int, BeforeValidator(_max_records)] = 100_000
    key: KeySection = Field(default_factory=dict, validate_default=True)
    value: ValueSection = Field(default_factory=dict, validate_default=True)
    metadata: MetadataSection = Field(default_factory=dict, validate_default=True)
    output: OutputSection = Field(default_factory=dict, validate_default=True)
    control_db_url: Annotated[str, BeforeValidator(_db_url)] = Field(default=None, validate_default=True)
    schedule: Annotated[str | None, BeforeValidator(check_schedule)] = "@hourly"
    expectations: Annotated[
        list[Annotated[dict[str, Any], BeforeValidator(_expectation)]], BeforeValidator(_expectation_list)
    ] = []
    # None: no maintenance DAG (`eos-ingest maintain` still works, with its defaults).
    maintenance: MaintenanceSection | None = None
    # None: no alerts DAG (`eos-ingest check-lag` still works, with limits given as options).
    alerts: AlertsSection | None = None

    @field_validator("metadata")
    @classmethod
    def _key_writers(cls, metadata: MetadataSection, info: ValidationInfo) -> MetadataSection:
        # Here, not in KeySection: the key's writers may come from the value's registry, and
        # `value` is validated after `key` (the fields' order).
        key, value = info.data.get("key"), info.data.get("value")
        if key is None or value is None or key.format != "avro" or key.writer_schemas:
            return metadata
        if value.schema_registry is None:
            raise problem(
                "Avro keys need their writer schemas: give value.schema_registry.url (the key shares the "
                "value's registry; it needs value.format avro), or key.writer_schemas "
                "({<schema id>: <.avsc path>})",
                key="key.writer_schemas",
                value=None,
            )
        return metadata

    @field_validator("control_db_url")
    @classmethod
    def _coordinator(cls, url: str, info: ValidationInfo) -> str:
        output = info.data.get("output")
        tables = (output.path, output.quarantine_path) if output is not None else ()
        if url.startswith("sqlite") and any(is_object_store(t) for t in tables if t is not None):
            raise problem(
                "s3a tables commit through the control DB, which every writer must share (a "
                "cluster cannot share one SQLite file); use postgresql+psycopg://user@host/db",
                value=url,  # a SQLite URL holds no password
            )
        return url

    @field_validator("output")
    @classmethod
    def _output(cls, output: OutputSection, info: ValidationInfo) -> OutputSection:
        name = info.data.get("name") or (info.context or {}).get("stem", "")
        path = output.path or _local_path(f"tables/{name}")
        quarantine = output.quarantine_path or (
            f"{path}_quarantine" if isinstance(path, str) else Path(f"{path}_quarantine")
        )
        if quarantine == path:
            raise problem("it must differ from output.path", at=".quarantine_path", value=str(quarantine))
        value = info.data.get("value")
        if value is None:  # the schema was refused: its columns are unknown
            return output.model_copy(update={"path": path, "quarantine_path": quarantine})
        allowed = {n.lower(): (n, base_type(t)) for n, t in value.columns}
        allowed.update({n: (n, "") for n in _BUILTIN_PARTITIONS})
        names = [n for n, _ in allowed.values()]
        chosen: list[str] = []
        for i, col in enumerate(output.partition_by):
            at = f".partition_by[{i}]"
            canonical, base = allowed.get(str(col).lower(), ("", ""))
            if not (isinstance(col, str) and canonical):
                raise problem(f"use one of {', '.join(names)}{hint(str(col), names)}", at=at, value=col)
            if base in _UNPARTITIONABLE:
                raise problem(f"a {base} column cannot partition a table", at=at, value=col)
            if canonical in chosen:
                raise problem("the column is listed twice; remove one", at=at, value=col)
            chosen.append(canonical)  # the schema's spelling, so the writer finds the column
        update = {"path": path, "quarantine_path": quarantine, "partition_by": tuple(chosen)}
        return output.model_copy(update=update)

    @classmethod
    def known_keys(cls, section: tuple[str | int, ...]) -> list[str]:
        """The keys a section (() for the file, ("value",), ("output",)) may hold."""
        models: dict[tuple[str | int, ...], type[BaseModel]] = {
            (): cls,
            ("value",): ValueSection,
            ("output",): OutputSection,
            ("value", "schema_registry"): RegistrySection,
            ("key",): KeySection,
            ("metadata",): MetadataSection,
            ("maintenance",): MaintenanceSection,
            ("alerts",): AlertsSection,
        }
        model = models.get(section)
        return [f.alias or n for n, f in model.model_fields.items()] if model else []
