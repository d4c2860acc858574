"""value.schema_evolution without Spark: the setting's rules and the Avro reader schema of a batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError, SchemaEvolutionError, exit_code
from eos_ingest.formats.evolution_rules import REFUSE, WIDEN, avro_reader, type_change
from eos_ingest.formats.schema_evolution import widened_columns, with_columns

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)


def load(folder: Path, value: dict[str, Any]):
    (folder / "order.avsc").write_text(json.dumps(ORDER))
    path = folder / "orders.yaml"
    path.write_text(yaml.safe_dump({"name": "orders", "topics": ["orders"], "value": value}))
    return load_pipeline(path)


def test_the_default_is_ignore_which_keeps_todays_tables(tmp_path: Path) -> None:
    config = load(tmp_path, {"format": "json", "schema": "id BIGINT"})
    assert config.value.schema_evolution == "ignore"
    demo = yaml.safe_load((Path(__file__).parents[3] / "pipelines" / "demo.yaml").read_text())
    assert demo["value"]["schema_evolution"] == "ignore"


@pytest.mark.parametrize("policy", ["ignore", "add_columns", "fail"])
def test_each_policy_loads_for_json_and_avro(tmp_path: Path, policy: str) -> None:
    assert load(tmp_path, {"format": "json", "schema": "id BIGINT", "schema_evolution": policy})
    avro = {"format": "avro", "schema_file": "order.avsc", "writer_schemas": {1: "order.avsc"}}
    assert load(tmp_path, {**avro, "schema_evolution": policy}).value.schema_evolution == policy


def test_a_bad_policy_is_refused_with_the_file_the_key_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, {"format": "json", "schema": "id BIGINT", "schema_evolution": "merge"})
    text = str(refused.value)
    assert "orders.yaml" in text and "value.schema_evolution = 'merge'" in text, text
    assert "'ignore' or 'add_columns' or 'fail'" in text, text


def test_raw_values_have_no_schema_to_evolve(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, {"format": "raw", "schema_evolution": "add_columns"})
    assert "value.schema_evolution = 'add_columns' is not valid; remove it" in str(refused.value)
    assert load(tmp_path, {"format": "raw"}).value.schema_evolution == "ignore"


def test_a_refused_schema_change_needs_a_person_and_is_not_retried() -> None:
    error = SchemaEvolutionError("x")
    assert not error.retriable and exit_code(error) == 2


def test_json_columns_grow_after_the_declared_ones(tmp_path: Path) -> None:
    config = load(tmp_path, {"format": "json", "schema": "id BIGINT", "schema_evolution": "add_columns"})
    grown = with_columns(config, [("id", "BIGINT"), ("coupon", "string")])
    assert grown.payload_columns == [("id", "BIGINT"), ("coupon", "string")]
    assert grown.value.schema == "id BIGINT, `coupon` string"
    assert with_columns(config, config.payload_columns) is config


V2 = {**ORDER, "fields": [*ORDER["fields"], {"name": "coupon", "type": "string"},
                          {"name": "batch_id", "type": "long"}]}  # fmt: skip
V3 = {**ORDER, "fields": [*ORDER["fields"], {"name": "coupon", "type": "long"}]}


def avro_config(tmp_path: Path, policy: str):
    avro = {"format": "avro", "schema_file": "order.avsc", "writer_schemas": {1: "order.avsc"}}
    return load(tmp_path, {**avro, "schema_evolution": policy})


def test_add_columns_widens_the_avro_reader_with_nullable_writer_fields(tmp_path: Path) -> None:
    config = avro_config(tmp_path, "add_columns")

    reader, unknown, changed = avro_reader(config, {1: json.dumps(ORDER), 2: json.dumps(V2)}, ())

    fields = json.loads(reader)["fields"]
    assert fields[1] == {"name": "coupon", "type": ["null", "string"], "default": None}
    assert len(fields) == 2  # a reserved name never becomes a column: it stays unknown (dropped)
    assert unknown == {2: ["batch_id"]} and changed == {}


def test_a_writer_field_whose_type_is_not_the_grown_columns_is_named(tmp_path: Path) -> None:
    config = avro_config(tmp_path, "add_columns")

    reader, _, changed = avro_reader(config, {3: json.dumps(V3)}, (("coupon", "string"),))

    assert changed == {3: ["coupon"]} and len(json.loads(reader)["fields"]) == 1


@pytest.mark.parametrize("policy", ["ignore", "fail"])
def test_ignore_and_fail_keep_the_declared_reader_and_name_the_unknown_fields(
    tmp_path: Path, policy: str
) -> None:
    config = avro_config(tmp_path, policy)

    reader, unknown, _ = avro_reader(config, {1: json.dumps(ORDER), 2: json.dumps(V2)}, ())

    assert reader == config.value.avro_schema and unknown == {2: ["coupon", "batch_id"]}


@pytest.mark.parametrize(
    ("table", "declared", "change"),
    [
        ("int", "BIGINT", WIDEN),
        ("float", "DOUBLE", WIDEN),
        ("decimal(10,2)", "DECIMAL(12, 2)", WIDEN),
        ("bigint", "BIGINT NOT NULL", None),
        ("decimal(10,0)", "DECIMAL", None),
        ("int", "INTEGER", None),
        ("struct<k:bigint>", "STRUCT<k: STRING>", None),  # not a primitive: Spark's write decides
        ("bigint", "INT", REFUSE),
        ("double", "FLOAT", REFUSE),
        ("decimal(10,2)", "DECIMAL(12,3)", REFUSE),  # the scale changes
        ("bigint", "STRING", REFUSE),
    ],
)
def test_iceberg_widens_int_float_and_a_decimal_s_precision_and_refuses_the_rest(
    table: str, declared: str, change: str | None
) -> None:
    assert type_change(table, declared) == change


def test_on_iceberg_a_narrowed_or_unpermitted_column_type_is_refused_naming_the_field_and_the_fix(
    tmp_path: Path,
) -> None:
    from pyspark.sql.types import FloatType, LongType, StructField, StructType

    table = StructType([StructField("id", LongType()), StructField("amount", FloatType())])

    def iceberg(schema: str, policy: str, output: dict | None = None):
        path = tmp_path / "orders.yaml"
        value = {"format": "json", "schema": schema, "schema_evolution": policy}
        output = output or {"format": "iceberg", "table": "lake.orders"}
        path.write_text(
            yaml.safe_dump({"name": "orders", "topics": ["orders"], "value": value, "output": output})
        )
        return load_pipeline(path)

    assert widened_columns(iceberg("id BIGINT, amount DOUBLE", "add_columns"), table) == (
        ("amount", "DOUBLE"),
    )
    assert widened_columns(iceberg("id BIGINT, amount FLOAT", "ignore"), table) == ()
    assert widened_columns(iceberg("id BIGINT, amount DOUBLE", "add_columns"), None) == ()  # no table yet
    with pytest.raises(SchemaEvolutionError) as narrowed:
        widened_columns(iceberg("id INT, amount FLOAT", "add_columns"), table)
    assert "column id of the Iceberg table lake.orders is bigint and the schema declares INT" in str(
        narrowed.value
    )
    assert "declare `id bigint`" in str(narrowed.value) and "stays planned" in str(narrowed.value)
    with pytest.raises(SchemaEvolutionError, match=r"set value\.schema_evolution: add_columns to widen"):
        widened_columns(iceberg("id BIGINT, amount DOUBLE", "fail"), table)
    # Delta's tables: no type change is made or checked here.
    delta = iceberg("id INT, amount DOUBLE", "add_columns", output={"format": "delta"})
    assert (
        widened_columns(
            delta, StructType([StructField("id", LongType()), StructField("amount", FloatType())])
        )
        == ()
    )
