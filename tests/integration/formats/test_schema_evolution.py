"""value.schema_evolution (ignore | add_columns | fail), through scheduled batches and backfills.

Real broker, Spark and Delta. Each scenario shares one topic and one table across its steps, and
changes the pipeline file between them (make_pipeline rewrites it), as an operator would.
"""

from __future__ import annotations

import json

import pytest

from eos_ingest.batch.result import BatchResult
from eos_ingest.batch.sequence import execute_batch, run_fenced
from eos_ingest.control.store import BatchStatus
from eos_ingest.errors import SchemaEvolutionError
from eos_ingest.service.backfill import create_backfill, parse_request
from eos_ingest.service.operations import open_store, plan_batch
from tests.fixtures.pipelines import ingest_once, verify_pipeline
from tests.helpers.avro import V1, framed
from tests.helpers.kafka import TxProducer

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("control_db_url", ["sqlite"], indirect=True)]


def planned_backfill(config, topic: str, start: int, end: int):
    """Record a backfill of partition 0's [start, end): (the store, the planned batch)."""
    store = open_store(config)
    request = parse_request(
        {"topic": topic, "partitions": [0], "start_offset": start, "end_offset": end, "reason": "test"},
        config.topics,
    )
    return store, create_backfill(config, store, request)


def backfill(spark, config, topic: str, start: int, end: int) -> BatchResult:
    """A backfill of partition 0's [start, end), run in this process."""
    store, batch = planned_backfill(config, topic, start, end)
    return execute_batch(spark, config, store, batch, store.take_fence(batch.batch_id))


def refused_backfill(spark, config, topic: str, start: int, end: int) -> str:
    """A backfill that schema evolution refuses: its error text; the batch stays planned."""
    store, batch = planned_backfill(config, topic, start, end)
    with pytest.raises(SchemaEvolutionError) as refused:
        run_fenced(spark, config, store, batch)
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
    return str(refused.value)


def table(spark, config):
    return spark.read.format("delta").load(str(config.output_path))


def by_id(spark, config, *columns: str) -> dict[int, tuple]:
    return {r["id"]: tuple(r[c] for c in columns) for r in table(spark, config).collect()}


def reasons(spark, config) -> dict[int, str]:
    frame = spark.read.format("delta").load(str(config.quarantine_path))
    return {r["kafka_offset"]: r["error"] for r in frame.collect()}


def version(spark, config) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, str(config.output_path)).history(1).first()["version"])


