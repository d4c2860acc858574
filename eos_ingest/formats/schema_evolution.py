"""value.schema_evolution: what a batch does with a field its schema lacks (docs/formats.md).

* ignore (the default, today's tables): the field is dropped; the records carrying one are counted
  and the batch's log line names the fields.
* add_columns: the field becomes a new nullable column, its type inferred from the batch's values
  (JSON: Spark's JSON schema inference over the values carrying it) or taken from the writer
  schema (Avro); the replace writes it with Delta's mergeSchema, or on Iceberg after adding it
  to the table's schema (storage/iceberg/schema.py). Later batches read the columns the table
  grew: the batch's reader schema is the declared one plus the table's extra columns. On Iceberg
  a declared column may also widen (int to bigint, float to double, a decimal's precision:
  evolution_rules.type_change) under add_columns; a narrowing or another type is refused.
* fail: the batch fails before anything is written, naming the fields and the fix; it stays
  planned, so a rerun after the fix writes it.

A value whose type changed (it does not fit its column's type) goes to quarantine with a reason
naming the field, or fails the batch under `fail`. A column the table has but the reader schema
does not (removed from the YAML, or grown under add_columns while the policy is now another) keeps
its data; the rows a batch writes get null there (Delta fills a column the frame lacks).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from eos_ingest.config.checks import replaced
from eos_ingest.errors import SchemaEvolutionError
from eos_ingest.formats import avro_decode, parser
from eos_ingest.formats.evolution_rules import (
    ADD_COLUMNS,
    FAIL,
    REFUSE,
    Columns,
    is_taken,
    not_a_column,
    type_change,
)
from eos_ingest.formats.parser import meta_columns
from eos_ingest.jvm import java_frame, java_session, jvm_of, python_frame
from eos_ingest.schema.avro import record_columns, spark_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from eos_ingest.config.pipeline import PipelineConfig

log = logging.getLogger(__name__)


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


def table_extra_columns(config: PipelineConfig, schema: StructType | None) -> Columns:
    """The output table's columns beyond the metadata and the declared payload, as (name, DDL type);
    () when the table does not exist yet (`schema` None)."""
    if schema is None:
        return ()
    known = [*meta_columns(config), "event_date", "value", *(n for n, _ in config.payload_columns)]
    return tuple((f.name, f.dataType.simpleString()) for f in schema.fields if not is_taken(f.name, known))


def widened_columns(config: PipelineConfig, schema: StructType | None) -> Columns:
    """The declared payload columns whose type Iceberg widens on the table before the batch's
    write (int to bigint, float to double, a decimal's precision: evolution_rules.type_change), as
    (name, declared type). SchemaEvolutionError, before anything is written, for a change Iceberg
    cannot make (a narrowing, another type), or a widening the policy does not allow (only
    add_columns changes the table's schema). Delta's tables: () (their columns keep their type)."""
    if config.output.format != "iceberg" or schema is None:
        return ()
    types = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    table = config.output_tables[0]
    widened: list[tuple[str, str]] = []
    for name, declared in config.payload_columns:
        current = types.get(name.lower())
        change = None if current is None else type_change(current, declared)
        if change is None:
            continue
        assert current is not None
        where = (
            f"pipeline {config.name!r}: column {name} of the Iceberg table {table} is {current} and "
            f"the schema declares {declared}"
        )
        if change == REFUSE:
            raise SchemaEvolutionError(
                f"{where}: Iceberg cannot change a column so (it widens int to bigint, float to double "
                f"and a decimal's precision at the same scale, never narrows); declare `{name} {current}` "
                "in value.schema / value.schema_file (the table's type), or write to a new table; nothing "
                "was written and the batch stays planned: a rerun after the fix writes it"
            )
        if config.value.schema_evolution != ADD_COLUMNS:
            raise SchemaEvolutionError(
                f"{where}: set value.schema_evolution: add_columns to widen the column to {declared} "
                f"(old rows read as {declared}), or declare `{name} {current}`; nothing was written and "
                "the batch stays planned: a rerun after the fix writes it"
            )
        widened.append((name, declared))
    if widened:
        log.info(
            "schema evolution: the batch widens the columns %s", ", ".join(f"{n} to {t}" for n, t in widened)
        )
    return tuple(widened)


def with_columns(config: PipelineConfig, columns: Sequence[tuple[str, str]]) -> PipelineConfig:
    """`config` reading `columns` (the declared ones first) as its payload: the batch's effective
    JSON reader schema, its DDL the declared one plus the extra columns."""
    extra = tuple(columns)[len(config.value.columns) :]
    if not extra:
        return config
    ddl = ", ".join([config.value.schema or "", *(f"`{n}` {t}" for n, t in extra)])
    return replaced(config, value=replaced(config.value, columns=tuple(columns), schema=ddl))


@dataclasses.dataclass(frozen=True)
class Evolution:
    """The batch's effective config (its payload widened by grown and added columns), the columns
    this batch adds to the table (written with mergeSchema) and, for Avro, the prepared batch."""

    config: PipelineConfig
    added: Columns = ()
    avro: avro_decode.AvroBatch | None = None
    # Declared columns whose type the write widens on the table (Iceberg only: widened_columns).
    widened: Columns = ()

    @property
    def merge_schema(self) -> bool:
        """The write may change the table's schema: add `added`, widen `widened`."""
        return bool(self.added or self.widened)


def evolve(
    spark: SparkSession,
    kafka_rows: DataFrame,
    config: PipelineConfig,
    table_schema: Callable[[], StructType | None],
) -> Evolution:
    """The batch's reader schema under its policy; under `fail`, SchemaEvolutionError for what the
    driver already sees (Avro writer schemas), before any row is parsed. `table_schema` reads the
    output table's schema (TableFormat.table_schema, None before the first write); it is read only
    under add_columns, or on Iceberg, whose declared column types are checked against the table's."""
    policy = config.value.schema_evolution
    schema = table_schema() if policy == ADD_COLUMNS or config.output.format == "iceberg" else None
    widened = widened_columns(config, schema)
    extra = table_extra_columns(config, schema) if policy == ADD_COLUMNS else ()
    return dataclasses.replace(_evolve(spark, kafka_rows, config, extra), widened=widened)


def _evolve(spark: SparkSession, kafka_rows: DataFrame, config: PipelineConfig, extra: Columns) -> Evolution:
    if config.value.format == "json":
        return evolve_json(spark, kafka_rows, config, extra)
    if config.value.format != "avro":
        return Evolution(config)
    policy = config.value.schema_evolution
    batch = avro_decode.prepare(kafka_rows, config, extra)
    if policy == FAIL and (batch.unknown or batch.incompatible):
        ids = ", ".join(str(i) for i in sorted(batch.unknown))
        names = [n for fields in batch.unknown.values() for n in fields]
        reasons = [batch.refused[i] for i in sorted(batch.incompatible)]
        raise refusal(config, names, reasons, f" (writer schema ids {ids})")
    if batch.reader == config.value.avro_schema:
        return Evolution(config, avro=batch)
    columns = tuple(record_columns(batch.reader))
    value = replaced(config.value, avro_schema=batch.reader, columns=columns, schema=spark_ddl(batch.reader))
    taken = [*(n for n, _ in config.payload_columns), *(n for n, _ in extra)]
    added = tuple((n, t) for n, t in columns if not is_taken(n, taken))
    if added:
        log.info("schema evolution: the batch adds the columns %s", ", ".join(f"{n} {t}" for n, t in added))
    return Evolution(replaced(config, value=value), added, batch)


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


def evolve_json(
    spark: SparkSession, kafka_rows: DataFrame, config: PipelineConfig, extra: Columns = ()
) -> Evolution:
    """The effective JSON reader schema of a batch. Only add_columns reads the batch here (its
    distinct top-level keys, then a JSON read of the values that carry new ones, for their types),
    beside `extra`, the columns the table grew; ignore and fail learn of unknown fields from the parse itself (parser.unknown_fields)."""
    if config.value.schema_evolution != ADD_COLUMNS:
        return Evolution(config)
    columns = (*config.payload_columns, *extra)
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
    quoted = ", ".join("'" + n.replace("\\", "\\\\").replace("'", "\\'") + "'" for n in names)
    text = kafka_rows.select(F.col("value").cast("string").alias("value")).where(
        F.expr(f"exists(json_object_keys(value), k -> k IN ({quoted}))")
    )
    jvm = jvm_of(spark)
    # The JVM's DataFrameReader.json(Dataset[String]): no Python worker, no RDD round trip.
    strings = getattr(java_frame(text), "as")(jvm.org.apache.spark.sql.Encoders.STRING())
    inferred = python_frame(java_session(spark).read().json(strings), spark).schema
    types = {f.name: f.dataType.simpleString() for f in inferred.fields}
    return tuple((n, types.get(n, "string")) for n in names)
