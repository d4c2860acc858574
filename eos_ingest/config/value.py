"""The `value:`, `key:` and `metadata:` sections: how a record's value and key decode (json with a
Spark DDL schema, raw bytes, text, or Avro in the Schema Registry wire format) and which Kafka
metadata become columns; with what they derive for the job (the columns, the schemas' texts, where
writer schemas come from, the .avsc files a spark-submit ships)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from eos_ingest.config.checks import DERIVED, ConnId, Section, as_number, check_flag, choice, problem
from eos_ingest.schema.avro import AvroSchemaError, load_schema_file, spark_ddl
from eos_ingest.schema.ddl import parse_ddl
from eos_ingest.schema.registry import RegistrySettings

VALUE_FORMATS = ("json", "raw", "avro")
# value.schema_evolution (formats/schema_evolution.py): what a field the schema lacks does to a batch.
SCHEMA_EVOLUTION = ("ignore", "add_columns", "fail")
HEADER_SHAPES = ("none", "map", "array")
KEY_FORMATS = ("raw", "string", "avro")


def _schema_path(value: Any, info: ValidationInfo) -> Path:
    """An .avsc path; a relative one is beside the pipeline file (as it is shipped with it)."""
    if not (isinstance(value, str) and value.strip()):
        raise problem("give the path of an Avro schema file (.avsc)")
    folder = Path((info.context or {}).get("folder") or Path.cwd())
    path = Path(value).expanduser()
    path = (path if path.is_absolute() else folder / path).resolve()
    # A spark-submit job gets the pipeline file and its schema files side by side (spark/submit.py).
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
    value = as_number(value)
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


SchemaFile = Annotated[Path | None, BeforeValidator(_schema_path)]
WriterSchemas = Annotated[dict[int, Path], BeforeValidator(_writer_schemas)]


class RegistrySection(Section):
    """`value.schema_registry:` -- where writer schemas are looked up by id."""

    # An Airflow connection (host, port, login, password) joined with the keys below (connections/registry.py).
    conn_id: ConnId = None
    url: Annotated[str | None, BeforeValidator(_url)] = Field(default=None, validate_default=True)
    username: str | None = None  # basic auth, e.g. ${SCHEMA_REGISTRY_USER}
    password: str | None = None  # e.g. ${SCHEMA_REGISTRY_PASSWORD}; never shown
    timeout_seconds: Annotated[float, BeforeValidator(_timeout)] = 10.0


# The file's key is `schema`; the BaseModel attribute it shadows is pydantic v1's deprecated schema().
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", 'Field name "schema"', UserWarning)

    class ValueConfig(Section):
        """`value:` -- json with the Spark DDL `schema`, raw bytes, or Avro in the Schema Registry wire
        format read with the reader schema `schema_file` (then `schema` is its Spark DDL), the writer
        schemas coming from `registry`."""

        format: Annotated[str, choice(VALUE_FORMATS)] = "json"
        schema: str | None = Field(default=None, validate_default=True)  # type: ignore[assignment]
        # avro: the reader schema (table columns), and where each record's writer schema comes from;
        # the job reads what they derive (below).
        schema_file: SchemaFile = Field(default=None, validate_default=True, exclude=True)
        schema_registry: RegistrySection | None = Field(default=None, exclude=True)
        writer_schemas: WriterSchemas = Field(default={}, validate_default=True, exclude=True)
        # ignore (default: today's tables, unknown fields dropped and counted) | add_columns | fail
        schema_evolution: Annotated[str, choice(SCHEMA_EVOLUTION)] = "ignore"
        # Derived (`derived`), not keys of the file; a batch's effective config widens them
        # (formats/schema_evolution.py).
        columns: Annotated[tuple[tuple[str, str], ...], DERIVED] = ()
        avro_schema: Annotated[str | None, DERIVED] = None  # the reader schema's JSON text
        registry: Annotated[RegistrySettings | None, DERIVED] = None
        # The .avsc files read (reader, then writers): a spark-submit ships them beside the pipeline file.
        schema_files: Annotated[tuple[Path, ...], DERIVED] = ()

        @field_validator("schema", mode="before")
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

        def derived(self) -> ValueConfig:
            """The section with what its keys derive: the columns, and for Avro the reader schema's
            text and DDL, the writer schemas' files and registry, the .avsc files."""
            if self.format == "json" and self.schema:
                return self.model_copy(update={"columns": tuple(parse_ddl(self.schema))})
            if self.format != "avro" or self.schema_file is None:
                return self
            reader = load_schema_file(self.schema_file)
            sr = self.schema_registry
            registry = RegistrySettings(
                url=sr.url if sr else None,
                username=sr.username if sr else None,
                password=sr.password if sr else None,
                timeout_seconds=sr.timeout_seconds if sr else 10.0,
                conn_id=sr.conn_id if sr else None,
                files={i: load_schema_file(path) for i, path in self.writer_schemas.items()},
            )
            ddl = spark_ddl(reader)
            derived = {
                "schema": ddl,
                "columns": tuple(parse_ddl(ddl)),
                "avro_schema": reader,
                "registry": registry,
                "schema_files": (self.schema_file, *self.writer_schemas.values()),
            }
            return self.model_copy(update=derived)


class KeySection(Section):
    """`key:` -- the kafka_key column: raw bytes (default, as before), UTF-8 text, or Avro in the
    Schema Registry wire format decoded into the struct of `schema_file` (formats/avro_key.py).
    The job reads what it derives, in `metadata` (MetadataConfig.key_*)."""

    format: Annotated[str, choice(KEY_FORMATS)] = "raw"
    # avro: the key's reader schema (kafka_key's struct), and writer schemas by id; the rest come
    # from value.schema_registry, which the key shares.
    schema_file: SchemaFile = Field(default=None, validate_default=True)
    writer_schemas: WriterSchemas = Field(default_factory=dict)

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


class MetadataConfig(Section):
    """`metadata:` -- Kafka metadata as columns: the headers (none, a map of key to value bytes, the
    last value of a repeated key winning, or Spark's array of key/value structs) and the timestamp
    type (0 CreateTime, 1 LogAppendTime). The defaults add nothing and keep kafka_key as bytes: the
    columns of a table made before them."""

    headers: Annotated[str, choice(HEADER_SHAPES)] = "none"
    timestamp_type: Annotated[bool, BeforeValidator(check_flag)] = False
    # Derived from `key:` (`with_key`), not keys of this section: the key's format, its reader schema
    # (JSON text; kafka_key is its struct), its writer schemas given as files (JSON text by id; the
    # rest from the value's registry) and those .avsc files (a spark-submit ships them).
    key_format: Annotated[str, DERIVED] = "raw"
    key_schema: Annotated[str | None, DERIVED] = None
    key_writer_schemas: Annotated[Mapping[int, str], DERIVED] = Field(default_factory=dict)
    key_schema_files: Annotated[tuple[Path, ...], DERIVED] = ()

    def with_key(self, key: KeySection) -> MetadataConfig:
        """The section with what `key:` derives."""
        files = (key.schema_file, *key.writer_schemas.values()) if key.schema_file else ()
        derived = {
            "key_format": key.format,
            "key_schema": load_schema_file(key.schema_file) if key.schema_file else None,
            "key_writer_schemas": {i: load_schema_file(path) for i, path in key.writer_schemas.items()},
            "key_schema_files": files,
        }
        return self.model_copy(update=derived)
