"""S3 access from an Airflow connection of the Amazon provider's ``aws`` type, as AWS_* variables.

A pipeline's ``aws_conn_id`` (default none) names the connection: login = access key id, password
= secret access key, extra ``endpoint_url``, ``region_name``, ``aws_session_token`` (the
provider's own keys; ``aws_access_key_id`` / ``aws_secret_access_key`` in the extra are read too).
Its values become the standard variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...) that every
reader and writer of an s3a table takes its access from (object_storage.S3Access.from_env).

The rule of precedence is the Kafka connection's (airflow_conn.resolve_kafka_settings): the
connection and the environment are joined, and a variable that both set to different values is
refused (ConfigError naming the variable and the connection, never a secret value); nothing is
silently overridden. The CLI reads the connection from ``AIRFLOW_CONN_<ID>`` (JSON or URI, as
Airflow does), Airflow tasks from Airflow's connection store; the variables then reach the
spark-submit job in its environment, never on its command line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from eos_ingest.config.airflow_connection import connection_env_name, parse_connection
from eos_ingest.errors import ConfigError

AWS_CONN_TYPE = "aws"
_EXTRA_TO_ENV = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "region_name": "AWS_REGION",
    "aws_session_token": "AWS_SESSION_TOKEN",
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
}
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def variables_from_connection(
    conn_id: str, conn_type: str | None, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> dict[str, str]:
    """The AWS_* variables of an ``aws`` connection's fields; another type is a ConfigError."""
    if conn_type != AWS_CONN_TYPE:
        raise ConfigError(
            f"Airflow connection {conn_id!r} has conn_type {conn_type!r}; aws_conn_id must name a "
            f"connection of the Amazon provider's type {AWS_CONN_TYPE!r}"
        )
    found = {env: str(extra[key]) for key, env in _EXTRA_TO_ENV.items() if extra.get(key)}
    if login:
        found["AWS_ACCESS_KEY_ID"] = login
    if password:
        found["AWS_SECRET_ACCESS_KEY"] = password
    return found


def joined(conn_vars: Mapping[str, str], environ: Mapping[str, str], conn_id: str) -> dict[str, str]:
    """The connection's variables joined with the environment's; a different value in both is refused."""
    conflicts = sorted(k for k, v in conn_vars.items() if environ.get(k) and environ[k] != v)
    if conflicts:
        raise ConfigError(
            f"{', '.join(conflicts)} set both in the environment and in Airflow connection {conn_id!r}, "
            "with different values; keep the S3 access in one place (unset the variables, or set "
            "aws_conn_id: null to use the environment alone)"
        )
    return dict(conn_vars)


def connection_from_env(conn_id: str | None, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The AWS_* variables of connection `conn_id` defined in ``AIRFLOW_CONN_<ID>``, or None."""
    if conn_id is None:
        return None
    name = connection_env_name(conn_id)
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    conn = parse_connection(raw, name, AWS_CONN_TYPE)
    return variables_from_connection(conn_id, conn.conn_type, conn.login, conn.password, conn.extra)


def connection_from_airflow(conn_id: str | None) -> dict[str, str] | None:
    """The AWS_* variables of Airflow connection `conn_id` (secrets masked in task logs), or None
    when no connection is named. A named connection that does not exist is a ConfigError."""
    if conn_id is None:
        return None
    from airflow.sdk import BaseHook  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.exceptions import AirflowNotFoundException  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.log import mask_secret  # noqa: PLC0415 airflow is an extra: this module imports without it

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise ConfigError(
            f"Airflow connection {conn_id!r} (aws_conn_id) does not exist; create it (type aws: "
            "the access key id as its login, the secret key as its password, endpoint_url and region_name in "
            "its extra) or set "
            "aws_conn_id: null to use the AWS_* environment variables"
        ) from None
    found = variables_from_connection(conn_id, conn.conn_type, conn.login, conn.password, conn.extra_dejson)
    for key in SECRET_VARIABLES:
        if found.get(key):
            mask_secret(found[key])
    return found


def apply(
    conn_id: str | None, conn_vars: Mapping[str, str] | None, environ: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Puts the connection's variables into `environ` (default: this process's), after the
    precedence check; returns them ({} without a connection)."""
    if not conn_vars or conn_id is None:
        return {}
    env = os.environ if environ is None else environ
    found = joined(conn_vars, env, conn_id)
    env.update(found)
    return found
