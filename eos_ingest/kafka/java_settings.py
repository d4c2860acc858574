"""A pipeline's librdkafka settings as the options of Kafka's Java client (Spark's `kafka.*` options).

The pipeline declares librdkafka settings once; the planner, the gate's count and verify use them
as they are (confluent-kafka), and Spark's Kafka source needs the Java client's spelling:

* keys that mean the same in both are copied; ``fetch.wait.max.ms`` is Java's ``fetch.max.wait.ms``;
* ``sasl.username`` / ``sasl.password`` become one ``sasl.jaas.config`` line, quoted by JAAS rules;
* the TLS material (``ssl.ca.location``, ``ssl.ca.pem``, a client certificate and key) becomes PEM
  truststore / keystore options whose value is the PEM text itself, read here on the driver: Spark
  ships options to its executors, so no file, keytool or truststore is needed where they run;
* anything else is refused with a ConfigError naming the key, never silently dropped (a dropped
  ``ssl.*`` key could mean an unverified connection).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from eos_ingest.errors import ConfigError

# librdkafka keys that mean the same in the Java client.
_SAME_IN_JAVA = {
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
}
# librdkafka-only keys with no effect on a read (producer or consumer-group tuning).
_IGNORED = {"socket.timeout.ms", "linger.ms", "enable.partition.eof", "group.id", "debug", "log_level"}
# Handled together below, after the loop, because one Java option needs several of them.
_COMBINED = {
    "sasl.username",
    "sasl.password",
    "sasl.mechanism",
    "sasl.mechanisms",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "enable.ssl.certificate.verification",
}
_PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
_FIX = "remove it from the pipeline's 'kafka' settings or add its translation to eos_ingest/kafka/java_settings.py"


def java_kafka_options(kafka_settings: Mapping[str, str]) -> dict[str, str]:
    """The Java client's options (without Spark's ``kafka.`` prefix) for the librdkafka settings."""
    settings = {k: str(v) for k, v in kafka_settings.items()}
    options: dict[str, str] = {}
    for key, value in settings.items():
        if key in _SAME_IN_JAVA:
            options[key] = value
        elif key == "security.protocol":
            options[key] = value.upper()  # librdkafka accepts sasl_ssl; Java's parser wants SASL_SSL
        elif key == "fetch.wait.max.ms":
            options["fetch.max.wait.ms"] = value  # the same wait, spelt the Java client's way
        elif key == "ssl.endpoint.identification.algorithm":
            # librdkafka spells "no host name check" `none`, Java an empty value.
            options[key] = "" if value.lower() == "none" else value
        elif key in _IGNORED or key in _COMBINED:
            continue
        elif key.startswith("ssl."):
            raise ConfigError(
                f"kafka setting '{key}' has no equivalent in Kafka's Java client that Spark uses "
                "(only the CA, a client certificate and key, and ssl.endpoint.identification.algorithm "
                f"are translated); {_FIX}"
            )
        else:
            raise ConfigError(
                f"kafka setting '{key}' has no known equivalent for Spark's Kafka source; {_FIX}"
            )
    options.update(_sasl_options(settings))
    options.update(_truststore_options(settings))
    options.update(_keystore_options(settings))
    return options


def jaas_quoted(value: str) -> str:
    """`value` as a JAAS option value: in double quotes, with only ``\\`` and ``"`` escaped (and the
    line breaks, which would end the quoted string). Any other character, ä included, stays as it
    is: Java's JAAS parser reads no ``\\uXXXX`` escapes, so JSON quoting would change the password."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _sasl_options(settings: Mapping[str, str]) -> dict[str, str]:
    options: dict[str, str] = {}
    mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    if mechanism:
        options["sasl.mechanism"] = mechanism.upper()
    username = settings.get("sasl.username")
    if username is not None:
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if (mechanism or "").upper().startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        password = settings.get("sasl.password") or ""
        options["sasl.jaas.config"] = (
            f"{module} required username={jaas_quoted(username)} password={jaas_quoted(password)};"
        )
    return options


def _truststore_options(settings: Mapping[str, str]) -> dict[str, str]:
    if settings.get("enable.ssl.certificate.verification", "true").lower() in ("false", "0"):
        raise ConfigError(
            "kafka setting 'enable.ssl.certificate.verification: false' has no equivalent in Kafka's "
            "Java client that Spark uses; give the cluster's CA in 'ssl.ca.location' instead"
        )
    if "ssl.ca.pem" in settings:
        pem = settings["ssl.ca.pem"]
        where = "kafka setting 'ssl.ca.pem'"
    elif "ssl.ca.location" in settings:
        pem = _read_pem_file(settings["ssl.ca.location"], "ssl.ca.location")
        where = f"the file of kafka setting 'ssl.ca.location' ({settings['ssl.ca.location']})"
    else:
        return {}
    if _PEM_CERTIFICATE not in pem:
        raise ConfigError(f"{where} holds no PEM certificate ({_PEM_CERTIFICATE} ...); give the CA as PEM")
    # Kafka's Java client reads a PEM truststore since 2.7 (KIP-651): no keytool at run time.
    return {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pem}


def _keystore_options(settings: Mapping[str, str]) -> dict[str, str]:
    """A client certificate (mutual TLS): PEM text or files, or a PKCS#12 keystore file."""
    options: dict[str, str] = {}
    if "ssl.keystore.location" in settings:
        options = {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": settings["ssl.keystore.location"],
            "ssl.keystore.password": settings.get("ssl.keystore.password", ""),
        }
    certificate = settings.get("ssl.certificate.pem")
    if certificate is None and "ssl.certificate.location" in settings:
        certificate = _read_pem_file(settings["ssl.certificate.location"], "ssl.certificate.location")
    key = settings.get("ssl.key.pem")
    if key is None and "ssl.key.location" in settings:
        key = _read_pem_file(settings["ssl.key.location"], "ssl.key.location")
    if (certificate is None) != (key is None):
        raise ConfigError(
            "kafka settings: a client certificate needs both its certificate (ssl.certificate.location "
            "or ssl.certificate.pem) and its key (ssl.key.location or ssl.key.pem); give both or neither"
        )
    if certificate is not None and key is not None:
        if options:
            raise ConfigError(
                "kafka settings: give the client certificate either as ssl.keystore.location or as "
                "ssl.certificate.*/ssl.key.*, not both"
            )
        if "BEGIN RSA PRIVATE KEY" in key or "BEGIN EC PRIVATE KEY" in key:
            raise ConfigError(
                "kafka settings: the client key is in PKCS#1/SEC1 form, which Kafka's Java client does "
                "not read; convert it to PKCS#8 (openssl pkcs8 -topk8 -in key.pem -out key.pk8.pem)"
            )
        options = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": certificate,
            "ssl.keystore.key": key,
        }
    if options and "ssl.key.password" in settings:
        options["ssl.key.password"] = settings["ssl.key.password"]
    return options


def _read_pem_file(location: str, key: str) -> str:
    path = Path(location).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"kafka setting '{key}' is {location!r}, which is not a file here; give the path of a PEM "
            "file readable where eos-ingest and its Spark driver run"
        )
    try:
        return path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"kafka setting '{key}': cannot read {location!r} as PEM text ({exc})") from None
