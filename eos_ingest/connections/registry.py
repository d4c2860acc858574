"""Schema Registry url and credentials from an Airflow connection (``value.schema_registry.conn_id``).

The connection is an HTTP-style one: host (with its scheme), port, login, password; its type is
not checked (``http`` is the usual choice). One rule, as for Kafka (connections/kafka.py): the file's
``url``/``username``/``password`` and the connection's are joined, and one set in both to
different values is refused, naming the key, the file and the connection.

The job reads the connection where Airflow itself would: the environment variable
``AIRFLOW_CONN_<ID>`` (a URI such as ``http://user:pass@registry:8081``, or Airflow's JSON). The
ingest DAG sets that variable for spark-submit from Airflow's connection store
(``env_from_airflow``); from the CLI, the variable is the operator's, as for Kafka.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from eos_ingest.config.airflow_connection import connection_env_name
from eos_ingest.config.pipeline import PipelineConfig, replaced
from eos_ingest.errors import ConfigError


def settings_from_env(conn_id: str, environ: Mapping[str, str]) -> dict[str, str] | None:
    """{url, username, password} of ``AIRFLOW_CONN_<ID>`` (only the parts it has), or None."""
    name = connection_env_name(conn_id)
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    fix = (
        f'{name} must be a URI (http://user:password@host:8081) or Airflow connection JSON ({{"host": ...}})'
    )
    if raw.startswith("{"):
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            raise ConfigError(f"{name} is not valid JSON; {fix}") from None
        host, port = str(doc.get("host") or ""), doc.get("port")
        scheme = doc.get("schema") or doc.get("conn_type") or "http"
        login, password = doc.get("login"), doc.get("password")
    else:
        parts = urlsplit(raw)
        if not parts.hostname:
            raise ConfigError(f"{name} has no host; {fix}")
        scheme, host, port = parts.scheme, parts.hostname, parts.port
        login = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
    if not host:
        raise ConfigError(f"{name} has no host; {fix}")
    if "://" not in host:  # Airflow's http connections keep the scheme apart, or in the host
        scheme = scheme if scheme in ("http", "https") else "http"
        host = f"{scheme}://{host}"
    found = {
        "url": f"{host.rstrip('/')}{f':{port}' if port else ''}",
        "username": login,
        "password": password,
    }
    return {k: str(v) for k, v in found.items() if v}


def with_connection(config: PipelineConfig, environ: Mapping[str, str]) -> PipelineConfig:
    """The config with the registry connection's url and credentials joined; unchanged without one."""
    registry = config.value.registry
    if registry is None or not registry.conn_id:
        return config
    conn = settings_from_env(registry.conn_id, environ)
    if conn is None:
        if registry.url:
            return config
        raise ConfigError(
            f"{config.source}: value.schema_registry has no url and connection {registry.conn_id!r} is not "
            f"defined (Airflow, or {connection_env_name(registry.conn_id)}); define it or set url"
        )
    joined: dict[str, str | None] = {}
    for key in ("url", "username", "password"):
        mine, theirs = getattr(registry, key), conn.get(key)
        if mine and theirs and mine.rstrip("/") != theirs.rstrip("/"):
            shown = "***" if key == "password" else f"{mine!r} vs {theirs!r}"
            raise ConfigError(
                f"{config.source}: value.schema_registry.{key} and connection {registry.conn_id!r} set it "
                f"to different values ({shown}); keep it in one place"
            )
        joined[key] = mine or theirs
    merged = dataclasses.replace(
        registry, url=joined["url"], username=joined["username"], password=joined["password"]
    )
    return replaced(config, value=replaced(config.value, registry=merged))


def env_from_airflow(config: PipelineConfig) -> dict[str, str]:
    """``{AIRFLOW_CONN_<ID>: uri}`` of the registry connection, for the job's environment (its
    password masked in Airflow's logs); empty without a connection. Inside a task only."""
    registry = config.value.registry
    if registry is None or not registry.conn_id:
        return {}
    from airflow.sdk import BaseHook  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.exceptions import AirflowNotFoundException  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.log import mask_secret  # noqa: PLC0415 airflow is an extra: this module imports without it

    try:
        conn = BaseHook.get_connection(registry.conn_id)
    except AirflowNotFoundException:
        return {}  # the job then uses the file's url, or says the connection is missing
    if conn.password:
        mask_secret(conn.password)
    uri = conn.get_uri()
    mask_secret(uri)
    return {connection_env_name(registry.conn_id): uri}
