"""Pipeline config: the demo loads, every mistake names the key, the value and the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest import paths
from eos_ingest.config.pipeline import (
    PipelineConfig,
    is_secret_key,
    load_pipeline,
    load_pipeline_by_name,
    parse_ddl,
)
from eos_ingest.errors import ConfigError
from eos_ingest.schema.columns import INTERNAL_COLUMNS

BASE: dict[str, Any] = {
    "name": "orders",
    "topics": ["orders"],
    "value": {
        "format": "json",
        "schema": "id BIGINT, region STRING, tags ARRAY<STRING>, price DECIMAL(10,2)",
    },
}


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_PIPELINES_DIR", raising=False)
    monkeypatch.delenv("EOS_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)
    return tmp_path / "state"


def write(folder: Path, doc: dict[str, Any] | str, name: str = "orders") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc), encoding="utf-8")
    return path


def with_(**changes: Any) -> dict[str, Any]:
    """BASE with dotted keys changed; a value of ... removes the key."""
    doc = json.loads(json.dumps(BASE))
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = doc
        for p in parents:
            target = target.setdefault(p, {})
        if value is ...:
            target.pop(last, None)
        else:
            target[last] = value
    return doc


def test_demo_pipeline_loads(state_dir: Path) -> None:
    cfg = load_pipeline_by_name("demo", paths.REPO_ROOT / "pipelines")
    assert (cfg.name, cfg.topics, cfg.start_from, cfg.max_records_per_partition) == (
        "demo",
        ("demo_events",),
        "earliest",
        50000,
    )
    assert cfg.payload_columns == [
        ("event_id", "BIGINT"),
        ("user_id", "STRING"),
        ("action", "STRING"),
        ("amount", "DOUBLE"),
        ("event_time", "TIMESTAMP"),
    ]
    assert cfg.output_path == state_dir.resolve() / "tables" / "demo_events"
    assert cfg.quarantine_path == state_dir.resolve() / "tables" / "demo_events_quarantine"
    assert cfg.output.partition_by == ("event_date",)
    assert cfg.control_db_url == f"sqlite:///{state_dir.resolve()}/control.db"
    assert cfg.kafka_settings == {"bootstrap.servers": "127.0.0.1:9092"}
    assert (cfg.schedule, cfg.kafka_conn_id, cfg.expectations) == ("@hourly", "kafka_default", ())
    assert cfg.spark_conn_id == "spark_default"


def test_defaults_of_a_minimal_file(tmp_path: Path, state_dir: Path) -> None:
    cfg = load_pipeline(
        write(tmp_path, {"name": "orders", "topics": ["orders"], "value": {"schema": "id INT"}})
    )
    assert cfg.value.format == "json"
    assert cfg.output_path == state_dir.resolve() / "tables" / "orders"
    assert cfg.quarantine_path == state_dir.resolve() / "tables" / "orders_quarantine"
    assert (cfg.start_from, cfg.max_records_per_partition, cfg.schedule) == ("earliest", 100_000, "@hourly")
    assert cfg.control_db_url == f"sqlite:///{state_dir.resolve() / 'control.db'}"
    assert cfg.kafka_settings == {"bootstrap.servers": "127.0.0.1:9092"}


def test_eos_control_db_url_is_the_default_a_file_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docker-compose.yaml sets EOS_CONTROL_DB_URL to its PostgreSQL: pipelines without a
    control_db_url use it; a file that names its own DB keeps it."""
    url = "postgresql+psycopg://eos:pw@postgres:5432/eos_control"
    monkeypatch.setenv("EOS_CONTROL_DB_URL", url)
    assert load_pipeline(write(tmp_path, BASE)).control_db_url == url
    own = with_(control_db_url="postgresql+psycopg://other@db/own")
    assert load_pipeline(write(tmp_path, own)).control_db_url == "postgresql+psycopg://other@db/own"
    assert (
        load_pipeline_by_name("demo", paths.REPO_ROOT / "pipelines").control_db_url == url
    )  # compose demo's DB

    monkeypatch.setenv("EOS_CONTROL_DB_URL", "mysql://eos:pw@db/eos")
    with pytest.raises(ConfigError) as raised:
        load_pipeline(write(tmp_path, BASE))
    message = str(raised.value)
    assert "control_db_url = 'mysql://eos:***@db/eos' is not valid" in message
    assert "$EOS_CONTROL_DB_URL" in message and "pw@" not in message


