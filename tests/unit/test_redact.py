"""eos_ingest.redact: URL credentials and the values of secret keys never shown."""

from __future__ import annotations

import json
import time
from urllib.parse import unquote

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
        # A comma no longer ends a value (issue 31 item 4), the next setting does.
        ("ssl.key.password: pw123, next.key=1", "ssl.key.password: ***, next.key=1"),
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


# Issue 31 item 4: secrets holding a character that used to end the match. Each canary is masked
# whole, in each form a message shows it; the text around stays as it was.
CANARIES = {
    "slash": "Zm9v/YmFy",  # base64: the common password with `/`
    "base64": "S3cr3t+Zm9v/YmFy==",
    "encoded": "S3cr3t%2Fenc%40x",  # percent-encoded `/` and `@`
    "space": "S3cr3t with space",
    "quotes": "S3cr3t'sq\"dq",
    "backslash": "S3cr3t\\back\\slash",
    "comma": "S3cr3t,comma, and space",
    "all": "Zm9v/S3+cr=3t%2Fx y'z\"q\\w",
}
URL_CANARIES = {**CANARIES, "at-colon": "S3c:r3t@at@x"}  # raw `:` and `@` in a URL's password


@pytest.mark.parametrize("canary", URL_CANARIES.values(), ids=URL_CANARIES.keys())
@pytest.mark.parametrize("scheme", ["postgres", "postgresql+psycopg", "mysql"])
def test_redact_url_masks_a_password_with_any_character(scheme: str, canary: str) -> None:
    url = f"{scheme}://eos:{canary}@db:5432/eos"
    shown = f"{scheme}://eos:***@db:5432/eos"
    assert redact_url(url) == shown
    # As a ConfigError quotes it (the `postgres://` typo), as JSON shows it, and in free text.
    assert redact_url(f"control_db_url = {url!r} is not valid; use ...") == (
        f"control_db_url = {shown!r} is not valid; use ..."
    )
    assert redact_url(json.dumps({"control_db_url": url, "n": 1})) == json.dumps(
        {"control_db_url": shown, "n": 1}
    )
    assert redact_url(f"could not connect to {url} (refused)") == f"could not connect to {shown} (refused)"
    assert redact_text(f"{url}\nnext line") == f"{shown}\nnext line"


@pytest.mark.parametrize(
    "text",
    [
        "redis://cache:6379/0 is up; mail admin@example.org",  # host:port, not user:password
        "see https://example.org:8443/x and me@example.org",
        "postgresql://eos@db/eos",  # a user, no password
        "postgresql+psycopg://eos:***@db/eos",  # already masked
        "2024-01-01T00:00:00 a:b c@d",  # no scheme://
        "http://[::1]:8080/ failed for user@host",  # an IPv6 host
        "connect to postgresql://u@h:5432/db failed; mail a@b",
    ],
)
def test_redact_url_leaves_other_text(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize("canary", CANARIES.values(), ids=CANARIES.keys())
def test_redact_text_masks_a_secret_value_to_its_end(canary: str) -> None:
    # key=value and key: value, unquoted: to the end of the line, or up to the next `key=`.
    assert redact_text(f"sasl.password={canary}") == "sasl.password=***"
    assert redact_text(f"bad setting sasl.password={canary}\nnext") == "bad setting sasl.password=***\nnext"
    assert redact_text(f"ssl.key.password: {canary}") == "ssl.key.password: ***"
    assert redact_text(f"secret={canary} sasl.username=svc") == "secret=*** sasl.username=svc"
    assert redact_text(f"{{sasl.password={canary}, group.id=g}}") == "{sasl.password=***, group.id=g}"
    # A Python repr and JSON: the quoted value to its closing quote (escapes included).
    q = repr(canary)[0]  # repr() quotes a value holding `'` with `"`
    settings = {"sasl.password": canary, "sasl.username": "svc"}
    assert redact_text(repr(settings)) == f"{{'sasl.password': {q}***{q}, 'sasl.username': 'svc'}}"
    assert redact_text(json.dumps(settings)) == json.dumps({"sasl.password": "***", "sasl.username": "svc"})
    assert (
        redact_text(f"kafka.sasl.password = {canary!r} is not valid")
        == f"kafka.sasl.password = {q}***{q} is not valid"
    )
    if "'" not in canary:  # a shell-quoted argument: the value ends at the quote opened before the key
        assert redact_text(f"--conf 'kafka.sasl.password={canary}' --conf 'b=c'") == (
            "--conf 'kafka.sasl.password=***' --conf 'b=c'"
        )
    if '"' not in canary and "\\" not in canary:
        jaas = f'sasl.jaas.config=x.y.PlainLoginModule required username="svc" password="{canary}";'
        assert canary not in redact_text(jaas)
        assert 'username="svc" password="***"' in redact_text(jaas)


@pytest.mark.parametrize("canary", URL_CANARIES.values(), ids=URL_CANARIES.keys())
def test_secrets_of_finds_a_url_password_with_any_character(canary: str) -> None:
    found = secrets_of({"control_db_url": f"postgres://eos:{canary}@db/eos"})
    assert canary in found
    text = f"the password {canary} (decoded: {unquote(canary)}) was refused"
    assert redact_text(text, found) == "the password *** (decoded: ***) was refused"


@pytest.mark.parametrize("canary", CANARIES.values(), ids=CANARIES.keys())
def test_redact_text_masks_a_known_secret_as_json_shows_it(canary: str) -> None:
    text = f"settings: {json.dumps({'x': canary})} and {canary!r}"
    assert canary not in redact_text(text, [canary])
    assert redact_text(text, [canary]) == 'settings: {"x": "***"} and \'***\''


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (  # a JAAS line: the module and `required` masked, the options after it as ever
            'sasl.jaas.config=x.y.PlainLoginModule required username="svc" password="p w";',
            'sasl.jaas.config=*** username="svc" password="***";',
        ),
        (
            "spark-submit --conf kafka.sasl.password=a b --conf kafka.group.id=g",
            "spark-submit --conf kafka.sasl.password=*** --conf kafka.group.id=g",
        ),
        ("{sasl.password=a b, bootstrap.servers=b:9092}", "{sasl.password=***, bootstrap.servers=b:9092}"),
        ("jdbc:sqlserver://h;user=u;password=p w;encrypt=true", "jdbc:sqlserver://h;user=u;password=***;encrypt=true"),
        ("postgresql://h/db?user=u&password=p%2Fw&sslmode=require", "postgresql://h/db?user=u&password=***&sslmode=require"),
        ("error: bad password: a b\nnext line", "error: bad password: ***\nnext line"),  # not `error:`'s value
        ('KafkaError{str="sasl.password=a b: Failed"}', 'KafkaError{str="sasl.password=***"}'),
        ("ssl.key.password = Zm9v/YmFy==", "ssl.key.password = ***"),  # base64's `==` is no next key
    ],
)  # fmt: skip
def test_redact_text_keeps_what_follows_a_secret(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_redact_text_takes_linear_time() -> None:
    # A long token (a base64 blob, a dump) in a message: each search scans it once.
    n = 20_000
    text = f"{'x' * n} {'a-' * n} {'a.b ' * n} postgres://u:{'y' * n} sasl.password={'z' * n}"
    started = time.monotonic()
    assert redact_text(text).endswith("sasl.password=***")
    assert time.monotonic() - started < 2
