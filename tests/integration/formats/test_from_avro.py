"""The Avro decode column stays whole while several threads plan it at once.

Spark plans one query from more than one thread: the job's, and the listener bus's (the observed
counts). Each copy of a FromAvro expression works out its replacement and evaluates its options
then. With pyspark's from_avro the options are a create_map that shares one map builder among the
copies, and threads that evaluate it together fail with DUPLICATED_MAP_KEY: a CI run lost a batch's
write to it. formats/from_avro.py makes them a literal; pyspark's own from_avro still races (the
door's exit). Real Spark, the session's spark-avro jar.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from eos_ingest.formats import avro_decode
from eos_ingest.jvm import java_frame

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "amount", "type": "double", "default": -1.0}]}
THREADS = 4
# With create_map, 9 and 3,331 of the 4,000 copies failed in two runs (8 of 1,000 with 250 a
# thread); none with the literal.
COPIES_PER_THREAD = 1000
# Rounds of THREADS * COPIES_PER_THREAD copies of pyspark's own from_avro, until one fails.
PYSPARK_ROUNDS = 5


def from_avro_nodes(expression: Any) -> list[Any]:
    """The FromAvro expressions in a JVM expression tree."""
    found = [expression] if expression.getClass().getSimpleName() == "FromAvro" else []
    children = expression.children()
    for i in range(children.size()):
        found += from_avro_nodes(children.apply(i))
    return found


def replace_copies(node: Any, copies_per_thread: int) -> list[str]:
    """Each of THREADS threads makes `copies_per_thread` copies of `node` and works out each
    copy's replacement, as Spark's planning threads do; the first line of every failure."""
    errors: list[str] = []

    def run() -> None:
        for _ in range(copies_per_thread):
            try:
                # A copy shares its children (the options too) and works out its own replacement.
                node.copy(node.child(), node.jsonFormatSchema(), node.options()).replacement()
            except Exception as exc:  # every failure is counted and shown
                errors.append(str(exc).splitlines()[0])

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def test_copies_of_the_decode_column_replaced_from_four_threads_at_once_all_succeed(spark) -> None:
    column = avro_decode.decode(
        [(1, json.dumps(V1)), (2, json.dumps(V2))],
        json.dumps(V2),
        "STRUCT<id: BIGINT, amount: DOUBLE>",
        "id",
        "body",
    )
    frame = spark.createDataFrame([(1, bytearray(b"\x0a"))], "id int, body binary").select(column.alias("d"))
    nodes = from_avro_nodes(java_frame(frame).queryExecution().analyzed().expressions().head())
    assert len(nodes) == 2, "one from_avro per writer schema id"
    errors = replace_copies(nodes[0], COPIES_PER_THREAD)
    assert errors == [], f"{len(errors)} of {THREADS * COPIES_PER_THREAD} copies failed, e.g. {errors[0]}"
    # And the column still decodes: a v1 body read into v2 takes amount's default.
    assert frame.collect()[0]["d"].asDict() == {"id": 5, "amount": -1.0}


def pyspark_from_avro_node(spark) -> Any:
    """The FromAvro expression of pyspark's own from_avro, with options as the door's caller gives."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    column = from_avro(F.col("body"), json.dumps(V1), {"avroSchema": json.dumps(V2), "mode": "PERMISSIVE"})
    frame = spark.createDataFrame([(bytearray(b"\x0a"),)], "body binary").select(column.alias("d"))
    (node,) = from_avro_nodes(java_frame(frame).queryExecution().analyzed().expressions().head())
    return node


def test_pysparks_own_from_avro_still_shares_one_map_builder_among_copies(spark) -> None:
    """The cause of the race, checked in `make test` in milliseconds (the race itself, below, is a
    long variant): pyspark still sends the options as a CreateMap child of FromAvro, and CreateMap
    still keeps the one map builder it evaluates into as a field of the expression. When this fails,
    run the race with EOS_LONG_TESTS=1: the door of formats/from_avro.py may be moot."""
    options = pyspark_from_avro_node(spark).options()
    assert options.getClass().getSimpleName() == "CreateMap", "pyspark no longer sends its options as a map"
    fields = [field.getName() for field in options.getClass().getDeclaredFields()]
    assert any("mapBuilder" in name for name in fields), f"CreateMap keeps no map builder now: {fields}"


# The exit's check is about Spark, not this project: 50 s of the session's JVM and py4j in `make test`
# (2026-12-06), so only EOS_LONG_TESTS=1 runs it; the check of its cause above stays in `make test`.
@pytest.mark.skipif(os.environ.get("EOS_LONG_TESTS") != "1", reason="a long variant: EOS_LONG_TESTS=1")
def test_pysparks_own_from_avro_still_races(spark) -> None:
    """The precondition of formats/from_avro.py, and its exit: pyspark's from_avro, its options a
    create_map, fails copies planned from several threads at once with DUPLICATED_MAP_KEY. When
    this fails (no copy failed in PYSPARK_ROUNDS rounds), Spark evaluates the options safely now:
    go back to pyspark.sql.avro.functions.from_avro and remove the door. Stops at the first round
    with a failure (the first, in the runs measured)."""
    node = pyspark_from_avro_node(spark)
    assert node.options().getClass().getSimpleName() == "CreateMap", (
        "pyspark still sends its options as a map"
    )
    errors: list[str] = []
    for _ in range(PYSPARK_ROUNDS):
        errors = replace_copies(node, COPIES_PER_THREAD)
        if errors:
            break
    assert errors, f"no copy failed in {PYSPARK_ROUNDS * THREADS * COPIES_PER_THREAD}: the race is gone"
    assert any("DUPLICATED_MAP_KEY" in error for error in errors), errors[:3]
