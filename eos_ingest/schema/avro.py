"""Avro schemas of a pipeline, read without Spark: the reader schema's table columns (Spark DDL).

The mapping is Spark's own (spark-avro's SchemaConverters), so the columns the config announces
are the columns from_avro yields: a record field is a column; ["null", T] is a nullable T; enum is
STRING; bytes and fixed are BINARY (DECIMAL with the decimal logical type); date is DATE;
timestamp-millis/micros is TIMESTAMP and local-timestamp-* TIMESTAMP_NTZ; a union of several
non-null types is a STRUCT of member0, member1, ... Spark parses the schema again in the job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_PRIMITIVE = {"boolean": "BOOLEAN", "int": "INT", "long": "BIGINT", "float": "FLOAT",
              "double": "DOUBLE", "bytes": "BINARY", "string": "STRING"}  # fmt: skip
_TIMESTAMPS = {"timestamp-millis": "TIMESTAMP", "timestamp-micros": "TIMESTAMP",
               "local-timestamp-millis": "TIMESTAMP_NTZ", "local-timestamp-micros": "TIMESTAMP_NTZ"}  # fmt: skip


class AvroSchemaError(ValueError):
    """The text is not an Avro schema this project can read: says what and where."""


def load_schema_file(path: Path) -> str:
    """The JSON text of an .avsc file, checked to be a record schema; AvroSchemaError says why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise AvroSchemaError(f"cannot read {path} ({e.strerror})") from None
    record_columns(text)
    return text


def parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise AvroSchemaError(f"not JSON: {e}") from None


def record_columns(text: str) -> list[tuple[str, str]]:
    """(name, Spark DDL type) of each field of a record schema, in order."""
    schema = parse(text)
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        raise AvroSchemaError(
            'the schema must be an Avro record: {"type": "record", "name": ..., "fields": [...]}'
        )
    return _fields(schema, {}, "")


def required_fields(text: str) -> list[str]:
    """The record's fields that cannot be null (their type is no union with null)."""
    fields = parse(text).get("fields", [])
    return [f["name"] for f in fields if not (isinstance(f["type"], list) and "null" in f["type"])]


def spark_ddl(text: str) -> str:
    """The reader schema's columns as one Spark DDL string, e.g. "`id` BIGINT, `name` STRING"."""
    return ", ".join(f"`{name}` {ddl}" for name, ddl in record_columns(text))


def _fields(record: dict[str, Any], named: dict[str, str], where: str) -> list[tuple[str, str]]:
    name = record.get("name")
    if not isinstance(name, str) or not name:
        raise AvroSchemaError(f"{where or 'the record'} has no name")
    fields = record.get("fields")
    if not isinstance(fields, list):
        raise AvroSchemaError(f"record {name!r} has no list of fields")
    named[name] = "STRUCT<>"  # a recursive reference ends here: Spark refuses it, so does the job
    if "." not in name and record.get("namespace"):
        named[f"{record['namespace']}.{name}"] = "STRUCT<>"
    out = []
    for i, field in enumerate(fields):
        if not (isinstance(field, dict) and isinstance(field.get("name"), str) and "type" in field):
            raise AvroSchemaError(f"record {name!r}: field {i} needs a name and a type")
        out.append((field["name"], _type(field["type"], named, f"{name}.{field['name']}")))
    ddl = "STRUCT<" + ", ".join(f"`{n}`: {t}" for n, t in out) + ">"
    named[name] = ddl
    if "." not in name and record.get("namespace"):
        named[f"{record['namespace']}.{name}"] = ddl
    return out


def _type(schema: Any, named: dict[str, str], where: str) -> str:
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema]
        if schema in named:
            return named[schema]
        raise AvroSchemaError(
            f"{where}: unknown type {schema!r} (a primitive, or a named type defined before)"
        )
    if isinstance(schema, list):
        members = [m for m in schema if m != "null"]
        if not members:
            raise AvroSchemaError(f"{where}: a union needs a type besides null")
        types = [_type(m, named, where) for m in members]
        if len(types) == 1:
            return types[0]
        if set(types) <= {"INT", "BIGINT"}:
            return "BIGINT"
        if set(types) <= {"FLOAT", "DOUBLE"}:
            return "DOUBLE"
        return "STRUCT<" + ", ".join(f"`member{i}`: {t}" for i, t in enumerate(types)) + ">"
    if not isinstance(schema, dict) or "type" not in schema:
        raise AvroSchemaError(f"{where}: {schema!r} is not an Avro type")
    kind, logical = schema["type"], schema.get("logicalType")
    if kind == "record":
        _fields(schema, named, where)
        return named[schema["name"]]
    if kind == "enum":
        named[str(schema.get("name"))] = "STRING"
        return "STRING"
    if kind == "fixed":
        ddl = _decimal(schema, where) if logical == "decimal" else "BINARY"
        named[str(schema.get("name"))] = ddl
        return ddl
    if kind == "array":
        return f"ARRAY<{_type(schema.get('items'), named, where + '[]')}>"
    if kind == "map":
        return f"MAP<STRING, {_type(schema.get('values'), named, where + '{}')}>"
    if logical == "decimal" and kind == "bytes":
        return _decimal(schema, where)
    if logical == "date" and kind == "int":
        return "DATE"
    if logical in _TIMESTAMPS and kind == "long":
        return _TIMESTAMPS[logical]
    return _type(kind, named, where)


def _decimal(schema: dict[str, Any], where: str) -> str:
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not (
        isinstance(precision, int)
        and isinstance(scale, int)
        and 0 < precision <= 38
        and 0 <= scale <= precision
    ):
        raise AvroSchemaError(f"{where}: a decimal needs 1 <= precision <= 38 and 0 <= scale <= precision")
    return f"DECIMAL({precision},{scale})"
