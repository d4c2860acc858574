"""Spark's from_avro with its options as one map literal: the one place this package builds a Spark
SQL expression itself (a door into Spark's internals, with its exit below).

Why: pyspark's from_avro(data, schema, options) sends the options as create_map(k1, v1, ...). Spark
4.1 keeps that CreateMap as a child of FromAvro and evaluates it each time a copy of the expression
works out its replacement (AvroDataToCatalyst), and a CreateMap evaluates into one map builder that it
keeps. Two threads that plan the batch's query at the same moment (the job's thread and Spark's
listener bus, which serves the observed counts) then put their keys into the same builder, and one
of them fails with DUPLICATED_MAP_KEY (the key `mode`). A CI run lost a batch's write to it. A
literal's map is built once and only read. tests/integration/formats/test_from_avro.py makes the race
happen (4,000 copies of the expression from four threads): with create_map, 9 and 3,331 of them
failed in two runs; with the literal, none.

Exit: go back to pyspark.sql.avro.functions.from_avro once Spark evaluates the options once (at
analysis, as from_json's JsonToStructs does) or CreateMap's evaluation is thread-safe. The test above
tells: in `make test`, test_pysparks_own_from_avro_still_shares_one_map_builder_among_copies fails
once pyspark sends no CreateMap or CreateMap keeps no builder of its own (milliseconds); then
test_pysparks_own_from_avro_still_races (EOS_LONG_TESTS=1, ~50 s) tells whether the race is gone.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from eos_ingest.jvm import jvm_of, python_column


def from_avro(body: Column, writer_schema: str, options: dict[str, str]) -> Column:
    """from_avro(body, writer_schema, options) as Spark's SQL function, its options a literal map."""
    jvm = jvm_of()  # the active session's: the job's
    map_type = jvm.org.apache.spark.sql.types.DataType.fromDDL("map<string,string>")
    values = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(options)
    literal = jvm.org.apache.spark.sql.catalyst.expressions.Literal.create(values, map_type)
    options_column = python_column(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(literal))
    return F.call_function("from_avro", body, F.lit(writer_schema), options_column)
