"""An Airflow connection as Airflow itself reads it from the environment, ``AIRFLOW_CONN_<ID>``
(its JSON or URI spelling), without importing Airflow: how the CLI and the Spark job see the same
Kafka, AWS, Schema Registry and Iceberg REST connections the DAGs get from Airflow's store. Here in
config, below storage and connections, because both read connections this way."""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from eos_ingest.errors import ConfigError


def connection_env_name(conn_id: str) -> str:
    """The environment variable Airflow reads a connection from: ``AIRFLOW_CONN_<ID>``."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"


@dataclasses.dataclass(frozen=True)
class EnvConnection:
    """An Airflow connection as spelled in ``AIRFLOW_CONN_<ID>`` (the password never shown)."""

    conn_type: str | None
    login: str | None
    password: str | None = dataclasses.field(repr=False)
    extra: dict[str, Any]


def parse_connection(raw: str, name: str, expected_type: str) -> EnvConnection:
    """Airflow's two spellings of a connection in variable `name`: JSON (``{"conn_type": ...,
    "login": ..., "extra": {...}}``) or a URI (``type://login:password@?key=value``, each query
    parameter an extra key, or ``__extra__`` holding the JSON). A bad value is a ConfigError that
    never repeats it (it may hold secrets); `expected_type` only shapes the example in it."""
    fix = f'{name} must be Airflow connection JSON ({{"conn_type": "{expected_type}", "extra": {{...}}}}) or a URI'
    if raw.startswith("{"):
        try:
            doc = json.loads(raw)
            extra = doc.get("extra") or {}
            extra = json.loads(extra) if isinstance(extra, str) else extra
        except (json.JSONDecodeError, AttributeError):
            raise ConfigError(f"{name} is not valid JSON; {fix}") from None
        if not isinstance(extra, dict):
            raise ConfigError(f"{name}: 'extra' is not a JSON object; {fix}")
        return EnvConnection(doc.get("conn_type"), doc.get("login"), doc.get("password"), extra)
    parts = urlsplit(raw)
    if not parts.scheme:
        raise ConfigError(f"{name} has no connection type; {fix}")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if "__extra__" in query:
        try:
            extra = json.loads(query["__extra__"])
        except json.JSONDecodeError:
            raise ConfigError(f"{name}: its __extra__ is not valid JSON; {fix}") from None
    else:
        extra = query
    if not isinstance(extra, dict):
        raise ConfigError(f"{name}: its __extra__ is not a JSON object; {fix}")
    return EnvConnection(
        parts.scheme.replace("-", "_"),
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password else None,
        extra,
    )
