"""A pipeline over the session broker's SASL_SSL listener (SCRAM-SHA-512, a private CA), by the CLI.

The pipeline's `kafka:` block holds librdkafka settings with the password from ${VAR}; the planner,
the Spark job (Java client: JAAS line, PEM truststore) and verify all read over TLS. The user's
password has non-ASCII letters, a quote and a backslash, which the JAAS line must carry unchanged.
A wrong password, a CA that did not sign the broker's certificate and a plaintext client on the TLS
port each end `eos-ingest run` with one line (exit 2) well within a minute, with no batch planned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from eos_ingest.cli import main as cli_main
from eos_ingest.control.store import ControlStore
from tests.fixtures.kafka import SaslSslListener
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

USER = "eos-umlaut"
PASSWORD_VAR = "EOS_TEST_SASL_PASSWORD"


def write_pipeline(tmp_path: Path, name: str, topic: str, kafka: dict[str, str]) -> Path:
    doc = {
        "name": name,
        "topics": [topic],
        "kafka": kafka,
        "kafka_conn_id": None,
        "value": {"format": "json", "schema": "id BIGINT"},
        "output": {"path": str(tmp_path / "tables" / name)},
        "control_db_url": f"sqlite:///{tmp_path / f'{name}.db'}",
        "schedule": None,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return path


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = TxProducer(bootstrap)
    producer.transaction(topic, [{"id": i} for i in range(count)], commit=True)


def test_run_and_verify_over_sasl_ssl_with_a_password_from_the_environment(
    spark,
    tmp_path: Path,
    kafka_bootstrap: str,
    kafka_sasl_ssl: SaslSslListener,
    make_topic,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20)
    monkeypatch.setenv(PASSWORD_VAR, kafka_sasl_ssl.users[USER])
    kafka = {**kafka_sasl_ssl.settings(USER), "sasl.password": f"${{{PASSWORD_VAR}}}"}
    path = write_pipeline(tmp_path, "tls", topic, kafka)

    assert cli_main(["run", "--config", str(path)]) == 0
    summary = json.loads(capfd.readouterr().out)
    assert summary["status"] == "committed" and summary["records_read"] == 20

    # verify in this process: it borrows the test session's Spark and leaves it running
    # (test_verify_and_scale.py); an `eos-ingest verify` process of its own cost ~17 s of CPU.
    # Its Kafka read over TLS is the claim, and what it prints (the JVM's too: capfd reads fds).
    code = cli_main(["verify", "--config", str(path)])
    out, err = capfd.readouterr()
    assert code == 0, out + err[-4000:]
    assert json.loads(out)["ok"] is True
    assert kafka_sasl_ssl.users[USER] not in out + err


def make_other_ca(folder: Path) -> Path:
    """A CA that signed nothing the broker has."""
    ca = folder / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(folder / "other-ca.key"),
         "-out", str(ca), "-days", "1", "-subj", "/CN=not the broker's CA"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return ca


@pytest.mark.parametrize("case", ["wrong password", "unknown CA", "plaintext on the TLS port"])
def test_a_refused_connection_gives_one_clear_line_and_plans_nothing(
    case: str,
    tmp_path: Path,
    kafka_bootstrap: str,
    kafka_sasl_ssl: SaslSslListener,
    make_topic,
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap, topic, 5)
    kafka = {**kafka_sasl_ssl.settings(USER), "sasl.password": f"${{{PASSWORD_VAR}}}"}
    password = kafka_sasl_ssl.users[USER]
    expected = {
        "wrong password": "SASL authentication failed",
        "unknown CA": "the TLS handshake failed",
        "plaintext on the TLS port": "check security.protocol",
    }[case]
    if case == "wrong password":
        password = "not-" + password
    elif case == "unknown CA":
        kafka["ssl.ca.location"] = str(make_other_ca(tmp_path))
    else:
        kafka = {"bootstrap.servers": kafka_sasl_ssl.bootstrap}
    path = write_pipeline(tmp_path, "refused", topic, kafka)

    started = time.monotonic()
    job = subprocess.run(
        [sys.executable, "-m", "eos_ingest.cli", "run", "--config", str(path)],
        env={**os.environ, PASSWORD_VAR: password},
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    print(f"eos-ingest run, {case}: exit {job.returncode} after {elapsed:.1f} s: {job.stderr.strip()}")

    lines = [line for line in job.stderr.splitlines() if line.strip()]
    assert job.returncode == 2, (job.stdout, job.stderr)
    assert len(lines) == 1, job.stderr
    assert lines[0].startswith("eos-ingest: KafkaAccessError: Kafka at 127.0.0.1:"), lines[0]
    assert expected in lines[0] and "the batch is unchanged" in lines[0]
    assert password not in job.stderr + job.stdout
    assert elapsed < 60, f"{case}: {elapsed:.1f} s to give up"
    store = ControlStore(f"sqlite:///{tmp_path / 'refused.db'}")
    try:
        store.ensure_schema()
        assert store.list_batches("refused") == []  # nothing planned, no offsets moved
    finally:
        store.close()
