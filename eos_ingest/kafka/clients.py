"""librdkafka clients built from a pipeline's settings: a setting librdkafka refuses is bad config.

confluent-kafka checks every setting as it builds a client and raises KafkaException(_INVALID_ARG)
for an unknown name, a value of the wrong type or outside its range, or a file it cannot load. That
needs the user's config fixed, not a broker retried: it becomes one ConfigError line (exit 2), raised
before anything is planned, read or written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from eos_ingest.errors import ConfigError

Client = TypeVar("Client")

_FIX = (
    "fix it in the pipeline's `kafka:` settings (or its Airflow connection's extra); "
    "librdkafka's CONFIGURATION.md lists every setting and its values"
)


def build(factory: Callable[[dict[str, Any]], Client], conf: dict[str, Any]) -> Client:
    """`factory(conf)` (Consumer, AdminClient, ...), with a refused setting raised as ConfigError."""
    try:
        return factory(conf)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG):
            raise
        # librdkafka's text names the setting, and the value of a number or a choice; a string
        # setting such as sasl.password takes any value, so a secret does not get here (and
        # EosIngestError redacts its messages anyway).
        raise ConfigError(f"librdkafka refused a kafka setting: {error.str().strip()}; {_FIX}") from exc