def test_other_valid_forms(tmp_path: Path, state_dir: Path) -> None:
    doc = with_(
        value={"format": "raw"},
        kafka={"bootstrap.servers": "b:9092", "enable.idempotence": True, "session.timeout.ms": 6000},
        kafka_conn_id=None,
        schedule=None,
        output={"path": "/data/orders", "partition_by": ["kafka_topic", "event_date"]},
        control_db_url="sqlite:///db/control.db",
        expectations=[{"type": "expect_column_values_to_not_be_null", "column": "kafka_key"}],
    )
    cfg = load_pipeline(write(tmp_path, doc))
    assert (cfg.value.format, cfg.value.schema, cfg.payload_columns) == ("raw", None, [])
    assert cfg.kafka_settings == {
        "bootstrap.servers": "b:9092",
        "enable.idempotence": "true",
        "session.timeout.ms": "6000",
    }
    assert (cfg.kafka_conn_id, cfg.schedule) == (None, None)
    assert (cfg.output_path, cfg.quarantine_path) == (Path("/data/orders"), Path("/data/orders_quarantine"))
    assert cfg.output.partition_by == ("kafka_topic", "event_date")
    assert cfg.control_db_url == f"sqlite:///{state_dir.resolve() / 'db' / 'control.db'}"  # not the cwd


def test_partition_by_uses_the_schema_spelling(tmp_path: Path) -> None:
    cfg = load_pipeline(write(tmp_path, with_(output={"partition_by": ["REGION"]})))
    assert cfg.output.partition_by == ("region",)


def test_start_from_message_is_exact(tmp_path: Path) -> None:
    path = write(tmp_path, with_(start_from="oldest"))
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    assert str(raised.value) == f"{path}: start_from = 'oldest' is not valid; use 'earliest' or 'latest'"


