"""Avro values in the Schema Registry wire format, decoded with Spark's from_avro into the reader schema.

A value is the magic byte 0, a 4-byte big-endian schema id, then the Avro body written with that
writer schema. The job collects the distinct ids of the batch (one small Spark job), resolves
each once on the driver (schema/registry.py), checks each writer against the pipeline's reader
schema with Avro's own resolution rules (org.apache.avro.SchemaCompatibility, on Spark's JVM),
and decodes every row with its writer schema and the reader schema
(from_avro(body, writer, {"avroSchema": reader})), one CASE branch per id. A row whose value is
not in the wire format, whose id is unknown or incompatible, or whose body does not decode
(PERMISSIVE mode gives null) gets the reason in the error column: formats/parser.py sends it to
quarantine, so nothing is dropped. The key of key.format avro goes through the same steps
(frame, batch_ids, check_writers, decode, failed), from formats/avro_key.py.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from eos_ingest.formats.evolution_rules import Columns, avro_reader
from eos_ingest.formats.from_avro import from_avro
from eos_ingest.jvm import jvm_of
from eos_ingest.schema import registry as schema_registry
from eos_ingest.schema.avro import required_fields

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from eos_ingest.config.pipeline import PipelineConfig

log = logging.getLogger(__name__)

_ID = "_eos_schema_id"
_DECODED = "_eos_decoded"
_BODY = "_eos_body"
WIRE_FORMAT = "magic byte 0, a 4-byte schema id, then the Avro body"


def compatibility(spark: SparkSession, writer: str, reader: str) -> str | None:
    """None when `reader` can read what `writer` wrote (Avro's resolution rules); else why not."""
    avro = jvm_of(spark).org.apache.avro
    try:
        writer_schema = avro.Schema.Parser().parse(writer)
        reader_schema = avro.Schema.Parser().parse(reader)
    except Exception as e:  # py4j's error wraps the parser's SchemaParseException
        return f"the writer schema is not a valid Avro schema: {str(e).splitlines()[0]}"
    result = avro.SchemaCompatibility.checkReaderWriterCompatibility(reader_schema, writer_schema)
    if result.getType().toString() == "COMPATIBLE":
        return None
    problems = [f"{i.getMessage()} at {i.getLocation()}" for i in result.getResult().getIncompatibilities()]
    return "; ".join(problems) or str(result.getDescription())


@dataclass(frozen=True)
class AvroBatch:
    """A batch's values framed (schema id and body split off), its writer schemas checked against
    the batch's reader schema (the declared one, widened under add_columns), ready to decode."""

    framed: DataFrame
    reader: str
    decoders: list[tuple[int, str]]
    # id -> quarantine reason: unknown ids and writers the reader cannot read
    refused: dict[int, str]
    # id -> the ids' top-level fields the reader does not read (dropped; counted)
    unknown: dict[int, list[str]]
    # id -> the reader's fields whose type the writer changed (the reasons name them)
    incompatible: dict[int, list[str]] = field(default_factory=dict)


def frame(rows: DataFrame, column: str, id_column: str, body_column: str) -> DataFrame:
    """`rows` with the schema id and the Avro body of `column` split off: both null where the
    column is not in the wire format (null, shorter than 5 bytes, or no magic byte 0)."""
    data = F.col(column)
    framed_ok = data.isNotNull() & (F.length(data) >= 5) & (F.hex(F.substring(data, 1, 1)) == "00")
    return rows.select(
        *[F.col(c) for c in rows.columns],
        F.when(framed_ok, F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("bigint")).alias(id_column),
        F.when(framed_ok, F.expr(f"substring(`{column}`, 6)")).alias(body_column),
    )


def batch_ids(framed: DataFrame, id_column: str) -> list[int]:
    """The distinct schema ids of a framed batch: one pass, a handful of values."""
    found = framed.where(F.col(id_column).isNotNull()).select(id_column).distinct().collect()
    return sorted(int(r[0]) for r in found)


@dataclass(frozen=True)
class Checked:
    """The writers of a batch checked against one reader schema: the ids that decode (with their
    writer schema), and the refused ids with their quarantine reason and the fields named in it."""

    decoders: list[tuple[int, str]]
    refused: dict[int, str]
    incompatible: dict[int, list[str]]


def check_writers(
    spark: SparkSession,
    writers: dict[int, str | None],
    reader: str,
    changed: dict[int, list[str]] | None = None,
) -> Checked:
    """Each resolved writer (None: an unknown id) checked against `reader` with Avro's rules;
    `changed` adds, per id, fields whose type differs from the table's column (schema evolution)."""
    refused: dict[int, str] = {}
    incompatible: dict[int, list[str]] = {}
    decoders: list[tuple[int, str]] = []
    for schema_id, writer in writers.items():
        if writer is None:
            refused[schema_id] = f"unknown schema id {schema_id}: no writer schema for it"
            continue
        why = compatibility(spark, writer, reader)
        fields = (changed or {}).get(schema_id, [])
        if why is None and not fields:
            decoders.append((schema_id, writer))
            continue
        fields = fields or _fields_at(reader, why or "")
        incompatible[schema_id] = fields
        named = f" (field {', '.join(fields)})" if fields else ""
        reason = why or "its type differs from the table's column"
        refused[schema_id] = (
            f"writer schema id {schema_id} is incompatible with the reader schema: {reason}{named}"
        )
    return Checked(decoders, refused, incompatible)


def prepare(kafka_rows: DataFrame, config: PipelineConfig, table_extra: Columns) -> AvroBatch:
    """Frame the values, resolve the batch's writer schemas (once per id) and check each against
    the batch's reader schema (evolution_rules.avro_reader: under add_columns the writers' new
    fields and the table's grown columns join it)."""
    declared = config.value.avro_schema
    registry = config.value.registry
    assert declared is not None and registry is not None  # config/value.py derives both for avro
    framed = frame(kafka_rows, "value", _ID, _BODY)
    ids = batch_ids(framed, _ID)
    writers = schema_registry.resolve(registry, ids)
    known = {i: w for i, w in writers.items() if w is not None}
    reader, unknown, changed = avro_reader(config, known, table_extra)
    checked = check_writers(kafka_rows.sparkSession, writers, reader, changed)
    log.info(
        "avro: schema ids %s; decoding %s; refused %s", ids, [i for i, _ in checked.decoders], checked.refused
    )
    return AvroBatch(framed, reader, checked.decoders, checked.refused, unknown, checked.incompatible)


def _fields_at(reader: str, why: str) -> list[str]:
    """The reader's top-level fields Avro's reasons point at (locations /fields/<n>/...)."""
    fields = json.loads(reader).get("fields", [])
    at = sorted({int(n) for n in re.findall(r"/fields/(\d+)", why)})
    return [fields[n]["name"] for n in at if n < len(fields)]


def parse(
    batch: AvroBatch,
    config: PipelineConfig,
    meta: list[Column],
    error_column: str,
    unknown_column: str,
    first_error: Column | None = None,
) -> DataFrame:
    """The output columns of the batch's reader schema, `raw_value`, `error_column` and
    `unknown_column` (see parser.parse). `config` is the batch's (schema_evolution.Evolution);
    `first_error`, when not null, is a row's reason before its value's (the key's, formats/avro_key.py)."""
    framed, value = batch.framed, F.col("value")
    struct = "STRUCT<" + ", ".join(f"`{n}`: {t}" for n, t in config.payload_columns) + ">"
    decoded = decode(batch.decoders, batch.reader, struct, _ID, _BODY)

    error = F.when(value.isNull(), F.lit("null value (tombstone): an Avro value was expected")).when(
        F.col(_ID).isNull(), F.lit(f"value is not in the Schema Registry wire format ({WIRE_FORMAT})")
    )
    for schema_id, why in sorted(batch.refused.items()):
        error = error.when(F.col(_ID) == schema_id, F.lit(why))
    error = error.when(
        failed(_DECODED, config.payload_columns, required_fields(batch.reader)),
        F.concat(F.lit("Avro body does not decode with writer schema id "), F.col(_ID).cast("string")),
    )
    if first_error is not None:
        error = F.coalesce(first_error, error)  # coalesce stops at the first non-null
    unknown = F.lit(None).cast("array<string>")
    for schema_id, names in sorted(batch.unknown.items()):
        unknown = F.when(F.col(_ID) == schema_id, F.array(*[F.lit(n) for n in names])).otherwise(unknown)
    payload_names = [name for name, _ in config.payload_columns]
    return framed.select(*[F.col(c) for c in framed.columns], decoded.alias(_DECODED)).select(
        *meta,
        *[F.col(f"{_DECODED}.`{name}`").alias(name) for name in payload_names],
        F.when(error.isNotNull(), value).alias("raw_value"),
        error.alias(error_column),
        F.when(error.isNull(), unknown).alias(unknown_column),
    )


def failed(decoded: str, columns: list[tuple[str, str]], required: list[str]) -> Column:
    """True where from_avro did not decode: in PERMISSIVE mode it then gives a struct whose every
    field is null. A field the reader schema says cannot be null tells it apart from a record
    that decoded; a reader whose fields are all nullable cannot, and an all-null record counts
    as not decoded (docs/formats.md)."""
    names = required or [n for n, _ in columns]
    nulls = [F.col(f"{decoded}.`{n}`").isNull() for n in names]
    return F.col(decoded).isNull() | functools.reduce(operator.or_ if required else operator.and_, nulls)


def decode(
    decoders: list[tuple[int, str]], reader: str, struct: str, id_column: str, body_column: str
) -> Column:
    """CASE schema_id WHEN <id> THEN from_avro(body, <writer>, reader) ... END: only the branch
    of a row's id runs; an id without a decoder gives null, settled by the error column first.
    PERMISSIVE: a body that does not decode gives null instead of failing the job."""
    options = {"avroSchema": reader, "mode": "PERMISSIVE"}
    if not decoders:
        return F.lit(None).cast(struct)  # typed, so the payload columns still resolve
    (first_id, first), *rest = decoders
    case = F.when(F.col(id_column) == first_id, from_avro(F.col(body_column), first, options))
    for schema_id, writer in rest:
        case = case.when(F.col(id_column) == schema_id, from_avro(F.col(body_column), writer, options))
    return case
