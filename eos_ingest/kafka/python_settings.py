"""A pipeline's librdkafka settings as kafka-python's client options (for kafka/header_counts.py).

The gate's header-only count talks to Kafka through kafka-python, the rest of eos-ingest through
librdkafka. Unlike kafka/java_settings.py (Spark's source), a setting without a translation here is not an
error: the count then falls back to the librdkafka consumer, which reads the settings as they are.
So no setting is ever dropped silently (a dropped ``ssl.*`` key could mean an unverified
connection): each is translated, or known to change nothing for a read, or the fallback is taken.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class Untranslatable(Exception):
    """A setting kafka-python cannot honour the way librdkafka would; the message names it."""


# Keys of another client's concern (producer, group, logging) or that the count sets itself.
_IGNORED = {
    "socket.timeout.ms",
    "linger.ms",
    "enable.partition.eof",
    "group.id",
    "debug",
    "log_level",
    "fetch.wait.max.ms",
    "isolation.level",
    "enable.auto.commit",
    "auto.offset.reset",
}
_INT_OPTIONS = {
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
}
_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
_MECHANISMS = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
# Read together into one SSLContext or the SASL options, below.
_SASL = {"sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password"}
_TLS = {
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
}


def kafka_python_config(kafka_settings: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python's connection options for these librdkafka settings, or Untranslatable."""
    settings = {k: str(v) for k, v in kafka_settings.items()}
    config: dict[str, Any] = {}
    for key, value in settings.items():
        if key == "bootstrap.servers":
            config["bootstrap_servers"] = [s.strip() for s in value.split(",") if s.strip()]
        elif key == "client.id":
            config["client_id"] = value
        elif key in _INT_OPTIONS:
            config[_INT_OPTIONS[key]] = int(value)
        elif key in _IGNORED or key in _SASL or key in _TLS or key == "security.protocol":
            continue
        else:
            raise Untranslatable(f"kafka setting '{key}' has no kafka-python translation")
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise Untranslatable(f"security.protocol {protocol!r}")
    config["security_protocol"] = protocol
    if protocol.startswith("SASL_"):
        config.update(_sasl(settings))
    if protocol.endswith("SSL"):
        config["ssl_context"] = _tls_context(settings)
    return config


def _sasl(settings: Mapping[str, str]) -> dict[str, Any]:
    mechanism = (settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in _MECHANISMS:  # librdkafka's default is GSSAPI (Kerberos): not translated
        raise Untranslatable(f"sasl.mechanism {mechanism!r}")
    return {
        "sasl_mechanism": mechanism,
        "sasl_plain_username": settings.get("sasl.username", ""),
        "sasl_plain_password": settings.get("sasl.password", ""),
    }


def _tls_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context librdkafka would use: only the configured CA when one is given (else the
    system's), the host name checked unless ssl.endpoint.identification.algorithm is none."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if "ssl.ca.pem" in settings:
            context.load_verify_locations(cadata=settings["ssl.ca.pem"])
        elif "ssl.ca.location" in settings:
            location = Path(settings["ssl.ca.location"]).expanduser()
            if location.is_dir():
                context.load_verify_locations(capath=str(location))
            else:
                context.load_verify_locations(cafile=str(location))
        else:
            context.load_default_certs()
        if "ssl.certificate.location" in settings or "ssl.key.location" in settings:
            context.load_cert_chain(
                settings.get("ssl.certificate.location", ""),
                settings.get("ssl.key.location"),
                settings.get("ssl.key.password"),
            )
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise Untranslatable(f"the TLS material could not be loaded here ({exc})") from None
    if settings.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    if settings.get("enable.ssl.certificate.verification", "true").lower() in ("false", "0"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
