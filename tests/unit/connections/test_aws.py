"""An Airflow aws connection becomes the AWS_* variables, with the Kafka connection's precedence."""

from __future__ import annotations

import json

import pytest

from eos_ingest.connections import aws as aws_conn
from eos_ingest.errors import ConfigError

CONN = {
    "conn_type": "aws",
    "login": "AKIAKEY",
    "password": "s3cret",
    "extra": {"endpoint_url": "http://127.0.0.1:9090", "region_name": "eu-west-1"},
}


def test_a_json_connection_in_the_environment_gives_the_standard_variables() -> None:
    found = aws_conn.connection_from_env("lake", {"AIRFLOW_CONN_LAKE": json.dumps(CONN)})
    assert found == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9090",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIAKEY",
        "AWS_SECRET_ACCESS_KEY": "s3cret",
    }


def test_a_uri_connection_is_read_too() -> None:
    uri = "aws://AKIAKEY:s3%2Fcret@/?endpoint_url=http%3A%2F%2F127.0.0.1%3A9090&region_name=eu-west-1"
    found = aws_conn.connection_from_env("lake", {"AIRFLOW_CONN_LAKE": uri})
    assert found is not None and found["AWS_SECRET_ACCESS_KEY"] == "s3/cret"
    assert found["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9090"


def test_no_connection_named_or_defined_gives_none() -> None:
    assert aws_conn.connection_from_env(None, {"AIRFLOW_CONN_LAKE": json.dumps(CONN)}) is None
    assert aws_conn.connection_from_env("lake", {}) is None


def test_another_connection_type_is_refused() -> None:
    with pytest.raises(ConfigError, match="type 'aws'"):
        aws_conn.connection_from_env(
            "lake", {"AIRFLOW_CONN_LAKE": json.dumps({**CONN, "conn_type": "kafka"})}
        )


def test_a_variable_set_differently_in_both_places_is_refused_without_its_value() -> None:
    env = {"AWS_SECRET_ACCESS_KEY": "other-secret", "AWS_REGION": "eu-west-1"}
    with pytest.raises(ConfigError) as refused:
        aws_conn.apply("lake", {"AWS_SECRET_ACCESS_KEY": "s3cret", "AWS_REGION": "eu-west-1"}, env)
    message = str(refused.value)
    assert "AWS_SECRET_ACCESS_KEY" in message and "'lake'" in message
    assert "s3cret" not in message and "other-secret" not in message


def test_apply_joins_the_connection_into_the_environment() -> None:
    env = {"AWS_REGION": "eu-west-1"}
    aws_conn.apply("lake", {"AWS_ACCESS_KEY_ID": "k", "AWS_REGION": "eu-west-1"}, env)
    assert env == {"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "k"}
