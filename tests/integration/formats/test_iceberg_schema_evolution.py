"""value.schema_evolution on an Iceberg table (real broker, Spark, the JDBC catalog on the SQLite
control DB): a field added mid-stream becomes a column (old rows null) and a declared float column
widens to double in the same batch; a narrowing is refused before anything is written, naming the
field and the fix. One topic and one table through the steps; the pipeline file changes between
them, as an operator would change it."""

from __future__ import annotations

import pytest

from eos_ingest.batch.sequence import run_fenced
from eos_ingest.control.store import BatchStatus
from eos_ingest.errors import SchemaEvolutionError
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.fixtures.pipelines import ingest_once
from tests.fixtures.postgres import on_control_db
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def value(schema: str) -> dict:
    return {"format": "json", "schema": schema, "schema_evolution": "add_columns"}


@on_control_db("sqlite")
def test_iceberg_add_columns_adds_a_field_widens_a_float_and_refuses_a_narrowing(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    output = {"format": "iceberg", "table": "lake.evolving"}
    producer.transaction(topic, [{"id": 1, "name": "a", "amount": 1.5}], commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, value=value("id BIGINT, name STRING, amount FLOAT"),
                           output=output)  # fmt: skip
    assert ingest_once(spark, config) is not None
    name = IcebergCatalog.of(config).identifier("lake.evolving")
    assert dict(spark.table(name).dtypes)["amount"] == "float"

    # Mid-stream a field appears, and the schema declares amount DOUBLE: one batch does both.
    producer.transaction(
        topic, [{"id": 2, "name": "b", "amount": 0.1, "coupon": "X"}], commit=True, partition=0
    )
    config = make_pipeline([topic], control_db_url, value=value("id BIGINT, name STRING, amount DOUBLE"),
                           output=output)  # fmt: skip
    result = ingest_once(spark, config)

    assert result is not None and result.columns_added == ("coupon",)
    types = dict(spark.table(name).dtypes)
    assert (types["coupon"], types["amount"]) == ("string", "double")
    found = {r.id: (r.coupon, r.amount) for r in spark.table(name).collect()}
    assert found == {1: (None, 1.5), 2: ("X", 0.1)}  # the old row null; 0.1 kept as a double

    # A narrowing (id BIGINT -> INT) is refused before anything is written; the batch stays planned.
    producer.transaction(topic, [{"id": 3, "name": "c", "amount": 3.0}], commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, value=value("id INT, name STRING, amount DOUBLE"),
                           output=output)  # fmt: skip
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    main = IcebergCatalog.of(config).java_table(spark, "lake.evolving")
    before = main.currentSnapshot().snapshotId()
    with pytest.raises(SchemaEvolutionError) as refused:
        run_fenced(spark, config, store, batch)
    text = str(refused.value)
    assert "column id of the Iceberg table lake.evolving is bigint and the schema declares INT" in text, text
    assert "declare `id bigint`" in text, text
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
    main.refresh()
    assert main.currentSnapshot().snapshotId() == before and dict(spark.table(name).dtypes)["id"] == "bigint"