# (change to BASE, dotted key, value as shown, words of the fix)
INVALID = [
    pytest.param(with_(name="Orders"), "name", "'Orders'", "file name 'orders'", id="name-not-lowercase"),
    pytest.param(with_(name="payments"), "name", "'payments'", "file name 'orders'", id="name-not-file-stem"),
    pytest.param(with_(name=...), "name", "None", "file name", id="name-missing"),
    pytest.param(with_(topics=[]), "topics", "[]", "one or more topics", id="no-topics"),
    pytest.param(with_(topics="orders"), "topics", "'orders'", "give a list", id="topics-not-a-list"),
    pytest.param(with_(topics=["ok", "bad topic"]), "topics[1]", "'bad topic'", "[a-zA-Z0-9._-]", id="topic-bad-char"),
    pytest.param(with_(topics=[".."]), "topics[0]", "'..'", "1-249 characters", id="topic-dotdot"),
    pytest.param(with_(topics=["t" * 250]), "topics[0]", "'ttt", "1-249 characters", id="topic-too-long"),
    pytest.param(with_(topics=["a", "a"]), "topics[1]", "'a'", "listed twice", id="topic-twice"),
    pytest.param(with_(max_records_per_partition=0), "max_records_per_partition", "0", ">= 1", id="max-zero"),
    pytest.param(with_(max_records_per_partition="lots"), "max_records_per_partition", "'lots'", ">= 1", id="max-text"),
    pytest.param(with_(max_records_per_partition=True), "max_records_per_partition", "True", ">= 1", id="max-bool"),
    pytest.param(with_(value__format="protobuf"), "value.format", "'protobuf'", "use 'json' or 'raw' or 'avro'", id="format"),
    pytest.param(with_(value__schema=...), "value.schema", "None", "Spark DDL", id="schema-missing-for-json"),
    pytest.param(with_(value=...), "value.schema", "None", "Spark DDL", id="value-missing"),
    pytest.param(with_(value={"format": "raw", "schema": "a INT"}), "value.schema", "'a INT'", "remove it", id="schema-with-raw"),
    pytest.param(with_(value__schema="a INT, A STRING"), "value.schema", "'a INT, A STRING'", "declared twice", id="schema-dup"),
    pytest.param(with_(value__schema="kafka_offset BIGINT"), "value.schema", "'kafka_offset BIGINT'", "rename it", id="schema-reserved"),
    pytest.param(with_(value__schema="event_date DATE"), "value.schema", "'event_date DATE'", "rename it", id="schema-reserved-date"),
    pytest.param(with_(value__schema="a STIRNG"), "value.schema", "'a STIRNG'", "did you mean 'STRING'", id="schema-type-typo"),
    pytest.param(with_(value__schema="a INT,, b INT"), "value.schema", "'a INT,, b INT'", "not `name TYPE`", id="schema-empty-col"),
    pytest.param(with_(value__schema="justaname"), "value.schema", "'justaname'", "not `name TYPE`", id="schema-no-type"),
    pytest.param(with_(value__schema="m MAP<STRING, INT"), "value.schema", "'m MAP<STRING, INT'", "not closed", id="schema-unbalanced"),
    pytest.param(with_(output={"partition_by": ["regoin"]}), "output.partition_by[0]", "'regoin'", "did you mean 'region'", id="partition-unknown"),
    pytest.param(with_(output={"partition_by": ["tags"]}), "output.partition_by[0]", "'tags'", "ARRAY column cannot", id="partition-array"),
    pytest.param(with_(output={"partition_by": ["kafka_offset"]}), "output.partition_by[0]", "'kafka_offset'", "use one of", id="partition-offset"),
    pytest.param(with_(output={"partition_by": ["event_date", "event_date"]}), "output.partition_by[1]", "'event_date'", "listed twice", id="partition-twice"),
    pytest.param(with_(output={"partition_by": "event_date"}), "output.partition_by", "'event_date'", "give a list", id="partition-not-list"),
    pytest.param(with_(output={"path": "t", "quarantine_path": "t"}), "output.quarantine_path", "/t'", "differ from output.path", id="same-paths"),
    pytest.param(with_(output={"path": "s3://b/t"}), "output.path", "'s3://b/t'", "write s3a://", id="s3-scheme"),
    pytest.param(with_(output={"quarantine_path": "gs://b/t"}), "output.quarantine_path", "'gs://b/t'", "only s3a://", id="gs-scheme"),
    pytest.param(with_(output={"path": "s3a://lake"}), "output.path", "'s3a://lake'", "a bucket (3-63", id="s3a-no-prefix"),
    pytest.param(with_(output={"path": "s3a://Lake_1/t"}), "output.path", "'s3a://Lake_1/t'", "a bucket (3-63", id="s3a-bad-bucket"),
    pytest.param(with_(output={"path": "s3a://AKIA:hunter2@lake/t"}), "output.path", "'s3a://***@…'", "no credentials in the URI", id="s3a-credentials"),
    pytest.param(with_(output={"path": "s3a://lake/t"}), "control_db_url", "sqlite:///", "cannot share one SQLite file", id="s3a-sqlite"),
    pytest.param(with_(control_db_url="mysql://h/db"), "control_db_url", "'mysql://h/db'", "postgresql+psycopg", id="db-url"),
    pytest.param(with_(schedule="every hour"), "schedule", "'every hour'", "5-field cron", id="schedule-words"),
    pytest.param(with_(schedule="@minutely"), "schedule", "'@minutely'", "@hourly", id="schedule-preset"),
    pytest.param(with_(expectations=[{"column": "id"}]), "expectations[0]", "{'column': 'id'}", 'a "type"', id="expectation-no-type"),
    pytest.param(with_(expectations={"type": "x"}), "expectations", "{'type': 'x'}", "give a list", id="expectations-not-list"),
    pytest.param(with_(kafka={"sasl": {"user": "u"}}), "kafka.sasl", "{'user': 'u'}", "scalar value", id="kafka-nested"),
    pytest.param(with_(kafka=["a"]), "kafka", "['a']", "mapping of librdkafka", id="kafka-not-mapping"),
    pytest.param(with_(kafka=None), "kafka", "None", "mapping of librdkafka", id="kafka-null"),
    pytest.param(with_(output={"path": None}), "output.path", "None", "non-empty path", id="output-path-null"),
    pytest.param(with_(value=None), "value", "None", "must be a mapping", id="value-null"),
    pytest.param(with_(expectations=None), "expectations", "None", "give a list", id="expectations-null"),
    pytest.param(with_(kafka={"isolation.level": "read_uncommitted"}), "kafka.isolation.level", "'read_uncommitted'", "always read_committed", id="isolation-level"),
    pytest.param(with_(kafka_conn_id=""), "kafka_conn_id", "''", "null for none", id="conn-id-empty"),
    pytest.param(with_(spark_conn_id=None), "spark_conn_id", "None", "leave the key out for the default", id="spark-conn-id-null"),
    pytest.param(with_(topic=["orders"]), "topic", "['orders']", "did you mean 'topics'", id="unknown-key"),
    pytest.param(with_(value__shema="a INT"), "value.shema", "'a INT'", "did you mean 'schema'", id="unknown-nested-key"),
    pytest.param(with_(output={"partition": []}), "output.partition", "[]", "did you mean 'partition_by'", id="unknown-output-key"),
    pytest.param(with_(colour="blue"), "colour", "'blue'", "unknown key; known: name, topics", id="unknown-key-no-hint"),
    pytest.param(with_(key={"format": "protobuf"}), "key.format", "'protobuf'", "use 'raw' or 'string' or 'avro'", id="key-format"),
    pytest.param(with_(metadata={"headers": "list"}), "metadata.headers", "'list'", "use 'none' or 'map' or 'array'", id="headers-shape"),
    pytest.param(with_(metadata={"timestamp_type": "yes"}), "metadata.timestamp_type", "'yes'", "use true or false", id="timestamp-type"),
    pytest.param(with_(metadata={"header": "map"}), "metadata.header", "'map'", "did you mean 'headers'", id="metadata-unknown-key"),
    pytest.param(with_(value__schema="kafka_headers STRING"), "value.schema", "'kafka_headers STRING'", "rename it", id="schema-reserved-headers"),
]  # fmt: skip


