"""The Iceberg REST catalog's Airflow connection (``output.catalog.conn_id``) handed to the job.

What the connection holds and how the job reads it: storage/iceberg/rest_auth.py. Here, the ingest
DAG's side: the connection from Airflow's store, as the ``AIRFLOW_CONN_<ID>`` variable of the
spark-submit job's environment (never its command line), as for the Schema Registry
(connections/registry.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from eos_ingest.config.airflow_connection import connection_env_name

if TYPE_CHECKING:
    from eos_ingest.config.pipeline import PipelineConfig


def env_from_airflow(config: PipelineConfig) -> dict[str, str]:
    """``{AIRFLOW_CONN_<ID>: json}`` of the REST catalog's connection for the job's environment (its
    secrets masked in Airflow's logs); empty without one. Inside a task only."""
    conn_id = config.output.catalog.conn_id
    if config.output.format != "iceberg" or config.output.catalog.type != "rest" or conn_id is None:
        return {}
    from airflow.sdk import BaseHook  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.exceptions import AirflowNotFoundException  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.log import mask_secret  # noqa: PLC0415 airflow is an extra: this module imports without it

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return {}  # the job then says which connection is missing and how to make it
    extra = conn.extra_dejson
    for value in (conn.password, extra.get("token")):
        if value:
            mask_secret(str(value))
    encoded = json.dumps({"conn_type": conn.conn_type, "login": conn.login, "password": conn.password,
                          "extra": extra})  # fmt: skip
    mask_secret(encoded)
    return {connection_env_name(conn_id): encoded}
