"""output.format: Delta by default; Iceberg with its table, quarantine table and catalog, and each
mistake named with its key and fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.storage.iceberg_catalog import IcebergCatalog, jdbc_settings
from eos_ingest.storage.table_formats import output_format


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)
    return tmp_path / "state"


def load(tmp_path: Path, output: dict[str, Any], **top: Any):
    doc = {"name": "orders", "topics": ["orders"], "value": {"format": "raw"}, "output": output, **top}
    path = tmp_path / "orders.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return load_pipeline(path)


def test_delta_stays_the_default(tmp_path: Path, state_dir: Path) -> None:
    config = load(tmp_path, {})
    assert config.output.format == "delta" and output_format(config).name == "delta"
    assert config.output_tables == (str(state_dir.resolve() / "tables/orders"), str(config.quarantine_path))


def test_an_iceberg_pipeline_names_its_tables_in_a_jdbc_catalog_on_its_control_db(
    tmp_path: Path, state_dir: Path
) -> None:
    config = load(tmp_path, {"format": "iceberg", "table": "events.orders"})

    assert config.output_tables == ("events.orders", "events.orders_quarantine")
    catalog = IcebergCatalog.of(config)
    assert catalog.name == "eos_orders" and catalog.uri == config.control_db_url
    assert catalog.warehouse == str(state_dir.resolve() / "tables/orders")
    conf = catalog.spark_conf()
    assert conf["spark.sql.catalog.eos_orders.uri"] == f"jdbc:sqlite:{state_dir.resolve() / 'control.db'}"
    assert output_format(config).name == "iceberg"


def test_a_postgresql_catalog_gets_its_user_and_password_as_jdbc_settings() -> None:
    assert jdbc_settings("postgresql+psycopg://eos:pw@db.example:5433/control?sslmode=require") == {
        "uri": "jdbc:postgresql://db.example:5433/control?sslmode=require",
        "jdbc.user": "eos",
        "jdbc.password": "pw",
    }


@pytest.mark.parametrize(
    ("output", "key", "fix"),
    [
        ({"format": "iceberg"}, "output.table", "give namespace.table"),
        ({"format": "iceberg", "table": "orders"}, "output.table", "give namespace.table"),
        ({"format": "iceberg", "table": "a.b.c"}, "output.table", "give namespace.table"),
        ({"format": "parquet"}, "output.format", "use 'delta' or 'iceberg'"),
        ({"table": "events.orders"}, "output.table", "set output.format: iceberg"),
        ({"catalog": {"type": "jdbc"}}, "output.catalog", "set output.format: iceberg"),
        (
            {"format": "iceberg", "table": "e.o", "quarantine_path": "q"},
            "output.quarantine_path",
            "quarantine_table",
        ),
        (
            {"format": "iceberg", "table": "e.o", "quarantine_table": "e.o"},
            "output.quarantine_table",
            "differ",
        ),
        ({"format": "iceberg", "table": "e.o", "catalog": {"type": "rest"}}, "output.catalog.type", "'jdbc'"),
        (
            {"format": "iceberg", "table": "e.o", "catalog": {"uri": "mysql://h/db"}},
            "output.catalog.uri",
            "sqlite:///",
        ),
    ],
)
def test_each_mistake_names_its_key_and_fix(
    tmp_path: Path, output: dict[str, Any], key: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, output)
    assert f"{key} = " in str(refused.value) and fix in str(refused.value), str(refused.value)