@pytest.mark.parametrize(
    "column", [*INTERNAL_COLUMNS, "RAW_VALUE", "_EOS_Error"], ids=lambda c: f"internal-{c}"
)
def test_payload_column_named_like_a_parser_internal_column_is_refused(tmp_path: Path, column: str) -> None:
    assert {"raw_value", "_eos_error", "_eos_corrupt_record"} <= set(INTERNAL_COLUMNS)
    path = write(tmp_path, with_(value__schema=f"id BIGINT, {column} STRING"))
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: value.schema = ")
    assert f"column {column!r} is a name the parser uses" in message and "leave it out" in message


def test_payload_column_error_is_accepted_it_only_names_a_quarantine_column(tmp_path: Path) -> None:
    cfg = load_pipeline(write(tmp_path, with_(value__schema="id BIGINT, error STRING")))
    assert [n for n, _ in cfg.payload_columns] == ["id", "error"]


@pytest.mark.parametrize(("doc", "key", "shown", "fix"), INVALID)
def test_invalid_config_names_file_key_value_and_fix(
    tmp_path: Path, doc: dict[str, Any], key: str, shown: str, fix: str
) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: {key} = ")
    assert shown in message
    assert "is not valid;" in message
    assert fix in message


def test_s3a_tables_need_postgres_and_keep_their_uri(tmp_path: Path) -> None:
    doc = with_(output={"path": "s3a://lake/tables/orders/"}, control_db_url="postgresql+psycopg://u:pw@h/db")
    cfg = load_pipeline(write(tmp_path, doc))
    assert (cfg.output_path, cfg.quarantine_path) == (
        "s3a://lake/tables/orders",
        "s3a://lake/tables/orders_quarantine",
    )


def test_a_credential_in_an_s3a_uri_is_never_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_pipeline(write(tmp_path, with_(output={"path": "s3a://AKIA:hunter2@lake/t"})))
    assert "hunter2" not in str(raised.value) and "AKIA" not in str(raised.value)


def test_unknown_key_hint_is_left_out_when_nothing_is_close(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_pipeline(write(tmp_path, with_(colour="blue")))
    assert "did you mean" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        pytest.param("name: orders\nname: x\n", "given twice", id="duplicate-key"),
        pytest.param("name: [orders\n", "not valid YAML", id="bad-yaml"),
        pytest.param(
            "- a\n- b\n", "<file> = ['a', 'b'] is not valid; it must be a mapping", id="not-a-mapping"
        ),
        pytest.param("", "<file> = None", id="empty-file"),
    ],
)
def test_file_level_errors(tmp_path: Path, text: str, fix: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=str(path)) as raised:
        load_pipeline(path)
    assert fix in str(raised.value)


