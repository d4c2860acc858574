"""value.schema_evolution's rules, without Spark: the policies, which names may become columns,
and the Avro reader schema of a batch (the declared one, widened under add_columns).

Apart from formats/schema_evolution.py so that formats/avro_decode.py (which builds a batch's reader with
avro_reader) and formats/schema_evolution.py (which prepares a batch with avro_decode) do not import
each other: both import these rules, and schema_evolution imports avro_decode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eos_ingest.schema.avro import AvroSchemaError, record_columns
from eos_ingest.schema.columns import INTERNAL_COLUMNS, RESERVED_COLUMNS

if TYPE_CHECKING:
    from eos_ingest.config.pipeline import PipelineConfig

IGNORE, ADD_COLUMNS, FAIL = "ignore", "add_columns", "fail"
Columns = tuple[tuple[str, str], ...]


def is_taken(name: str, taken: Iterable[str]) -> bool:
    """Delta's column names are case-insensitive: a new field `Name` cannot be a column beside `name`."""
    lowered = name.lower()
    return any(lowered == t.lower() for t in taken)


def not_a_column(name: str) -> bool:
    """A field that may never become a payload column: a metadata or internal name."""
    return name.lower() in RESERVED_COLUMNS or name.lower() in {c.lower() for c in INTERNAL_COLUMNS}


def _nullable(avro_type: Any) -> Any:
    """The type as a union whose first branch is null, so the field may default to null."""
    members = avro_type if isinstance(avro_type, list) else [avro_type]
    return ["null", *(m for m in members if m != "null")]


def _norm(ddl: str) -> str:
    return ddl.lower().replace("`", "").replace(" ", "")


def _ddl_of(avro_type: Any) -> str | None:
    """Spark's type of an Avro field type; None when it cannot stand alone (a named type the
    writer defines elsewhere)."""
    probe = {"type": "record", "name": "_eos_probe", "fields": [{"name": "f", "type": avro_type}]}
    try:
        return record_columns(json.dumps(probe))[0][1]
    except AvroSchemaError:
        return None


def avro_reader(
    config: PipelineConfig, writers: dict[int, str], table_extra: Columns
) -> tuple[str, dict[int, list[str]], dict[int, list[str]]]:
    """The batch's Avro reader schema (JSON text), and per writer id: its top-level fields the
    reader does not read (dropped, counted), and its fields whose type is not the table's column's.

    Under add_columns a writer field the declared reader lacks joins the reader as a nullable
    field with default null (so every other writer reads null there), in the order of the ids;
    a field the table already grew must keep the table's type, else the writer is refused."""
    declared = config.value.avro_schema
    assert declared is not None
    reader = json.loads(declared)
    fields: list[dict[str, Any]] = list(reader.get("fields", []))
    table_types = {n.lower(): t for n, t in table_extra}
    changed: dict[int, list[str]] = {}
    parsed = {i: json.loads(w) for i, w in sorted(writers.items())}
    if config.value.schema_evolution == ADD_COLUMNS:
        for schema_id, writer in parsed.items():
            for f in writer.get("fields", []) if isinstance(writer, dict) else []:
                name = f.get("name")
                if (
                    not isinstance(name, str)
                    or not_a_column(name)
                    or is_taken(name, [g["name"] for g in fields])
                ):
                    continue
                ddl = _ddl_of(f.get("type"))
                if ddl is None:
                    continue
                if name.lower() in table_types and _norm(ddl) != _norm(table_types[name.lower()]):
                    changed.setdefault(schema_id, []).append(name)
                    continue
                fields.append({"name": name, "type": _nullable(f["type"]), "default": None})
    text = (
        declared if len(fields) == len(reader.get("fields", [])) else json.dumps({**reader, "fields": fields})
    )
    read = [g["name"] for g in fields]
    unknown: dict[int, list[str]] = {}
    for schema_id, writer in parsed.items():
        extra = [
            f["name"]
            for f in (writer.get("fields", []) if isinstance(writer, dict) else [])
            # Avro resolves fields by exact name: a writer's `Name` is not read into `name`.
            if isinstance(f.get("name"), str) and f["name"] not in read
        ]
        if extra and schema_id not in changed:
            unknown[schema_id] = extra
    return text, unknown, changed


# A column's type change Iceberg's schema evolution makes (its type promotions); Delta's tables
# here take none (their columns keep their type).
WIDEN, REFUSE = "widen", "refuse"
_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float",
            "dec": "decimal", "numeric": "decimal"}  # fmt: skip
_PRIMITIVE = {"tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "string", "boolean",
              "date", "timestamp", "timestamp_ntz", "binary"}  # fmt: skip
_DECIMAL = r"decimal\((\d+),(\d+)\)"


def _primitive(ddl: str) -> str | None:
    """A primitive type spelled canonically (`bigint`, `decimal(10,2)`), None for another type.
    The first word (and a decimal's parameters) only: `BIGINT NOT NULL` is `bigint`."""
    text = ddl.strip().lower()
    found = re.match(r"([a-z_]+)\s*(\(\s*\d+\s*(?:,\s*\d+\s*)?\))?", text)
    if not found:
        return None
    base = _ALIASES.get(found[1], found[1])
    if base not in _PRIMITIVE:
        return None
    if base != "decimal":
        return base
    params = (found[2] or "(10,0)").strip("()").replace(" ", "").split(",")  # Spark's DECIMAL is (10,0)
    return f"decimal({params[0]},{params[1] if len(params) > 1 else 0})"


def type_change(table_type: str, declared: str) -> str | None:
    """What it takes for a column of `table_type` to hold `declared` values: None (the same type,
    or not a primitive type: Spark's write decides), WIDEN (Iceberg promotes int to bigint, float
    to double, a decimal's precision up at the same scale: old rows read as the wider type), or
    REFUSE (a narrowing or another type: no table format here rewrites a column's old values)."""
    old, new = _primitive(table_type), _primitive(declared)
    if old is None or new is None or old == new:
        return None
    if (old, new) in {("int", "bigint"), ("float", "double")}:
        return WIDEN
    old_dec, new_dec = re.fullmatch(_DECIMAL, old), re.fullmatch(_DECIMAL, new)
    if old_dec and new_dec and old_dec[2] == new_dec[2] and int(new_dec[1]) > int(old_dec[1]):
        return WIDEN
    return REFUSE
