"""key.format avro: the Kafka key in the Schema Registry wire format, decoded into the key's reader
schema as the struct column kafka_key.

The key goes through avro_decode's steps for values (frame, the batch's distinct ids, resolve each
once, check it against the reader schema with Avro's rules, from_avro per id); its writer schemas
come from key.writer_schemas, then from the value's schema registry (the key shares it). A null key
gives a null kafka_key. A key not in the wire format, with an unknown or incompatible schema id, or
whose body does not decode sends its record to quarantine with a reason that starts with "key: ";
the quarantine row keeps the key's bytes in raw_key (its kafka_key is null).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from eos_ingest.formats import avro_decode
from eos_ingest.schema import registry as schema_registry
from eos_ingest.schema.avro import record_columns, required_fields
from eos_ingest.schema.columns import KEY_BODY, KEY_DECODED, KEY_ERROR, KEY_ID

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from eos_ingest.config.pipeline import PipelineConfig

log = logging.getLogger(__name__)


def registry(config: PipelineConfig) -> schema_registry.RegistrySettings:
    """Where the key's writer schemas come from: key.writer_schemas, then the value's registry
    (its url, credentials and connection, joined by connections/registry.py), if any."""
    shared = config.value.registry or schema_registry.RegistrySettings()
    return dataclasses.replace(shared, files=dict(config.metadata.key_writer_schemas))


def decode(kafka_rows: DataFrame, config: PipelineConfig) -> DataFrame:
    """`kafka_rows` with the decoded key (KEY_DECODED, a struct of the key's reader schema) and why a
    key did not decode (KEY_ERROR; null for a good or a null key). Resolves the batch's key schema
    ids on the driver (one small Spark job)."""
    reader = config.metadata.key_schema
    assert reader is not None  # config/value.py derives it for key.format avro
    framed = avro_decode.frame(kafka_rows, "key", KEY_ID, KEY_BODY)
    ids = avro_decode.batch_ids(framed, KEY_ID)
    writers = schema_registry.resolve(registry(config), ids)
    checked = avro_decode.check_writers(kafka_rows.sparkSession, writers, reader)
    log.info("avro key: schema ids %s; refused %s", ids, checked.refused)
    columns = record_columns(reader)
    struct = "STRUCT<" + ", ".join(f"`{n}`: {t}" for n, t in columns) + ">"
    decoded = avro_decode.decode(checked.decoders, reader, struct, KEY_ID, KEY_BODY)
    key = F.col("key")
    error = F.when(key.isNull(), F.lit(None)).when(
        F.col(KEY_ID).isNull(),
        F.lit(f"key: not in the Schema Registry wire format ({avro_decode.WIRE_FORMAT})"),
    )
    for schema_id, why in sorted(checked.refused.items()):
        error = error.when(F.col(KEY_ID) == schema_id, F.lit(f"key: {why}"))
    error = error.when(
        avro_decode.failed(KEY_DECODED, columns, required_fields(reader)),
        F.concat(
            F.lit("key: Avro body does not decode with writer schema id "), F.col(KEY_ID).cast("string")
        ),
    )
    with_key = framed.select(*[F.col(c) for c in framed.columns], decoded.alias(KEY_DECODED))
    return with_key.select(*[F.col(c) for c in with_key.columns], error.alias(KEY_ERROR))


def column() -> Column:
    """kafka_key: the decoded struct, null for a null key or one that did not decode."""
    return F.when(F.col(KEY_ERROR).isNull(), F.col(KEY_DECODED))


def raw_key() -> Column:
    """The key's bytes of a record its key sent to quarantine; null otherwise."""
    return F.when(F.col(KEY_ERROR).isNotNull(), F.col("key"))
