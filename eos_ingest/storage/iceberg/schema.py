"""An Iceberg table's schema evolution for a batch's write: the columns the batch adds, the declared
columns it widens (formats/schema_evolution.py decides which, and refuses what Iceberg cannot do),
applied with Iceberg's UpdateSchema before the batch's branch is cut.

Iceberg's schema is the table's, not a branch's: a snapshot records the schema id it was written
with, but a branch and main are read with the table's current schema. So the change cannot wait
for the publish (a write to the branch needs the new column in the table's schema first), and it
reaches main's readers at once: until the batch publishes, main shows the new column null on every
row (a widened column: the old values, read as the wider type). A batch that crashes after the
change and before its publish leaves exactly that: a table with an extra nullable column (or a
wider type) and main's rows unchanged. The rerun finds the column in the table, reads it as one of
the table's grown columns and writes it; nothing else depends on which attempt changed the schema.
Adding or widening is all it does: nothing is dropped, renamed or narrowed, so an older writer's
rows (without the column) still append.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from eos_ingest.jvm import java_session, jvm_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Tries of the schema update when a concurrent commit (another attempt's same change, a publish)
# lands between its read and its commit: each try reads the table anew and does what is left.
SCHEMA_ATTEMPTS = 3


def spark_schema(spark: SparkSession, table: Any) -> StructType:
    """The table's current schema (an org.apache.iceberg.Table's) as Spark reads it."""
    converted = jvm_of(spark).org.apache.iceberg.spark.SparkSchemaUtil.convert(table.schema())
    return StructType.fromJson(json.loads(converted.json()))


def evolve_table(spark: SparkSession, table: Any, rows: DataFrame) -> list[str]:
    """Make the table's schema take `rows`: a column of `rows` the table lacks is added (nullable,
    last), a column whose type differs is updated to the rows' type, which Iceberg allows only as a
    widening (IllegalArgumentException otherwise; schema_evolution refused those before any write).
    Names match case-insensitively, as Spark resolves them. Returns what changed, e.g.
    ["add coupon string", "widen amount to double"]."""
    util = jvm_of(spark).org.apache.iceberg.spark.SparkSchemaUtil
    from_json = java_session(spark).parseDataType  # a JVM DataType from its JSON (as pyspark's UDFs)
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        table.refresh()
        schema = table.schema()
        update = table.updateSchema().caseSensitive(False)
        changes = []
        for field in rows.schema.fields:
            wanted = util.convert(from_json(field.dataType.json()))
            current = schema.caseInsensitiveFindField(field.name)
            if current is None:
                update = update.addColumn(field.name, wanted)
                changes.append(f"add {field.name} {field.dataType.simpleString()}")
            elif wanted.isPrimitiveType() and not current.type().equals(wanted):
                update = update.updateColumn(current.name(), wanted.asPrimitiveType())
                changes.append(f"widen {current.name()} to {field.dataType.simpleString()}")
        if not changes:
            return []
        try:
            update.commit()
            log.info("schema of %s: %s", table.name(), ", ".join(changes))
            return changes
        except Exception as exc:
            if attempt == SCHEMA_ATTEMPTS or "CommitFailedException" not in _java_text(exc):
                raise
            log.warning("schema update of %s lost to a concurrent commit; reading it anew", table.name())
    return []


def fill_missing(rows: DataFrame, schema: StructType) -> DataFrame:
    """`rows` with a null column for each column of the table's `schema` they lack (a column the
    table grew that this batch does not read), so the append names every column of the table."""
    have = {name.lower() for name in rows.columns}
    missing = [f for f in schema.fields if f.name.lower() not in have]
    if not missing:
        return rows
    return rows.select("*", *(F.lit(None).cast(f.dataType).alias(f.name) for f in missing))


def _java_text(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    try:
        return str(java.toString()) if java is not None else f"{type(exc).__name__}: {exc}"
    except Exception:
        return str(exc)
