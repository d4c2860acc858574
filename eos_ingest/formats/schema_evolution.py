"""value.schema_evolution: what a batch does with a field its schema lacks (docs/formats.md).

* ignore (the default, today's tables): the field is dropped; the records carrying one are counted
  and the batch's log line names the fields.
* add_columns: the field becomes a new nullable column, its type inferred from the batch's values
  (JSON: Spark's JSON schema inference over the values carrying it) or taken from the writer
  schema (Avro); the replace writes it with Delta's mergeSchema. Later batches read the columns
  the table grew: the batch's reader schema is the declared one plus the table's extra columns.
* fail: the batch fails before anything is written, naming the fields and the fix; it stays
  planned, so a rerun after the fix writes it.

A value whose type changed (it does not fit its column's type) goes to quarantine with a reason
naming the field, or fails the batch under `fail`. A column the table has but the reader schema
does not (removed from the YAML, or grown under add_columns while the policy is now another) keeps
its data; the rows a batch writes get null there (Delta fills a column the frame lacks).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from eos_ingest.errors import SchemaEvolutionError
from eos_ingest.formats import parser
from eos_ingest.formats.parser import meta_columns
from eos_ingest.schema.avro import AvroSchemaError, record_columns, spark_ddl
from eos_ingest.schema.columns import INTERNAL_COLUMNS, RESERVED_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eos_ingest.config.pipeline import PipelineConfig
    from eos_ingest.formats.avro_decode import AvroBatch

log = logging.getLogger(__name__)

IGNORE, ADD_COLUMNS, FAIL = "ignore", "add_columns", "fail"
Columns = tuple[tuple[str, str], ...]


def refusal(
    config: PipelineConfig, names: Iterable[str], reasons: Iterable[str], where: str = ""
) -> SchemaEvolutionError:
    """The error of a batch `fail` refuses: the new fields, the changed types, each with its fix."""
    parts = []
    if listed := ", ".join(sorted(set(names))):
        parts.append(
            f"the data carries fields the schema lacks{where}: {listed} (set value.schema_evolution: "
            "add_columns to add them as nullable columns, or add them to value.schema / value.schema_file)"
        )
    if changed := "; ".join(sorted(set(reasons))):
        parts.append(
            f"values whose type changed: {changed} (fix the producer, or set value.schema_evolution: "
            "ignore or add_columns to send such records to quarantine)"
        )
    return SchemaEvolutionError(
        f"pipeline {config.name!r}, value.schema_evolution: fail: {'; and '.join(parts)}; nothing was "
        "written and the batch stays planned: a rerun after the fix writes it"
    )


def is_taken(name: str, taken: Iterable[str]) -> bool:
    """Delta's column names are case-insensitive: a new field `Name` cannot be a column beside `name`."""
    lowered = name.lower()
    return any(lowered == t.lower() for t in taken)


def not_a_column(name: str) -> bool:
    """A field that may never become a payload column: a metadata or internal name."""
    return name.lower() in RESERVED_COLUMNS or name.lower() in {c.lower() for c in INTERNAL_COLUMNS}


def table_extra_columns(spark: SparkSession, config: PipelineConfig) -> Columns:
    """The output table's columns beyond the metadata and the declared payload, as (name, DDL type);
    () when the table does not exist yet. Read from the Delta log on the driver."""
    from delta.tables import DeltaTable

    path = str(config.output_path)
    if not DeltaTable.isDeltaTable(spark, path):
        return ()
    known = [*meta_columns(config), "event_date", "value", *(n for n, _ in config.payload_columns)]
    schema = spark.read.format("delta").load(path).schema
    return tuple((f.name, f.dataType.simpleString()) for f in schema.fields if not is_taken(f.name, known))


def with_columns(config: PipelineConfig, columns: Sequence[tuple[str, str]]) -> PipelineConfig:
    """`config` reading `columns` (the declared ones first) as its payload: the batch's effective
    JSON reader schema, its DDL the declared one plus the extra columns."""
    extra = tuple(columns)[len(config.value.columns) :]
    if not extra:
        return config
    ddl = ", ".join([config.value.schema or "", *(f"`{n}` {t}" for n, t in extra)])
    value = dataclasses.replace(config.value, columns=tuple(columns), schema=ddl)
    return dataclasses.replace(config, value=value)


@dataclasses.dataclass(frozen=True)
class Evolution:
    """The batch's effective config (its payload widened by grown and added columns), the columns
    this batch adds to the table (written with mergeSchema) and, for Avro, the prepared batch."""

    config: PipelineConfig
    added: Columns = ()
    avro: AvroBatch | None = None

    @property
    def merge_schema(self) -> bool:
        return bool(self.added)


