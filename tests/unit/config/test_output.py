"""output.format: Delta by default; Iceberg with its table, quarantine table and catalog, and each
mistake named with its key and fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.storage.iceberg.catalog import IcebergCatalog, jdbc_settings
from eos_ingest.storage.iceberg.rest_auth import properties_from_env
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
        "retryable_status_codes": "57P01,57P02,57P03",  # a restart's: reconnect (test_postgres_restart.py)
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
        ({"format": "iceberg", "table": "e.o", "catalog": {"type": "hive"}}, "output.catalog.type", "'rest'"),
        (
            {"format": "iceberg", "table": "e.o", "catalog": {"type": "rest"}},
            "output.catalog.uri",
            "needs its URL",
        ),
        (
            {"format": "iceberg", "table": "e.o", "catalog": {"type": "rest", "uri": "sqlite:///c.db"}},
            "output.catalog.uri",
            "http(s)://host",
        ),
        (
            {"format": "iceberg", "table": "e.o", "catalog": {"uri": "https://cat.example/api"}},
            "output.catalog.uri",
            "set output.catalog.type: rest",
        ),
        (
            {"format": "iceberg", "table": "e.o", "catalog": {"conn_id": "iceberg_rest"}},
            "output.catalog.conn_id",
            "set output.catalog.type: rest",
        ),
        (
            {"format": "iceberg", "table": "e.o", "catalog": {"warehouse": "wh"}},
            "output.catalog.warehouse",
            "a jdbc catalog's warehouse is output.path",
        ),
        (
            {
                "format": "iceberg",
                "table": "e.o",
                "catalog": {"type": "rest", "uri": "http://h:8181", "url": "x"},
            },
            "output.catalog.url",
            "did you mean 'uri'",
        ),
        (
            {
                "format": "iceberg",
                "table": "e.o",
                "path": "wh",
                "catalog": {"type": "rest", "uri": "http://h:8181"},
            },
            "output.path",
            "remove output.path",
        ),
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


REST = {"type": "rest", "uri": "https://catalog.example/api/catalog/", "conn_id": "iceberg_rest"}


def test_a_rest_catalog_takes_its_credentials_from_its_connection_and_never_shows_them(
    tmp_path: Path,
) -> None:
    config = load(
        tmp_path, {"format": "iceberg", "table": "events.orders", "catalog": {**REST, "warehouse": "prod"}}
    )
    env = {"AIRFLOW_CONN_ICEBERG_REST": "http://client-1:s3cret@ignored-host"}

    catalog = IcebergCatalog.of(config, env)

    conf = catalog.spark_conf()
    prefix = "spark.sql.catalog.eos_orders"
    assert conf[f"{prefix}.type"] == "rest" and conf[f"{prefix}.uri"] == "https://catalog.example/api/catalog"
    assert conf[f"{prefix}.credential"] == "client-1:s3cret" and conf[f"{prefix}.warehouse"] == "prod"
    assert conf[f"{prefix}.oauth2-server-uri"] == "https://catalog.example/api/catalog/v1/oauth/tokens"
    assert f"{prefix}.token" not in conf and f"{prefix}.jdbc.user" not in conf
    assert "s3cret" not in repr(catalog) and "s3cret" not in str(config.to_dict())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://:tok123@h", {"token": "tok123"}),
        ('{"conn_type": "http", "password": "tok123", "extra": {"scope": "PRINCIPAL_ROLE:ALL"}}',
         {"token": "tok123", "scope": "PRINCIPAL_ROLE:ALL"}),
        ('{"conn_type": "http", "login": "id", "password": "sec", "extra": {"oauth2_server_uri": "https://idp/t"}}',
         {"credential": "id:sec", "oauth2-server-uri": "https://idp/t"}),
        ("http://h?token=tok123", {"token": "tok123"}),
    ],
)  # fmt: skip
def test_a_rest_connection_gives_a_token_or_client_credentials(raw: str, expected: dict[str, str]) -> None:
    assert properties_from_env("iceberg_rest", {"AIRFLOW_CONN_ICEBERG_REST": raw}) == expected


@pytest.mark.parametrize(
    ("env", "fix"),
    [
        ({}, "AIRFLOW_CONN_ICEBERG_REST is not set"),
        ({"AIRFLOW_CONN_ICEBERG_REST": "http://client-1@h"}, "has a login but no password"),
        ({"AIRFLOW_CONN_ICEBERG_REST": "http://id:sec@h?token=t"}, "keep one"),
        ({"AIRFLOW_CONN_ICEBERG_REST": '{"password": "s3cret", '}, "is not valid JSON"),
    ],
)
def test_a_rest_connection_that_cannot_sign_in_is_refused_naming_the_key_and_fix(
    tmp_path: Path, env: dict[str, str], fix: str
) -> None:
    config = load(tmp_path, {"format": "iceberg", "table": "events.orders", "catalog": REST})
    with pytest.raises(ConfigError) as refused:
        IcebergCatalog.of(config, env)
    assert "output.catalog.conn_id" in str(refused.value) or "AIRFLOW_CONN_ICEBERG_REST" in str(refused.value)
    assert fix in str(refused.value) and "s3cret" not in str(refused.value), str(refused.value)


def test_an_s3a_warehouse_is_written_through_hadoop_aws_and_read_by_pyiceberg_with_the_same_access() -> None:
    from eos_ingest.storage.iceberg.catalog import pyiceberg_s3
    from eos_ingest.storage.object_stores import S3Access

    catalog = IcebergCatalog("eos_lake", "postgresql+psycopg://eos@db/control", "s3a://lake/wh")
    assert (
        catalog.spark_conf()["spark.sql.catalog.eos_lake.io-impl"] == "org.apache.iceberg.hadoop.HadoopFileIO"
    )
    local = IcebergCatalog("eos_lake", "postgresql+psycopg://eos@db/control", "/data/wh")
    assert "spark.sql.catalog.eos_lake.io-impl" not in local.spark_conf()  # the JDBC catalog's default
    access = S3Access.from_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:9090", "AWS_ACCESS_KEY_ID": "k",
                                "AWS_SECRET_ACCESS_KEY": "s"})  # fmt: skip
    assert pyiceberg_s3(access) == {
        "s3.endpoint": "http://127.0.0.1:9090", "s3.region": "us-east-1", "s3.access-key-id": "k",
        "s3.secret-access-key": "s", "s3.force-virtual-addressing": "false",
    }  # fmt: skip


def test_a_rest_catalogs_tables_are_named_from_the_file_alone_without_its_credentials(tmp_path: Path) -> None:
    """The DAG files name the tables (doc, Asset, lineage) while they are parsed, where the
    catalog's connection is not to be read: the server's resource, not a warehouse path."""
    from eos_ingest.storage.table_names import QUARANTINE, TABLE, output_names

    config = load(
        tmp_path, {"format": "iceberg", "table": "events.orders", "catalog": {**REST, "warehouse": "prod"}}
    )
    names = output_names(config)  # no AIRFLOW_CONN_ICEBERG_REST in this process

    base = "https://catalog.example/api/catalog"
    assert names[TABLE].shown == "eos_orders.events.orders"
    assert names[TABLE].uri == f"{base}/v1/namespaces/events/tables/orders"
    assert names[TABLE].dataset == (f"{base}/prod", "events.orders")
    assert names[QUARANTINE].dataset == (f"{base}/prod", "events.orders_quarantine")
