"""How the S3 access and the commit coordinator's settings are derived (no server needed)."""

from __future__ import annotations

import pytest

from eos_ingest.config.table_location import is_object_store
from eos_ingest.errors import ConfigError
from eos_ingest.storage.object_stores import S3Access, coordinator_conf, delta_rs_uri

LOCAL = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9090",
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "s3cret",
    "AWS_REGION": "eu-west-1",
}


def test_the_standard_aws_variables_map_to_hadoop_aws_with_path_style_and_plain_http() -> None:
    conf = S3Access.from_env(LOCAL).hadoop_conf()
    assert conf == {
        "fs.s3a.path.style.access": "true",
        "fs.s3a.endpoint": "http://127.0.0.1:9090",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.access.key": "key",
        "fs.s3a.secret.key": "s3cret",
    }


def test_without_keys_hadoop_aws_keeps_its_own_credential_chain() -> None:
    conf = S3Access.from_env({"AWS_REGION": "us-east-1"}).hadoop_conf()
    assert "fs.s3a.access.key" not in conf and "fs.s3a.endpoint" not in conf


def test_delta_rs_gets_the_same_store_and_may_use_http() -> None:
    options = S3Access.from_env(LOCAL).storage_options()
    assert options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9090"
    assert options["AWS_ALLOW_HTTP"] == "true"
    assert (options["AWS_ACCESS_KEY_ID"], options["AWS_SECRET_ACCESS_KEY"]) == ("key", "s3cret")
    assert delta_rs_uri("s3a://lake/t") == "s3://lake/t"
    assert delta_rs_uri("/tmp/tables/t") == "/tmp/tables/t"  # the writer passes local paths as text


def test_the_secret_is_not_in_the_repr() -> None:
    assert "s3cret" not in repr(S3Access.from_env(LOCAL))


def test_the_coordinator_gets_a_jdbc_url_from_the_sqlalchemy_url() -> None:
    conf = coordinator_conf("postgresql+psycopg://eos:p%40ss@db.example:5433/control?sslmode=require")
    assert conf == {
        "eos.delta.jdbc.url": "jdbc:postgresql://db.example:5433/control?sslmode=require",
        "eos.delta.jdbc.user": "eos",
        "eos.delta.jdbc.password": "p@ss",
    }


def test_the_coordinator_refuses_sqlite() -> None:
    with pytest.raises(ConfigError, match="PostgreSQL"):
        coordinator_conf("sqlite:////tmp/control.db")


def test_only_s3a_uris_are_object_storage() -> None:
    assert is_object_store("s3a://lake/t")
    from pathlib import Path

    assert not is_object_store(Path("/tmp/s3a:/x")) and not is_object_store("/tmp/t")
