"""Turn Kafka rows into output rows, and values that do not parse into quarantine rows.

Nothing is dropped: every row read lands in exactly one of the two frames, so
read = written + quarantined holds by construction and is checked again before commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from eos_ingest.config import PipelineConfig

# Identity first: Delta keeps min/max statistics for the leading columns, and a replace of a
# range prunes files with them.
IDENTITY_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset")
META_COLUMNS = (*IDENTITY_COLUMNS, "kafka_timestamp", "kafka_key", "batch_id")
QUARANTINE_COLUMNS = (*META_COLUMNS, "raw_value", "error")
_CORRUPT = "_eos_corrupt_record"
_ERROR = "_eos_error"
# Columns parse() adds next to the payload: a payload column of the same name breaks the job, so
# config.py refuses them (Spark names are case-insensitive).
INTERNAL_COLUMNS = ("raw_value", _ERROR, _CORRUPT)


def meta_columns(config: PipelineConfig) -> tuple[str, ...]:
    """META_COLUMNS, then the optional metadata columns the pipeline asks for (config.metadata)."""
    extra = ("kafka_headers",) if config.metadata.headers != "none" else ()
    return (*META_COLUMNS, *extra, *(("kafka_timestamp_type",) if config.metadata.timestamp_type else ()))


# Keeps the last header of each key: a later element with the same key drops an earlier one, so
# map_from_entries never sees a duplicate (Spark refuses duplicate map keys by default).
_LAST_HEADER_WINS = (
    "map_from_entries(filter(headers, (h, i) -> NOT exists(slice(headers, i + 2, size(headers)), "
    "x -> x.key = h.key)))"
)


def _meta(batch_id: int, config: PipelineConfig) -> list[Column]:
    from pyspark.sql import functions as F

    key = F.col("key").cast("string") if config.metadata.key_format == "string" else F.col("key")
    columns = [
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        key.alias("kafka_key"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
    ]
    if config.metadata.headers == "array":
        columns.append(F.col("headers").alias("kafka_headers"))
    elif config.metadata.headers == "map":
        columns.append(F.expr(_LAST_HEADER_WINS).alias("kafka_headers"))
    if config.metadata.timestamp_type:
        columns.append(F.col("timestampType").alias("kafka_timestamp_type"))
    return columns


def parse(kafka_rows: DataFrame, config: PipelineConfig, batch_id: int) -> DataFrame:
    """One frame with the output columns plus `_eos_error` and `raw_value` (both null for good rows)."""
    from pyspark.sql import functions as F

    payload_names = [name for name, _ in config.payload_columns]
    if config.value.format == "raw":
        return kafka_rows.select(
            *_meta(batch_id, config),
            F.col("value").alias("value"),
            F.lit(None).cast("binary").alias("raw_value"),  # only a quarantined row keeps it
            F.lit(None).cast("string").alias(_ERROR),
        )
    if config.value.format == "avro":
        from eos_ingest import avro_decode

        return avro_decode.parse(kafka_rows, config, _meta(batch_id, config), _ERROR)
    ddl = f"{config.value.schema}, {_CORRUPT} STRING"
    text = F.col("value").cast("string")
    parsed = F.from_json(text, ddl, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    # A row that parsed is settled first: CASE WHEN stops there, so get_json_object (a second
    # parse of the whole value, re-serialized) runs only for the few rows that did not parse.
    error = (
        F.when(F.col("value").isNull(), F.lit("null value (tombstone): a JSON value was expected"))
        .when(F.col("_parsed").isNotNull() & F.col(f"_parsed.{_CORRUPT}").isNull(), F.lit(None))
        .when(F.get_json_object(text, "$").isNull(), F.lit("value is not valid JSON"))
        .otherwise(F.lit(f"value does not match the declared schema: {config.value.schema}"))
    )
    return kafka_rows.select(*[F.col(c) for c in kafka_rows.columns], parsed.alias("_parsed")).select(
        *_meta(batch_id, config),
        *[F.col(f"_parsed.{name}").alias(name) for name in payload_names],
        # Only a quarantined row keeps its raw value: the job caches this frame, and the raw bytes
        # of every good row would double what the cache holds (and what building it costs).
        F.when(error.isNotNull(), F.col("value")).alias("raw_value"),
        error.alias(_ERROR),
    )


def output_rows(parsed: DataFrame, config: PipelineConfig) -> DataFrame:
    """Rows that parsed, in the table's column order, with event_date from the Kafka timestamp (UTC)."""
    from pyspark.sql import functions as F

    payload = ["value"] if config.value.format == "raw" else [n for n, _ in config.payload_columns]
    return parsed.where(F.col(_ERROR).isNull()).select(
        *meta_columns(config), *payload, F.to_date(F.col("kafka_timestamp")).alias("event_date")
    )


def quarantine_rows(parsed: DataFrame, config: PipelineConfig) -> DataFrame:
    """Rows that did not parse: identity, key, metadata and raw value, and why."""
    from pyspark.sql import functions as F

    return parsed.where(F.col(_ERROR).isNotNull()).select(
        *meta_columns(config), "raw_value", F.col(_ERROR).alias("error")
    )


def count_split(parsed: DataFrame) -> tuple[int, int]:
    """(good, quarantined) in one pass over the parsed frame."""
    from pyspark.sql import functions as F

    row = parsed.agg(
        F.count(F.when(F.col(_ERROR).isNull(), 1)).alias("good"),
        F.count(F.when(F.col(_ERROR).isNotNull(), 1)).alias("bad"),
    ).first()
    assert row is not None  # an aggregate without grouping always yields one row
    return int(row["good"]), int(row["bad"])
