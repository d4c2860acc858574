"""eos_ingest.redact: URL credentials and the values of secret keys never shown."""

from __future__ import annotations

import pytest

from eos_ingest.redact import is_secret_key, redact_text, redact_tree, redact_url, redact_value, secrets_of


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://u:pw@h/db", "postgresql+psycopg://u:***@h/db"),
        ("postgresql+psycopg://eos:p%40ss@db:5432/eos", "postgresql+psycopg://eos:***@db:5432/eos"),
        ("redis://:onlypw@cache:6379/0", "redis://:***@cache:6379/0"),
        ("https://user:tok3n@example.org/x", "https://user:***@example.org/x"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),  # no password: unchanged
        ("sqlite:////tmp/control.db", "sqlite:////tmp/control.db"),
        ("host:9092", "host:9092"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(f"could not parse {url!r} here") == f"could not parse {shown!r} here"


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "SASL.PASSWORD",
        "sasl.oauthbearer.config",
        "sasl.jaas.config",
        "kafka.sasl.jaas.config",  # a Spark option
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ssl.keystore.key",
        "sasl.oauthbearer.client.secret",
        "client_secret",
        "db_password",
        "api.token",
        "kafka.sasl.password",  # a dotted YAML path
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    ["bootstrap.servers", "sasl.username", "sasl.mechanism", "ssl.keystore.location", "ssl.keystore.type",
     "ssl.ca.location", "key.serializer", "kafka_key", "security.protocol", None, 3],
)  # fmt: skip
def test_ordinary_keys(key: object) -> None:
    assert not is_secret_key(key)


def test_redact_value_and_tree() -> None:
    assert redact_value("sasl.password", "hunter2") == "***"
    assert redact_value("sasl.password", "") == ""  # an empty value hides nothing
    tree = {
        "kafka": {"sasl.password": "hunter2", "bootstrap.servers": "b:9092"},
        "urls": ["postgresql://u:dbpw@h/db"],
        "n": 3,
        "error": "connect to mysql://root:rootpw@x failed",
    }
    shown = redact_tree(tree)
    assert shown == {
        "kafka": {"sasl.password": "***", "bootstrap.servers": "b:9092"},
        "urls": ["postgresql://u:***@h/db"],
        "n": 3,
        "error": "connect to mysql://root:***@x failed",
    }
    assert tree["kafka"]["sasl.password"] == "hunter2"  # a copy


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("kafka.sasl.password = 'hunter2' is not valid", "kafka.sasl.password = '***' is not valid"),
        ('{"sasl.password": "hunter2", "a": 1}', '{"sasl.password": "***", "a": 1}'),
        ("--conf kafka.sasl.jaas.config=x.y.Module", "--conf kafka.sasl.jaas.config=***"),
        ("ssl.key.password: pw123, next", "ssl.key.password: ***, next"),
        ("password authentication failed for user eos", "password authentication failed for user eos"),
        ("sasl.username = 'svc'", "sasl.username = 'svc'"),
    ],
)
def test_redact_text_pairs(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_redact_text_known_secrets() -> None:
    text = "broker said: bad login for S3CR3T-CANARY-xyz (S3CR3T-CANARY-xyz\\n)"
    assert "S3CR3T" not in redact_text(text, ["S3CR3T-CANARY-xyz", "ab"])
    assert redact_text("a b", ["a"]) == "a b"  # too short to mask without eating words


def test_secrets_of() -> None:
    doc = {"kafka": {"sasl.password": "pw1", "x": "y"}, "control_db_url": "postgresql://u:pw2@h/db"}
    assert sorted(secrets_of(doc)) == ["pw1", "pw2"]
