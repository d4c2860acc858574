"""Kafka settings from an Airflow connection, one rule of precedence, and the way to the Spark job.

A pipeline's ``kafka_conn_id`` (default ``kafka_default``) names a connection of the Kafka
provider's type (conn_type ``kafka``) whose extra JSON is librdkafka config, e.g.
``{"bootstrap.servers": "broker:9092", "sasl.password": "..."}``.

One rule, the same in the CLI, the DAGs, the Spark job and the Ingestion page
(``resolve_kafka_settings``): a pipeline reads ONE cluster, so the file's ``kafka:`` settings and
the connection's settings are joined, and a key that both set to different values is refused
(ConfigError naming the key, the file and the connection). Nothing is silently overridden. A
file without a ``kafka:`` section has only the built-in default
``bootstrap.servers: ${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}``, which a connection replaces.
Inside Airflow the connection comes from Airflow's connection store; the CLI (no Airflow import)
reads it from the ``AIRFLOW_CONN_<ID>`` environment variable, as Airflow itself does.

The connection's settings reach the spark-submit job in the environment variable
``EOS_KAFKA_SETTINGS_JSON``, never on its command line, in a log or in a rendered template; the
job resolves them against the file again (``with_kafka_overrides``). Only the functions named
``*_from_airflow`` import Airflow; the rest is pure and used by the Spark job too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from eos_ingest.config.airflow_connection import connection_env_name, parse_connection
from eos_ingest.config.pipeline import PipelineConfig, replaced
from eos_ingest.errors import ConfigError
from eos_ingest.redact import is_secret_key

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


def resolve_kafka_settings(
    config: PipelineConfig, conn_settings: Mapping[str, str] | None, conn_id: str | None = None
) -> dict[str, str]:
    """The pipeline's librdkafka settings: the file's ``kafka:`` joined with the connection's.

    A file without a ``kafka:`` section contributes only its built-in default, which the
    connection replaces. A key set both in the file and in the connection must have one value;
    otherwise ConfigError names the key and both places (secret values shown as ``***``), so a
    pipeline can never read one cluster from the CLI and another from Airflow.
    """
    if not conn_settings:
        return dict(config.kafka)
    if config.kafka_is_default:
        return {**config.kafka, **conn_settings}
    conflicts = sorted(
        k for k in config.kafka.keys() & conn_settings.keys() if config.kafka[k] != conn_settings[k]
    )
    if conflicts:

        def shown(key: str, value: str) -> str:
            return "***" if is_secret_key(key) else repr(value)

        where = f"Airflow connection {conn_id or config.kafka_conn_id!r}"
        lines = "; ".join(
            f"kafka.{k} is {shown(k, config.kafka[k])} in the file but {shown(k, conn_settings[k])} in {where}"
            for k in conflicts
        )
        raise ConfigError(
            f"{config.source}: {lines}. A pipeline reads one cluster: keep each setting in one "
            f"place (remove it from the file's kafka: section or from the connection's extra), "
            f"or set kafka_conn_id: null to use the file alone"
        )
    return {**config.kafka, **conn_settings}


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
    return replaced(config, kafka=resolve_kafka_settings(config, parsed))


def encode_settings(settings: Mapping[str, str]) -> str:
    """The EOS_KAFKA_SETTINGS_JSON value for `settings` (sorted keys, so it is stable)."""
    return json.dumps(dict(settings), sort_keys=True)


def secret_values(settings: Mapping[str, str]) -> list[str]:
    """The values to mask in logs: those of password-like keys (see config.is_secret_key)."""
    return [v for k, v in settings.items() if is_secret_key(k) and v]


def shown_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings with secret values replaced by ``***``, for logs."""
    return {k: "***" if is_secret_key(k) else v for k, v in settings.items()}


def connection_settings_from_env(conn_id: str | None, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The librdkafka settings of connection `conn_id` defined in ``AIRFLOW_CONN_<ID>``, or None.

    Airflow's two spellings are read: JSON (``{"conn_type": "kafka", "extra": {...}}``) and URI
    (``kafka://?bootstrap.servers=broker%3A9092``, each query parameter an extra key, or
    ``__extra__`` holding the JSON). This is how the CLI sees the same connection as Airflow
    without importing it. The message of a bad value never repeats it (it may hold secrets).
    """
    if conn_id is None:
        return None
    name = connection_env_name(conn_id)
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    conn = parse_connection(raw, name, KAFKA_CONN_TYPE)
    conn_type, extra = conn.conn_type, conn.extra
    if conn_type != KAFKA_CONN_TYPE:
        raise ConfigError(
            f"{name} has conn_type {conn_type!r}; eos-ingest needs a connection of the Kafka "
            f"provider's type {KAFKA_CONN_TYPE!r} whose extra is librdkafka config"
        )
    return settings_from_extra(extra, conn_id)


def config_for_cli(
    config: PipelineConfig, environ: Mapping[str, str] | None = None
) -> tuple[PipelineConfig, dict[str, str] | None]:
    """The config as the CLI runs it: the same precedence as in Airflow, with the connection read
    from ``AIRFLOW_CONN_<ID>``. Returns (resolved config, the connection's settings or None)."""
    conn_settings = connection_settings_from_env(
        config.kafka_conn_id, os.environ if environ is None else environ
    )
    if conn_settings is None:
        return config, None
    return replaced(config, kafka=resolve_kafka_settings(config, conn_settings)), conn_settings


# -- Airflow side ---------------------------------------------------------------------------------


def connection_settings_from_airflow(conn_id: str | None) -> dict[str, str] | None:
    """The librdkafka settings of Airflow connection `conn_id`, with secret values masked in logs.

    None when `conn_id` is None or the connection does not exist: the pipeline then runs on its
    YAML settings, and a warning says so (a missing ``kafka_default`` must not stop a pipeline
    whose file already names its brokers). A connection of another type is a ConfigError.
    """
    if conn_id is None:
        return None
    from airflow.sdk import BaseHook  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.exceptions import AirflowNotFoundException  # noqa: PLC0415 airflow is an extra: this module imports without it
    from airflow.sdk.log import mask_secret  # noqa: PLC0415 airflow is an extra: this module imports without it

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
    """The config with its Airflow Kafka connection's settings joined (resolve_kafka_settings).

    Returns (merged config, the connection's settings or None). Call it inside a task only:
    it reads a connection, which a DAG file must not do while it is parsed.
    """
    conn_settings = connection_settings_from_airflow(config.kafka_conn_id)
    if conn_settings is None:
        return config, None
    merged = replaced(config, kafka=resolve_kafka_settings(config, conn_settings))
    log.info(
        "pipeline %s: kafka settings from connection %r: %s",
        config.name,
        config.kafka_conn_id,
        shown_settings(merged.kafka),
    )
    return merged, conn_settings
