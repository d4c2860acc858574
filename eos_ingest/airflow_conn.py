"""Kafka settings from an Airflow connection, and how they reach the Spark job unseen.

In Airflow, a pipeline's ``kafka_conn_id`` (default ``kafka_default``) names a connection of the
Kafka provider's type (conn_type ``kafka``) whose extra JSON is librdkafka config, e.g.
``{"bootstrap.servers": "broker:9092", "sasl.password": "..."}``. Those settings are merged over
the YAML ``kafka:`` settings (the connection wins), so one pipeline file works in every
environment and its secrets live in Airflow's connection store, not in the repository.

The merged settings reach the spark-submit job in the environment variable
``EOS_KAFKA_SETTINGS_JSON``, never on its command line, in a log or in a rendered template; the
job merges it over the file's settings again (``with_kafka_overrides``). Only the functions named
``*_from_airflow`` import Airflow; the rest is pure and used by the Spark job too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

from eos_ingest.config import PipelineConfig, is_secret_key
from eos_ingest.errors import ConfigError

log = logging.getLogger(__name__)

KAFKA_SETTINGS_ENV = "EOS_KAFKA_SETTINGS_JSON"
KAFKA_CONN_TYPE = "kafka"
# Keys of the Kafka provider whose values are Python callables (dotted paths in the extra): they
# cannot travel to a Spark job as text, and Spark's Java client would not know them anyway.
_CALLBACK_KEYS = ("error_cb", "throttle_cb", "stats_cb", "log_cb", "oauth_cb", "on_commit")


def settings_from_extra(extra: Mapping[str, Any], conn_id: str = "?") -> dict[str, str]:
    """librdkafka settings of a Kafka connection's extra, every value as a string.

    Booleans become ``true``/``false`` (librdkafka's spelling); nested values and callbacks are
    refused with a ConfigError naming the connection and the key.
    """
    settings: dict[str, str] = {}
    for key, value in extra.items():
        where = f"Airflow connection {conn_id!r}: extra key {key!r}"
        if key in _CALLBACK_KEYS:
            raise ConfigError(
                f"{where} is a Python callback, which eos-ingest cannot pass to its Spark job; "
                "remove it, or use SASL settings (sasl.mechanism, sasl.username, sasl.password)"
            )
        if isinstance(value, bool):
            settings[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            settings[key] = str(value)
        elif value is None:
            continue  # an empty form field in the UI: not a setting
        else:
            raise ConfigError(
                f"{where} has a {type(value).__name__} value; librdkafka settings are strings, "
                'numbers or booleans, e.g. {"bootstrap.servers": "broker:9092"}'
            )
    return settings


def merge_settings(file_settings: Mapping[str, str], conn_settings: Mapping[str, str]) -> dict[str, str]:
    """The YAML ``kafka:`` settings with the connection's settings over them (the connection wins)."""
    return {**file_settings, **conn_settings}


def with_kafka_overrides(config: PipelineConfig, overrides_json: str | None) -> PipelineConfig:
    """The config with ``overrides_json`` (the value of EOS_KAFKA_SETTINGS_JSON) over its kafka settings.

    An empty or absent value returns the config unchanged. A value that is not a JSON object of
    strings raises ConfigError; the message never repeats the value, which may hold secrets.
    """
    if not overrides_json:
        return config
    try:
        parsed = json.loads(overrides_json)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{KAFKA_SETTINGS_ENV} is not valid JSON (line {exc.lineno}, column {exc.colno}); "
            "it must be a JSON object of librdkafka settings"
        ) from None
    if not isinstance(parsed, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()
    ):
        raise ConfigError(f"{KAFKA_SETTINGS_ENV} must be a JSON object of strings to strings")
    return dataclasses.replace(config, kafka=merge_settings(config.kafka, parsed))


def encode_settings(settings: Mapping[str, str]) -> str:
    """The EOS_KAFKA_SETTINGS_JSON value for `settings` (sorted keys, so it is stable)."""
    return json.dumps(dict(settings), sort_keys=True)


def secret_values(settings: Mapping[str, str]) -> list[str]:
    """The values to mask in logs: those of password-like keys (see config.is_secret_key)."""
    return [v for k, v in settings.items() if is_secret_key(k) and v]


def shown_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings with secret values replaced by ``***``, for logs."""
    return {k: "***" if is_secret_key(k) else v for k, v in settings.items()}


# -- Airflow side ---------------------------------------------------------------------------------


def connection_settings_from_airflow(conn_id: str | None) -> dict[str, str] | None:
    """The librdkafka settings of Airflow connection `conn_id`, with secret values masked in logs.

    None when `conn_id` is None or the connection does not exist: the pipeline then runs on its
    YAML settings, and a warning says so (a missing ``kafka_default`` must not stop a pipeline
    whose file already names its brokers). A connection of another type is a ConfigError.
    """
    if conn_id is None:
        return None
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException
    from airflow.sdk.log import mask_secret

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        log.warning(
            "Airflow connection %r does not exist: using the pipeline file's kafka settings. "
            'Create it (conn_type kafka, extra {"bootstrap.servers": ...}) or set kafka_conn_id: null',
            conn_id,
        )
        return None
    if conn.conn_type != KAFKA_CONN_TYPE:
        raise ConfigError(
            f"Airflow connection {conn_id!r} has conn_type {conn.conn_type!r}; eos-ingest needs a "
            f"connection of the Kafka provider's type {KAFKA_CONN_TYPE!r} whose extra is librdkafka config"
        )
    settings = settings_from_extra(conn.extra_dejson, conn_id)
    # Airflow masks extra keys with sensitive names already; ours also covers sasl.jaas.config,
    # ssl.key.pem and the like, and the JSON handed to Spark as a whole.
    for value in secret_values(settings):
        mask_secret(value)
    return settings


def config_from_airflow(config: PipelineConfig) -> tuple[PipelineConfig, dict[str, str] | None]:
    """The config with its Airflow Kafka connection merged over its kafka settings.

    Returns (merged config, the connection's settings or None). Call it inside a task only:
    it reads a connection, which a DAG file must not do while it is parsed.
    """
    conn_settings = connection_settings_from_airflow(config.kafka_conn_id)
    if conn_settings is None:
        return config, None
    merged = dataclasses.replace(config, kafka=merge_settings(config.kafka, conn_settings))
    log.info(
        "pipeline %s: kafka settings from connection %r: %s",
        config.name,
        config.kafka_conn_id,
        shown_settings(merged.kafka),
    )
    return merged, conn_settings
