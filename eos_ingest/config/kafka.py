"""What a pipeline reads from Kafka: its topics, the librdkafka settings of its `kafka:` section
(and their default), where a new partition starts, and how many offsets a batch takes."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from eos_ingest.config.checks import as_number, problem

START_FROM = ("earliest", "latest")
# The settings of a file without a `kafka:` section (expanded as the file's values are).
DEFAULT_KAFKA = {"bootstrap.servers": "${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}"}
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _topic_list(value: Any) -> Any:
    if not (isinstance(value, list) and value):
        raise problem("give a list of one or more topics, e.g. [orders]")
    return value


def _topic(value: Any) -> str:
    if not (isinstance(value, str) and _TOPIC.fullmatch(value) and value not in (".", "..")):
        raise problem("a Kafka topic name is 1-249 characters of [a-zA-Z0-9._-]")
    return value


def _distinct_topics(topics: tuple[str, ...]) -> tuple[str, ...]:
    for i, t in enumerate(topics):
        if topics.index(t) != i:
            raise problem("the topic is listed twice; remove one", at=f"[{i}]", value=t)
    return topics


def _kafka(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise problem("give a mapping of librdkafka settings")
    settings: dict[str, str] = {}
    for k, v in value.items():
        v = str(v).lower() if isinstance(v, bool) else v  # YAML true is True; librdkafka wants "true"
        if not (isinstance(k, str) and isinstance(v, str | int | float)):
            raise problem("a librdkafka setting is `name: value` with a scalar value", at=f".{k}", value=v)
        settings[k] = str(v)
    # Exactly-once rests on reading committed transactions only: config must not weaken it.
    level = settings.get("isolation.level", "read_committed")
    if level != "read_committed":
        raise problem("remove it; reads are always read_committed", at=".isolation.level", value=level)
    return settings


def _max_records(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # what a ${VAR} gives is always a string
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise problem("use a whole number >= 1, e.g. 100000")
    return value


def _kafka_timeout(value: Any) -> float:
    value = as_number(value)
    if not (isinstance(value, int | float) and not isinstance(value, bool) and 1 <= value <= 3600):
        raise problem("use seconds, at least 1 and at most 3600, e.g. 30")
    return float(value)


Topics = Annotated[
    tuple[Annotated[str, BeforeValidator(_topic)], ...],
    BeforeValidator(_topic_list),
    AfterValidator(_distinct_topics),
]
KafkaSettings = Annotated[dict[str, str], BeforeValidator(_kafka)]
MaxRecords = Annotated[int, BeforeValidator(_max_records)]
KafkaTimeout = Annotated[float, BeforeValidator(_kafka_timeout)]