def test_env_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state_dir: Path) -> None:
    monkeypatch.setenv("BROKERS", "k1:9092,k2:9092")
    monkeypatch.setenv("TOPIC_SUFFIX", "v2")
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.setenv("MAX", "250")
    monkeypatch.delenv("UNSET_FOR_TEST", raising=False)
    doc = with_(
        topics=["orders_${TOPIC_SUFFIX}"],
        kafka={
            "bootstrap.servers": "${BROKERS}",
            "client.id": "${UNSET_FOR_TEST:-eos}",
            "group.id": "${EMPTY:-fallback}",
            "debug": "x${EMPTY}y",
        },
        max_records_per_partition="${MAX}",
        output={"path": "${EOS_STATE_DIR}/custom"},
    )
    cfg = load_pipeline(write(tmp_path, doc))
    assert cfg.topics == ("orders_v2",)
    assert cfg.kafka_settings == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "client.id": "eos",
        "group.id": "fallback",
        "debug": "xy",
    }
    assert cfg.max_records_per_partition == 250
    assert cfg.output_path == state_dir.resolve() / "custom"


def test_state_dir_always_expands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EOS_STATE_DIR")
    cfg = load_pipeline(write(tmp_path, with_(control_db_url="sqlite:///${EOS_STATE_DIR}/c.db")))
    assert cfg.control_db_url == f"sqlite:///{paths.state_dir()}/c.db"


def test_unset_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_BROKER", raising=False)
    path = write(tmp_path, with_(kafka={"bootstrap.servers": "${NO_SUCH_BROKER}"}))
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: kafka.bootstrap.servers = '${{NO_SUCH_BROKER}}' is not valid")
    assert "environment variable NO_SUCH_BROKER is not set" in message


