"""librdkafka settings -> Spark's kafka.* options: SASL, the JAAS quoting, TLS material, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eos_ingest import paths
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.connections.kafka import connection_settings_from_env
from eos_ingest.errors import ConfigError, exit_code
from eos_ingest.kafka.java_settings import jaas_quoted
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.spark.kafka_source import read_options, spark_kafka_options, spark_kafka_timeout

CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def java_jaas_unquote(quoted: str) -> str:
    """What Java's JAAS parser (a StreamTokenizer with '"' as quote char) reads from a quoted value:
    backslash escapes \\\\ \\" \\n \\r, every other character as it is, no \\uXXXX."""
    assert quoted[0] == quoted[-1] == '"'
    out, i, body = [], 0, quoted[1:-1]
    while i < len(body):
        char = body[i]
        if char == "\\":
            nxt = body[i + 1]
            out.append({"n": "\n", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        assert char != '"', "an unescaped quote would end the value early"
        out.append(char)
        i += 1
    return "".join(out)


@pytest.mark.parametrize("password", ['pä"ss\\wörd', "plain", 'a"b', "x\\", "日本語"])
def test_jaas_quoting_keeps_the_password_as_java_reads_it(password: str) -> None:
    quoted = jaas_quoted(password)
    assert java_jaas_unquote(quoted) == password
    assert "\\u" not in quoted  # what json.dumps wrote and Java's JAAS parser does not read


def test_scram_sasl_ssl_with_a_pem_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(CA)
    options = spark_kafka_options(
        {
            "bootstrap.servers": "broker:9094",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "eos",
            "sasl.password": 'pä"ss\\wörd',
            "ssl.ca.location": str(ca),
        }
    )
    jaas = options.pop("kafka.sasl.jaas.config")
    assert jaas == f'{SCRAM} required username="eos" password="pä\\"ss\\\\wörd";'
    assert options == {
        "kafka.bootstrap.servers": "broker:9094",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        # The PEM text itself: Spark ships it to executors, which may not have the file.
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": CA,
    }


def test_ca_pem_text_and_no_host_name_check() -> None:
    options = spark_kafka_options(
        {"bootstrap.servers": "b:1", "ssl.ca.pem": CA, "ssl.endpoint.identification.algorithm": "none"}
    )
    assert options["kafka.ssl.truststore.certificates"] == CA
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""


def test_client_certificate_files_become_a_pem_keystore(tmp_path: Path) -> None:
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text(CA)
    key.write_text("-----BEGIN ENCRYPTED PRIVATE KEY-----\nx\n-----END ENCRYPTED PRIVATE KEY-----\n")
    options = spark_kafka_options(
        {
            "bootstrap.servers": "b:1",
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
            "ssl.key.password": "k",
        }
    )
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == CA
    assert "ENCRYPTED PRIVATE KEY" in options["kafka.ssl.keystore.key"]
    assert options["kafka.ssl.key.password"] == "k"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384"}, "ssl.cipher.suites"),
        ({"enable.ssl.certificate.verification": "false"}, "enable.ssl.certificate.verification"),
        ({"ssl.ca.location": "/nowhere/ca.pem"}, "ssl.ca.location"),
        ({"ssl.certificate.pem": CA}, "ssl.key.location or ssl.key.pem"),
        ({"ssl.ca.pem": "not a certificate"}, "ssl.ca.pem"),
        ({"fetch.min.bytes": "5"}, "fetch.min.bytes"),
    ],
)
def test_settings_without_a_java_equivalent_are_refused_by_name(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        spark_kafka_options({"bootstrap.servers": "b:1", **settings})


def test_an_airflow_kafka_connection_gives_the_same_spark_options_and_librdkafka_settings(
    tmp_path: Path,
) -> None:
    """The DAG's path: a Kafka-provider connection whose extra holds SASL_SSL settings and a CA."""
    ca = tmp_path / "ca.pem"
    ca.write_text(CA)
    extra = {
        "bootstrap.servers": "broker:9094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "eos",
        "sasl.password": "pä-wörd",
        "ssl.ca.location": str(ca),
    }
    env = {"AIRFLOW_CONN_KAFKA_TLS": json.dumps({"conn_type": "kafka", "extra": extra})}
    settings = connection_settings_from_env("kafka_tls", env)
    assert settings == extra  # confluent-kafka takes them as they are
    options = spark_kafka_options(settings or {})
    assert options["kafka.ssl.truststore.certificates"] == CA
    assert options["kafka.sasl.jaas.config"].endswith('password="pä-wörd";')


def test_the_readme_sasl_ssl_example_loads_and_translates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/pipelines.md: the SASL_SSL block is a valid pipeline's kafka: section."""
    readme = (paths.REPO_ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8")
    section = readme.split("**A SASL_SSL cluster with a private CA**", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    kafka = yaml.safe_load(block)["kafka"]
    ca = tmp_path / "ca.pem"
    ca.write_text(CA)
    kafka["ssl.ca.location"] = str(ca)  # the page's path does not exist here
    monkeypatch.setenv("KAFKA_PASSWORD", "pä-wörd")
    doc = {
        "name": "orders",
        "topics": ["orders"],
        "kafka": kafka,
        "value": {"format": "json", "schema": "id BIGINT"},
        "output": {"path": str(tmp_path / "t")},
        "schedule": None,
    }
    path = tmp_path / "orders.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    config = load_pipeline(path)
    assert config.kafka["sasl.password"] == "pä-wörd"
    options = spark_kafka_options(config.kafka)
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.jaas.config"] == f'{SCRAM} required username="eos-ingest" password="pä-wörd";'
    assert options["kafka.ssl.truststore.certificates"] == CA


def test_the_read_waits_briefly_at_the_end_of_the_log_unless_the_pipeline_says_otherwise() -> None:
    # A range planned up to the last stable offset ends with a commit marker: Spark's consumer asks
    # past it, and the broker answers after fetch.max.wait.ms (500 ms by default) per task.
    ranges = [PlannedRange("t", 0, 5, 9)]
    options = read_options({"bootstrap.servers": "b:1"}, ranges)
    assert options["kafka.fetch.max.wait.ms"] == "10"
    assert options["kafka.isolation.level"] == "read_committed"
    assert json.loads(options["endingOffsets"]) == {"t": {"0": 9}}
    own = read_options({"bootstrap.servers": "b:1", "fetch.wait.max.ms": "250"}, ranges)
    assert own["kafka.fetch.max.wait.ms"] == "250"


def test_every_wait_of_the_read_is_bounded_by_the_pipeline_timeout_unless_kafka_says_otherwise() -> None:
    # A broker that accepts and never answers held the read ~3 minutes (Java's 60 s API timeout
    # after a 30 s request timeout, Spark's 120 s poll timeout), then a JVM traceback.
    ranges = [PlannedRange("t", 0, 5, 9)]
    options = read_options({"bootstrap.servers": "b:1"}, ranges, timeout_s=12)
    assert options["kafka.request.timeout.ms"] == "12000"
    assert options["kafka.default.api.timeout.ms"] == "12000"
    assert options["kafkaConsumer.pollTimeoutMs"] == "12000"
    own = read_options({"bootstrap.servers": "b:1", "request.timeout.ms": "5000"}, ranges, timeout_s=12)
    assert own["kafka.request.timeout.ms"] == "5000"


def test_a_kafka_timeout_in_sparks_error_is_retriable_and_one_line_and_nothing_else_is() -> None:
    text = (
        "An error occurred while calling o627.writeAndReturnCommitData.\n: org.apache.spark.SparkException: "
        "Job aborted\nCaused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 10000ms "
        "expired before the position for partition t-0 could be determined\n\tat org.apache..."
    )
    error = spark_kafka_timeout(RuntimeError(text), "b:1", 7, 10)
    assert error is not None and error.retriable and exit_code(error) == 75
    line = str(error)
    assert "\n" not in line and "b:1" in line and "batch 7" in line and "within 10 s" in line
    assert "Timeout of 10000ms expired before the position for partition t-0 could be determined" in line
    assert spark_kafka_timeout(RuntimeError("KafkaIllegalStateException: data lost"), "b:1", 7, 10) is None
