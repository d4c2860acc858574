"""output.partition_by on an Iceberg table takes Iceberg's transforms of a column (day(c),
bucket(N, c) ...), spelt canonically over the schema's spelling; a Delta table refuses them, and
each mistake names the key and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError

SCHEMA = "order_id BIGINT, Customer STRING, placed_at TIMESTAMP, placed_on DATE, total DOUBLE"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)


def load(tmp_path: Path, partition_by: list[Any], fmt: str = "iceberg"):
    output: dict[str, Any] = {"format": fmt, "partition_by": partition_by}
    if fmt == "iceberg":
        output["table"] = "lake.orders"
    doc = {
        "name": "orders",
        "topics": ["orders"],
        "value": {"format": "json", "schema": SCHEMA},
        "output": output,
    }
    path = tmp_path / "orders.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return load_pipeline(path)


def test_transforms_are_spelt_canonically_over_the_schemas_column_names(tmp_path: Path) -> None:
    config = load(
        tmp_path, ["DAYS(placed_at)", "bucket( 16 , customer)", "hour(kafka_timestamp)", "kafka_topic"]
    )
    assert config.output.partition_by == (
        "day(placed_at)",
        "bucket(16, Customer)",
        "hour(kafka_timestamp)",
        "kafka_topic",
    )


@pytest.mark.parametrize(
    ("entry", "fix"),
    [
        ("day(total)", "day() takes a column of type DATE, TIMESTAMP, TIMESTAMP_NTZ; total is DOUBLE"),
        ("hour(placed_on)", "hour() takes a column of type TIMESTAMP, TIMESTAMP_NTZ; placed_on is DATE"),
        ("truncate(4, customer)", "truncate(W, c) is not supported"),
        ("week(placed_at)", "write a column, or one of Iceberg's transforms"),
        ("bucket(placed_at)", "bucket takes a count and a column"),
        ("day(3, placed_at)", "bucket takes a count and a column"),
        ("bucket(0, customer)", "give bucket a count from 1 to 1000000"),
        ("day(placed)", "transform one of"),
    ],
)
def test_a_misfit_transform_is_refused_with_its_fix(tmp_path: Path, entry: str, fix: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, [entry])
    assert "output.partition_by[0]" in str(err.value) and fix in str(err.value)


def test_a_transform_listed_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="listed twice"):
        load(tmp_path, ["day(placed_at)", "days(PLACED_AT)"])


def test_a_delta_table_refuses_a_transform(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"partition a Delta table by a column, or set output\.format: iceberg"
    ):
        load(tmp_path, ["day(placed_at)"], fmt="delta")