def test_to_dict_masks_secrets_and_is_json(tmp_path: Path) -> None:
    kafka = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.username": "svc",
        "sasl.password": "hunter2",
        "sasl.jaas.config": "org.apache.kafka...PlainLoginModule required password='hunter2';",
        "sasl.oauthbearer.client.secret": "s3cr3t",
        "ssl.key.password": "pw",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
        "ssl.keystore.location": "/etc/kafka/keystore.p12",
        "ssl.key.location": "/etc/kafka/client.key",
    }
    doc = with_(kafka=kafka, control_db_url="postgresql+psycopg://eos:dbpass@db:5432/eos")
    cfg = load_pipeline(write(tmp_path, doc))
    shown = cfg.to_dict()
    text = json.dumps(shown)
    assert "hunter2" not in text and "s3cr3t" not in text and "dbpass" not in text and "PRIVATE" not in text
    assert shown["kafka"]["sasl.password"] == "***"
    assert shown["kafka"]["ssl.key.pem"] == "***"
    assert shown["kafka"]["sasl.username"] == "svc"
    assert shown["kafka"]["ssl.keystore.location"] == "/etc/kafka/keystore.p12"
    assert shown["control_db_url"] == "postgresql+psycopg://eos:***@db:5432/eos"
    assert cfg.kafka_settings["sasl.password"] == "hunter2"  # masking is for display only


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("sasl.password", True),
        ("sasl.jaas.config", True),
        ("ssl.key.password", True),
        ("ssl.keystore.password", True),
        ("sasl.oauthbearer.client.secret", True),
        ("api.token", True),
        ("ssl.key.pem", True),
        ("key.serializer", False),
        ("key.deserializer", False),
        ("ssl.keystore.type", False),
        ("bootstrap.servers", False),
        ("sasl.username", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_load_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "pipelines"
    write(folder, with_(name="zeta", topics=["z"]), name="zeta")
    write(folder, BASE, name="orders")
    (folder / "notes.txt").write_text("not a pipeline")
    assert load_pipeline_by_name("orders", folder).name == "orders"
    monkeypatch.setenv("EOS_PIPELINES_DIR", str(folder))
    assert load_pipeline_by_name("zeta").topics == ("z",)
    with pytest.raises(ConfigError, match=r"no pipeline 'order'.*did you mean 'orders'.*known: orders, zeta"):
        load_pipeline_by_name("order")
    with pytest.raises(ConfigError, match=re.escape("no pipeline '../orders'")):
        load_pipeline_by_name("../orders")


def test_config_is_frozen_and_hashable(tmp_path: Path) -> None:
    cfg = load_pipeline(write(tmp_path, BASE))
    assert isinstance(cfg, PipelineConfig)
    with pytest.raises(AttributeError):
        cfg.name = "other"  # type: ignore[misc]
    assert hash(cfg) == hash(load_pipeline(write(tmp_path, BASE)))


@pytest.mark.parametrize(
    ("ddl", "columns"),
    [
        ("a INT", [("a", "INT")]),
        ("a DECIMAL(10, 2), b STRING", [("a", "DECIMAL(10, 2)"), ("b", "STRING")]),
        ("s STRUCT<x: INT, y: MAP<STRING, ARRAY<INT>>>, t TIMESTAMP", [("s", "STRUCT<x: INT, y: MAP<STRING, ARRAY<INT>>>"), ("t", "TIMESTAMP")]),
        ("`odd name` STRING NOT NULL", [("odd name", "STRING NOT NULL")]),
        ("lower bigint", [("lower", "bigint")]),
    ],
)  # fmt: skip
def test_parse_ddl(ddl: str, columns: list[tuple[str, str]]) -> None:
    assert parse_ddl(ddl) == columns


def test_every_mistake_of_a_file_is_reported_in_one_error(tmp_path: Path) -> None:
    doc = with_(start_from="oldest", topics=["ok", "bad topic"], output={"partition_by": ["regoin"]})
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    lines = str(raised.value).splitlines()
    assert lines == [
        f"{path}: 3 problems, fix each:",
        f"- {path}: topics[1] = 'bad topic' is not valid; a Kafka topic name is 1-249 characters of "
        "[a-zA-Z0-9._-]",
        f"- {path}: start_from = 'oldest' is not valid; use 'earliest' or 'latest'",
        f"- {path}: output.partition_by[0] = 'regoin' is not valid; use one of id, region, tags, price, "
        "event_date, kafka_topic, kafka_partition (did you mean 'region'?)",
    ]


def test_mistakes_in_every_section_and_an_unset_variable_are_all_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_MAX", raising=False)
    doc = with_(
        name="Orders",
        colour="blue",
        max_records_per_partition="${NO_SUCH_MAX}",
        value__shema="a INT",
        output={"path": "s3://b/t"},
        schedule="99 99 * * *",
        expectations=[{"type": "expect_column_values_to_not_be_nul", "column": "id"}],
    )
    with pytest.raises(ConfigError) as raised:
        load_pipeline(write(tmp_path, doc))
    message = str(raised.value)
    keys = [line.split(": ", 1)[1].split(" = ")[0] for line in message.splitlines()[1:]]
    assert message.splitlines()[0].endswith(": 7 problems, fix each:")
    assert keys == [
        "max_records_per_partition",  # the unset variable, once: not also "not a whole number"
        "name",
        "value.shema",
        "output.path",
        "schedule",
        "expectations[0].type",
        "colour",  # unknown keys come last
    ]
    assert "environment variable NO_SUCH_MAX is not set" in message


# (schedule, accepted)
SCHEDULES = [
    pytest.param(None, True, id="null-manual"),
    *(pytest.param(p, True, id=p) for p in ("@once", "@continuous", "@hourly", "@daily", "@weekly",
                                             "@monthly", "@quarterly", "@yearly")),
    pytest.param("*/15 * * * *", True, id="every-15-min"),
    pytest.param("30 2 * * MON-FRI", True, id="weekdays"),
    pytest.param("0 0 29 2 *", True, id="leap-day"),
    pytest.param("99 99 * * *", False, id="out-of-range"),
    pytest.param("0 24 * * *", False, id="hour-24"),
    pytest.param("0 0 * 13 *", False, id="month-13"),
    pytest.param("0 0 31 2 *", False, id="never-fires"),
    pytest.param("a b c d e", False, id="letters"),
    pytest.param("0 0 * * * 30", False, id="six-fields"),
    pytest.param("* * * *", False, id="four-fields"),
    pytest.param("@minutely", False, id="not-a-preset"),
    pytest.param("@midnight", False, id="croniter-alias-not-airflow-preset"),
    pytest.param(5, False, id="number"),
]  # fmt: skip


@pytest.mark.parametrize(("schedule", "accepted"), SCHEDULES)
def test_schedule_is_an_airflow_preset_a_cron_croniter_takes_or_null(
    tmp_path: Path, schedule: Any, accepted: bool
) -> None:
    path = write(tmp_path, with_(schedule=schedule))
    if accepted:
        assert load_pipeline(path).schedule == schedule
        return
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: schedule = {schedule!r} is not valid; ")
    assert (
        "use a 5-field cron 'minute hour day-of-month month day-of-week' in UTC, e.g. '30 2 * * *'" in message
    )
    assert "@hourly" in message and "or null" in message


def test_an_out_of_range_cron_says_what_is_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"schedule = '99 99 \* \* \*' is not valid; \[99 99 \* \* \*\] is not "
                       r"acceptable, out of range; use a 5-field cron"):  # fmt: skip
        load_pipeline(write(tmp_path, with_(schedule="99 99 * * *")))