def evolve(spark: SparkSession, kafka_rows: DataFrame, config: PipelineConfig) -> Evolution:
    """The batch's reader schema under its policy; under `fail`, SchemaEvolutionError for what the
    driver already sees (Avro writer schemas), before any row is parsed."""
    if config.value.format == "json":
        return evolve_json(spark, kafka_rows, config)
    if config.value.format != "avro":
        return Evolution(config)
    from eos_ingest.formats import avro_decode

    policy = config.value.schema_evolution
    extra = table_extra_columns(spark, config) if policy == ADD_COLUMNS else ()
    batch = avro_decode.prepare(kafka_rows, config, extra)
    if policy == FAIL and (batch.unknown or batch.incompatible):
        ids = ", ".join(str(i) for i in sorted(batch.unknown))
        names = [n for fields in batch.unknown.values() for n in fields]
        reasons = [batch.refused[i] for i in sorted(batch.incompatible)]
        raise refusal(config, names, reasons, f" (writer schema ids {ids})")
    if batch.reader == config.value.avro_schema:
        return Evolution(config, avro=batch)
    columns = tuple(record_columns(batch.reader))
    value = dataclasses.replace(
        config.value, avro_schema=batch.reader, columns=columns, schema=spark_ddl(batch.reader)
    )
    taken = [*(n for n, _ in config.payload_columns), *(n for n, _ in extra)]
    added = tuple((n, t) for n, t in columns if not is_taken(n, taken))
    if added:
        log.info("schema evolution: the batch adds the columns %s", ", ".join(f"{n} {t}" for n, t in added))
    return Evolution(dataclasses.replace(config, value=value), added, batch)


def check_parsed(parsed: DataFrame, split: parser.Split, config: PipelineConfig, batch_id: int) -> list[str]:
    """After the parse, before anything is written: under `fail`, SchemaEvolutionError for fields
    no column reads or values whose type changed; otherwise the dropped fields (logged, counted)."""
    policy = config.value.schema_evolution
    names = parser.unknown_fields(parsed) if split.unknown_fields else []
    if policy == FAIL and (names or split.type_changed):
        reasons = parser.type_changed_reasons(parsed) if split.type_changed else []
        raise refusal(config, names, reasons)
    if names:
        log.warning(
            "batch %s: %s records carry fields the schema does not read, dropped (schema_evolution: %s): %s",
            batch_id, split.unknown_fields, policy, ", ".join(names),
        )  # fmt: skip
    return names


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


def evolve_json(spark: SparkSession, kafka_rows: DataFrame, config: PipelineConfig) -> Evolution:
    """The effective JSON reader schema of a batch. Only add_columns reads the batch here (its
    distinct top-level keys, then a JSON read of the values that carry new ones, for their types);
    ignore and fail learn of unknown fields from the parse itself (parser.unknown_fields)."""
    if config.value.schema_evolution != ADD_COLUMNS:
        return Evolution(config)
    from pyspark.sql import functions as F

    columns = (*config.payload_columns, *table_extra_columns(spark, config))
    known = [*meta_columns(config), "event_date", *(n for n, _ in columns)]
    keys = F.expr("explode(json_object_keys(CAST(value AS STRING)))")
    found = [r[0] for r in kafka_rows.select(keys.alias("k")).distinct().collect()]
    new = sorted({k for k in found if not is_taken(k, known)})
    refused = [k for k in new if not_a_column(k)]
    if refused:
        log.warning("schema evolution: fields %s use a reserved name and are not added (dropped)", refused)
    new = [k for k in new if not not_a_column(k)]
    if not new:
        return Evolution(with_columns(config, columns))
    added = _infer_json_types(spark, kafka_rows, new)
    log.info("schema evolution: the batch adds the columns %s", ", ".join(f"{n} {t}" for n, t in added))
    return Evolution(with_columns(config, (*columns, *added)), added)


def _infer_json_types(spark: SparkSession, kafka_rows: DataFrame, names: list[str]) -> Columns:
    """Spark's JSON schema inference (the one of spark.read.json) over the values that carry one of
    `names`: a number is BIGINT or DOUBLE, text STRING (also a timestamp), an object a STRUCT; a
    field only ever null, or of mixed kinds, is STRING."""
    from pyspark.sql import DataFrame as PyDataFrame
    from pyspark.sql import functions as F

    quoted = ", ".join("'" + n.replace("\\", "\\\\").replace("'", "\\'") + "'" for n in names)
    text = kafka_rows.select(F.col("value").cast("string").alias("value")).where(
        F.expr(f"exists(json_object_keys(value), k -> k IN ({quoted}))")
    )
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    # The JVM's DataFrameReader.json(Dataset[String]): no Python worker, no RDD round trip.
    strings = getattr(text._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
    inferred = PyDataFrame(spark._jsparkSession.read().json(strings), spark).schema
    types = {f.name: f.dataType.simpleString() for f in inferred.fields}
    return tuple((n, types.get(n, "string")) for n in names)
