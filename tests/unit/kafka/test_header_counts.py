"""The header count's pieces that need no broker: the settings' translation, and a batch whose
offsets have gaps (compaction), built with kafka-python's own v2 batch writer.

The transactional logic runs on the broker's real bytes in tests/integration/kafka/test_header_counts.py.
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from eos_ingest.kafka import header_counts
from eos_ingest.kafka.python_settings import Untranslatable, kafka_python_config
from eos_ingest.kafka.record_batches import NeedsTheConsumer, count_fetched


def batch_bytes(offsets: list[int], base: int = 0, compression: int = 0) -> bytes:
    """One v2 batch holding records at `offsets` (relative to `base`), as a compacted log keeps it."""
    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 20)
    for offset in offsets:
        builder.append(offset, timestamp=None, key=None, value=b"v", headers=[])
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big")  # the broker assigns the base offset
    return bytes(data)


def test_the_gate_is_the_kafka_python_series_installed() -> None:
    assert header_counts.KAFKA_PYTHON_VERSION[:2] == header_counts.KNOWN_SERIES
    assert header_counts.HEADERS_ON  # requirements.lock's kafka-python 3.0.12


def test_outside_the_gate_the_header_count_hands_over_before_it_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NeedsTheConsumer: committed_counts then counts with librdkafka's consumer (as for a setting
    kafka-python cannot honour: test_a_setting_without_a_translation_counts_record_by_record)."""
    monkeypatch.setattr(header_counts, "HEADERS_ON", False)
    with pytest.raises(NeedsTheConsumer, match=r"tested on 3\.0\.x only"):
        header_counts.count_from_headers({"bootstrap_servers": ["127.0.0.1:1"]}, {("t", 0): [(0, 5)]}, 1)


def test_a_compacted_edge_batch_is_counted_by_its_records_offsets() -> None:
    records = batch_bytes([0, 2, 3, 7, 9], base=100) + batch_bytes(list(range(5)), base=110)
    # Within the span: the header's count. Across an edge: the offsets that survived compaction.
    assert count_fetched(records, [], 100, 200) == (10, 115)
    assert count_fetched(records, [], 101, 108) == (3, 110)  # 102, 103, 107
    assert count_fetched(records, [], 100, 112) == (7, 115)  # 5 + 110, 111
    # Stops at the first batch beyond the span; the next fetch begins after what was read.
    assert count_fetched(records, [], 100, 110) == (5, 110)


def test_a_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    whole = batch_bytes(list(range(4)), base=0)
    cut = whole + batch_bytes(list(range(4)), base=4)[:-3]
    assert count_fetched(cut, [], 0, 100) == (4, 4)


def test_plaintext_settings_translate() -> None:
    config = kafka_python_config(
        {
            "bootstrap.servers": "a:9092, b:9092",
            "client.id": "x",
            "request.timeout.ms": "5000",
            "debug": "all",
        }
    )
    assert config == {
        "bootstrap_servers": ["a:9092", "b:9092"],
        "client_id": "x",
        "request_timeout_ms": 5000,
        "security_protocol": "PLAINTEXT",
    }


def test_sasl_ssl_with_a_ca_file_translates_to_scram_and_a_verifying_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(_self_signed_pem(tmp_path), encoding="ascii")
    config = kafka_python_config(
        {
            "bootstrap.servers": "b:9094",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "eos",
            "sasl.password": 'pä"ss',
            "ssl.ca.location": str(ca),
        }
    )
    assert config["security_protocol"] == "SASL_SSL"
    assert (config["sasl_mechanism"], config["sasl_plain_username"], config["sasl_plain_password"]) == (
        "SCRAM-SHA-512",
        "eos",
        'pä"ss',
    )
    context = config["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert len(context.get_ca_certs()) == 1  # only the configured CA, as librdkafka


@pytest.mark.parametrize(
    "settings",
    [
        {"sasl.mechanism": "GSSAPI", "security.protocol": "SASL_PLAINTEXT"},
        {"sasl.mechanism": "OAUTHBEARER", "security.protocol": "SASL_SSL"},
        {"security.protocol": "SASL_PLAINTEXT"},  # librdkafka's default mechanism is GSSAPI
        {"ssl.keystore.location": "/k.p12", "security.protocol": "SSL"},
        {"ssl.certificate.pem": "...", "security.protocol": "SSL"},
        {"ssl.ca.location": "/no/such/ca.pem", "security.protocol": "SSL"},
        {"topic.metadata.refresh.interval.ms": "1000"},
    ],
)
def test_a_setting_kafka_python_cannot_honour_is_untranslatable(settings: dict[str, str]) -> None:
    with pytest.raises(Untranslatable):
        kafka_python_config({"bootstrap.servers": "b:9092", **settings})


def test_no_host_name_check_and_no_verification_carry_over() -> None:
    base = {"bootstrap.servers": "b:9093", "security.protocol": "SSL"}
    no_host = kafka_python_config({**base, "ssl.endpoint.identification.algorithm": "none"})["ssl_context"]
    assert not no_host.check_hostname and no_host.verify_mode == ssl.CERT_REQUIRED
    unverified = kafka_python_config({**base, "enable.ssl.certificate.verification": "false"})["ssl_context"]
    assert unverified.verify_mode == ssl.CERT_NONE


def _self_signed_pem(folder: Path) -> str:
    key, cert = folder / "k.pem", folder / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=test-ca"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert.read_text(encoding="ascii")