def test_json_add_columns_grows_the_table_keeps_reading_it_and_a_backfill_keeps_the_columns(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    first = [
        {"id": 1, "name": "a", "amount": 1.0},
        {"id": 2, "name": "b", "amount": 2.0, "coupon": "X1", "score": 7},
        {"id": 3, "name": "c", "amount": 3.0, "score": 9, "nested": {"k": 1}},
    ]
    producer.transaction(topic, first, commit=True, partition=0)  # offsets 0-2, marker 3
    config = make_pipeline([topic], control_db_url, value=_json("add_columns"))

    result = ingest_once(spark, config)

    assert result is not None and result.columns_added == ("coupon", "nested", "score")
    assert dict(table(spark, config).dtypes)["score"] == "bigint"
    assert dict(table(spark, config).dtypes)["nested"] == "struct<k:bigint>"
    assert by_id(spark, config, "coupon", "score") == {1: (None, None), 2: ("X1", 7), 3: (None, 9)}

    # The next batch reads the grown columns; a score that is no longer a number is quarantined.
    second = [{"id": 4, "name": "d", "amount": 4.0, "coupon": "X2"}, {"id": 5, "name": "e", "score": "high"}]
    producer.transaction(topic, second, commit=True, partition=0)  # offsets 4-5, marker 6
    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (1, 1)
    assert result.columns_added == ()
    assert by_id(spark, config, "coupon")[4] == ("X2",)
    assert reasons(spark, config)[5] == "type changed: field score does not fit the schema's type bigint"

    # A backfill of both ranges after the growth: the columns and their values stay, and the
    # changed type goes to quarantine again.
    result = backfill(spark, config, topic, 0, 6)

    assert (result.records_written, result.records_quarantined) == (4, 1)
    assert reasons(spark, config)[5] == "type changed: field score does not fit the schema's type bigint"
    assert by_id(spark, config, "coupon", "score") == {
        1: (None, None),
        2: ("X1", 7),
        3: (None, 9),
        4: ("X2", None),
    }
    assert verify_pipeline(spark, config).ok


def test_json_ignore_counts_fail_refuses_add_columns_fills_and_a_removed_column_gets_null(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    records = [
        {"id": 1, "name": "a", "amount": 1.0},
        {"id": 2, "Name": "b", "amount": 2.0},  # names are exact: `Name` is not `name`
        {"id": 3, "name": "c", "amount": 3.0, "coupon": "X"},
        {"id": 4, "name": "d", "amount": 4.0, "coupon": "Y", "channel": "web"},
        {"id": 5, "name": "e", "amount": "lots"},
    ]
    producer.transaction(topic, records, commit=True, partition=0)  # offsets 0-4, marker 5
    config = make_pipeline([topic], control_db_url)  # the default policy: ignore

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (4, 1)
    assert result.records_with_unknown_fields == 3
    assert "coupon" not in table(spark, config).columns
    assert reasons(spark, config)[4] == "type changed: field amount does not fit the schema's type DOUBLE"

    # fail: a backfill over the new fields, or over the changed type, is refused before writing.
    config = make_pipeline([topic], control_db_url, value=_json("fail"))
    before = version(spark, config)
    refused = refused_backfill(spark, config, topic, 0, 4)
    assert "schema lacks: Name, channel, coupon" in refused, refused
    assert "schema_evolution: add_columns" in refused, refused
    refused = refused_backfill(spark, config, topic, 4, 5)
    assert "field amount does not fit" in refused and "coupon" not in refused, refused
    # ... and so is a scheduled batch, naming both; it stays planned, for a rerun after the fix.
    later = [{"id": 6, "name": "f", "amount": 6.0, "coupon": "Z"}, {"id": 7, "name": "g", "amount": "x"}]
    producer.transaction(topic, later, commit=True, partition=0)  # offsets 6-7, marker 8
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    with pytest.raises(SchemaEvolutionError, match=r"coupon.*field amount does not fit"):
        run_fenced(spark, config, store, batch)
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
    assert version(spark, config) == before  # nothing written

    # add_columns: a backfill adds the fields the first batch dropped; the planned batch then runs.
    config = make_pipeline([topic], control_db_url, value=_json("add_columns"))
    result = backfill(spark, config, topic, 2, 4)
    assert result.columns_added == ("channel", "coupon") and result.records_written == 2
    result = run_fenced(spark, config, store, store.get_batch(batch.batch_id))
    assert (result.records_written, result.records_quarantined, result.columns_added) == (1, 1, ())
    assert by_id(spark, config, "coupon", "channel") == {
        1: (None, None), 2: (None, None), 3: ("X", None), 4: ("Y", "web"), 6: ("Z", None)
    }  # fmt: skip

    # A column removed from the schema (the policy back to ignore): the table keeps it and its
    # values; the rows written from then on, by a backfill or a batch, get null there.
    config = make_pipeline(
        [topic], control_db_url, value={"format": "json", "schema": "id BIGINT, name STRING"}
    )
    result = backfill(spark, config, topic, 0, 2)
    assert (result.records_written, result.records_with_unknown_fields) == (2, 2)  # amount is unknown now
    producer.transaction(topic, [{"id": 8, "name": "h", "amount": 8.0}], commit=True, partition=0)
    result = ingest_once(spark, config)
    assert result is not None and (result.records_written, result.records_with_unknown_fields) == (1, 1)
    assert {"amount", "coupon", "channel"} <= set(table(spark, config).columns)
    assert by_id(spark, config, "amount") == {
        1: (None,),
        2: (None,),
        3: (3.0,),
        4: (4.0,),
        6: (6.0,),
        8: (None,),
    }
    assert verify_pipeline(spark, config).ok


def test_json_unknown_fields_are_found_beside_null_missing_and_repeated_fields(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    """The parse counts a value's keys against its columns that parsed non-null, and looks for
    unknown names only when they differ: a null or missing field must not hide an unknown one."""
    topic = make_topic(partitions=1)
    values = [
        '{"id": 1, "name": null, "amount": 1.0, "x": 1}',  # a null column beside an unknown key
        '{"id": 2, "name": "b", "amount": 2.0}',
        '{"id": 3, "x": 3, "amount": 3.0}',  # as many keys as columns: name missing, x unknown
        '{"id": 4, "id": 4, "name": "d", "amount": 4.0}',  # a repeated key is not an unknown one
        '{"id": 5, "name": "e"}',  # a missing field only
        '{"id": 6, "name": "f", "amount": 6.0, "Amount": 7}',  # every column parsed, one key more
    ]
    TxProducer(kafka_bootstrap).transaction(topic, values, commit=True, partition=0)
    config = make_pipeline([topic], control_db_url)  # ignore

    result = ingest_once(spark, config)

    assert result is not None and (result.records_written, result.records_quarantined) == (6, 0)
    assert result.records_with_unknown_fields == 3
    config = make_pipeline([topic], control_db_url, value=_json("fail"))
    assert "schema lacks: Amount, x" in refused_backfill(spark, config, topic, 0, 6)


V2 = {**V1, "fields": [*V1["fields"], {"name": "coupon", "type": "string"}]}
# id became a string: the long reader cannot read it
CHANGED = {**V1, "fields": [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}]}


def test_avro_add_columns_from_the_writer_schema_fail_and_ignore_through_batches_and_backfills(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path
) -> None:
    folder = tmp_path / "pipelines" / "schemas"
    folder.mkdir(parents=True)
    for name, schema in (("v1", V1), ("v2", V2), ("changed", CHANGED)):
        (folder / f"{name}.avsc").write_text(json.dumps(schema))

    def avro(policy: str) -> dict:
        writers = {1: "schemas/v1.avsc", 2: "schemas/v2.avsc", 3: "schemas/changed.avsc"}
        return {"format": "avro", "schema_file": "schemas/v1.avsc", "writer_schemas": writers,
                "schema_evolution": policy}  # fmt: skip

    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(
        topic,
        [framed(1, V1, {"id": 1, "name": "a"}), framed(2, V2, {"id": 2, "name": "b", "coupon": "X"})],
        commit=True,
        partition=0,
    )  # offsets 0-1, marker 2
    config = make_pipeline([topic], control_db_url, value=avro("add_columns"))

    result = ingest_once(spark, config)

    assert result is not None and result.columns_added == ("coupon",)
    assert by_id(spark, config, "coupon") == {1: (None,), 2: ("X",)}

    # A later batch reads the grown column; a writer whose id became a string is quarantined.
    producer.transaction(
        topic,
        [framed(2, V2, {"id": 3, "name": "c", "coupon": "Y"}), framed(3, CHANGED, {"id": "4", "name": "d"})],
        commit=True,
        partition=0,
    )  # offsets 3-4, marker 5
    result = ingest_once(spark, config)
    assert result is not None and (result.records_written, result.records_quarantined) == (1, 1)
    assert by_id(spark, config, "coupon")[3] == ("Y",)
    assert "writer schema id 3 is incompatible" in reasons(spark, config)[4]
    assert reasons(spark, config)[4].endswith("(field id)"), reasons(spark, config)

    # fail: refused before writing, naming the new field, or the field whose type changed.
    config = make_pipeline([topic], control_db_url, value=avro("fail"))
    refused = refused_backfill(spark, config, topic, 0, 2)
    assert "coupon" in refused and "writer schema ids 2" in refused, refused
    refused = refused_backfill(spark, config, topic, 4, 5)
    assert "(field id)" in refused, refused

    # ignore: a backfill drops (and counts) the field, and quarantines the changed type again;
    # the grown column stays, null in the range.
    config = make_pipeline([topic], control_db_url, value=avro("ignore"))
    result = backfill(spark, config, topic, 0, 5)
    assert (result.records_written, result.records_quarantined, result.records_with_unknown_fields) == (
        3,
        1,
        2,
    )
    assert by_id(spark, config, "coupon") == {1: (None,), 2: (None,), 3: (None,)}
    assert reasons(spark, config)[4].endswith("(field id)")
    assert verify_pipeline(spark, config).ok


def _json(policy: str) -> dict:
    return {"format": "json", "schema": "id BIGINT, name STRING, amount DOUBLE", "schema_evolution": policy}