# (expectation, key of the problem, words of the fix)
BAD_EXPECTATIONS = [
    pytest.param({"type": "expect_column_values_to_not_be_nul", "column": "id"}, "expectations[0].type",
                 "did you mean 'expect_column_values_to_not_be_null'", id="type-typo"),
    pytest.param({"type": "ExpectColumnValuesToNotBeNull", "column": "id"}, "expectations[0].type",
                 "snake case", id="type-class-name"),
    pytest.param({"type": "expect_column_values_to_be_between", "column": "id", "min_valu": 0},
                 "expectations[0].min_valu", "has no such field (did you mean 'min_value'?)", id="field-typo"),
    pytest.param({"type": "expect_column_values_to_be_between", "min_value": 0}, "expectations[0].column",
                 "expect_column_values_to_be_between needs column; add column", id="required-missing"),
    pytest.param({"type": "expect_column_pair_values_to_be_equal", "column_A": "a"}, "expectations[0].column_B",
                 "needs column_A, column_B", id="second-required-missing"),
    pytest.param({"type": "expect_column_values_to_not_be_null", "column": "id", "severity": "fatal"},
                 "expectations[0].severity", "use critical or info or warning", id="severity"),
    pytest.param({"column": "id"}, "expectations[0]", 'a "type"', id="no-type"),
    pytest.param({"type": "expect_column_values_to_be_of_type", "column": "id", "type_": "LongType"},
                 "expectations[0].type", "column types are fixed by value.schema", id="engine-typed"),
]  # fmt: skip


@pytest.mark.parametrize(("item", "key", "fix"), BAD_EXPECTATIONS)
def test_expectations_are_checked_against_gx_types_when_the_file_loads(
    tmp_path: Path, item: dict[str, Any], key: str, fix: str
) -> None:
    path = write(tmp_path, with_(expectations=[item]))
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: {key} = ")
    assert fix in message


def test_valid_expectations_load_unchanged(tmp_path: Path) -> None:
    items = [
        {"type": "expect_column_values_to_not_be_null", "column": "id", "mostly": 0.99},
        {"type": "expect_column_values_to_be_between", "column": "price", "min_value": 0,
         "severity": "warning", "meta": {"owner": "orders"}, "row_condition": "region IS NOT NULL",
         "condition_parser": "spark"},
        {"type": "expect_table_row_count_to_be_between", "min_value": 1},
        {"type": "expect_compound_columns_to_be_unique", "column_list": ["id", "region"], "notes": "one id"},
    ]  # fmt: skip
    assert load_pipeline(write(tmp_path, with_(expectations=items))).expectations == tuple(items)


def test_the_gx_type_table_matches_the_installed_great_expectations() -> None:
    from eos_ingest.config import expectation_types as gx_types

    text = Path(gx_types.__file__).read_text(encoding="utf-8")
    block = text.split("# -- generated: begin\n", 1)[1].split("\n# -- generated: end", 1)[0]
    assert block == gx_types.from_installed_gx(), (
        "run .venv/bin/python -m eos_ingest.config.expectation_types"
    )


def test_a_name_too_long_for_an_airflow_dag_id_is_refused(tmp_path: Path) -> None:
    name = "n" * 237  # eos_backfill__ + 237 characters > 250
    path = write(tmp_path, with_(name=name), name=name)
    with pytest.raises(ConfigError, match="use at most 236 characters"):
        load_pipeline(path)
    assert load_pipeline(write(tmp_path, with_(name=name[:-1]), name=name[:-1])).name == name[:-1]
