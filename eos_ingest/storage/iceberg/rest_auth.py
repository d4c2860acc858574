"""The credentials of an Iceberg REST catalog from an Airflow connection (``output.catalog.conn_id``).

The connection (any type; ``http`` is the usual one) holds only what is secret or per deployment;
the catalog's URL is the file's ``output.catalog.uri`` (the connection's host is not read). Its
fields become the REST catalog properties that Iceberg's Spark catalog and pyiceberg's RestCatalog
both take:

- login and password: an OAuth2 client id and secret, ``credential = <login>:<password>``, which
  the client trades for a token at the server's token endpoint (or extra ``oauth2-server-uri``);
- a password without a login, or extra ``token``: a bearer token sent as it is;
- extra ``scope``, ``oauth2-server-uri``: as Iceberg names them (``_`` for ``-`` is read too).

The job reads the connection where Airflow itself would, ``AIRFLOW_CONN_<ID>`` (Airflow's JSON or
URI spelling): the ingest DAG's task sets that variable for spark-submit from Airflow's connection
store (connections/iceberg_rest.py), the CLI takes the operator's own, as for the Schema Registry.
The properties reach Spark as session settings of the running job (catalog.py), never a
spark-submit command line. Here in storage, not connections/, because the catalog reads it when it
is built (a layer may not import its sibling); the connection is parsed by config/airflow_connection.py,
as every connection of the CLI and the job is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos_ingest.config.airflow_connection import connection_env_name, parse_connection
from eos_ingest.errors import ConfigError

SECRET_PROPERTIES = ("credential", "token")
_EXTRA_KEYS = ("token", "scope", "oauth2-server-uri")


def properties_from_fields(
    conn_id: str, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> dict[str, str]:
    """The REST catalog properties of a connection's login, password and extra."""
    found = {}
    for key in _EXTRA_KEYS:
        value = extra.get(key, extra.get(key.replace("-", "_")))
        if value:
            found[key] = str(value)
    if login and password:
        if ":" in login:  # Iceberg splits credential at its first ':'
            raise ConfigError(
                f"Airflow connection {conn_id!r} (output.catalog.conn_id): an OAuth2 client id with ':' "
                "cannot be sent as Iceberg's credential; use the client id without it"
            )
        found["credential"] = f"{login}:{password}"
    elif password:
        found.setdefault("token", password)
    elif login:
        raise ConfigError(
            f"Airflow connection {conn_id!r} (output.catalog.conn_id) has a login but no password; give "
            "the OAuth2 client secret as its password, or a bearer token as its password alone"
        )
    if "credential" in found and "token" in found:
        raise ConfigError(
            f"Airflow connection {conn_id!r} (output.catalog.conn_id) holds both a client id/secret and a "
            "token; keep one (the login and password, or extra token)"
        )
    return found


def properties_from_env(conn_id: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The REST catalog properties of connection `conn_id` (``AIRFLOW_CONN_<ID>``); {} without a
    conn_id. A named connection this process cannot see is a ConfigError naming the fix."""
    if conn_id is None:
        return {}
    name = connection_env_name(conn_id)
    raw = environ.get(name, "").strip()
    if not raw:
        raise ConfigError(
            f"output.catalog.conn_id names Airflow connection {conn_id!r}, which this process does not "
            f"see ({name} is not set): create the connection in Airflow (its login and password are the "
            f"OAuth2 client id and secret, or its password alone a bearer token), set {name} outside Airflow, "
            "or remove output.catalog.conn_id for a catalog without credentials"
        )
    conn = parse_connection(raw, name, "http")
    return properties_from_fields(conn_id, conn.login, conn.password, conn.extra)
