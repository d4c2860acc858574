"""Secrets out of every text a person sees: URL credentials and the values of secret keys.

Everything that echoes a value (config errors, the CLI, the UI plugin's pages and JSON, DAG import
errors, batch errors in the control DB, logs) passes it through here first. Values come after
``${VAR}`` expansion, so a password taken from the environment would otherwise be shown in clear.

* ``redact_url``: ``scheme://user:password@host`` -> ``scheme://user:***@host`` anywhere in a text;
* ``is_secret_key``: librdkafka/JDBC-style keys whose value is a secret (case-insensitive);
* ``redact_value`` / ``redact_tree``: a key's value, or a whole JSON-like tree, with both rules;
* ``redact_text``: free text (an exception's message): URLs, ``secret.key = value`` pairs, and
  any of the known secret values given.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "is_secret_key", "redact_text", "redact_tree", "redact_url", "redact_value", "secrets_of"]

MASK = "***"

# Keys whose value is a secret; fnmatch patterns, matched against the lower-cased key (the last
# dotted part of a YAML path like `kafka.sasl.password` or the whole key).
SECRET_KEY_PATTERNS = (
    "sasl.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "*jaas.config",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.key.pem",
    "ssl.keystore.key",
    "ssl.keystore.pem",
    "*secret*",
    "*password*",
    "*passwd*",
    "*token*",
    "*credential*",
    "*api.key*",
    "*api_key*",
    "*apikey*",
    "*private.key*",
    "*private_key*",
)

# user:password@ in any scheme://... ; the user part may be empty (redis://:pw@host).
_URL_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'\"]*):(?P<pw>[^\s@/'\"]*)@")
# `some.secret.key = 'value'`, `"sasl.password": "value"`, `sasl.password=value`: the value after a
# key that is a secret key (checked with is_secret_key), quoted or up to a separator.
_KEY_VALUE = re.compile(
    r"""(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<q1>['"]?)(?P<sep>\s*[=:]\s*)"""
    r"""(?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s,;}\]'"]+)"""
)
_MIN_SECRET_LEN = 4  # shorter known values would mask ordinary words of a message


def is_secret_key(key: object) -> bool:
    """True for a key whose value must never be shown: passwords, tokens, JAAS lines, private keys."""
    if not isinstance(key, str):
        return False
    k = key.lower().strip()
    candidates = {k}
    # A dotted YAML path (kafka.sasl.password) and a prefixed Spark option (kafka.sasl.jaas.config).
    parts = k.split(".")
    candidates.update(".".join(parts[i:]) for i in range(1, len(parts)))
    if any(fnmatch.fnmatchcase(c, p) for c in candidates for p in SECRET_KEY_PATTERNS):
        return True
    # ssl.key.pem, ssl.keystore.key, ssl.keystore.certificate...: key material, unless the key names
    # a file or a type (ssl.keystore.location, ssl.keystore.type).
    return "ssl." in k and "key" in k and parts[-1] not in ("location", "type")


def redact_url(text: str) -> str:
    """The text with the password of every ``scheme://user:password@host`` replaced by ``***``."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['head']}:{MASK}@", text)


def redact_value(key: object, value: Any) -> Any:
    """`value` as it may be shown under `key`: masked for a secret key, else redacted inside."""
    if is_secret_key(key) and value not in (None, ""):
        return MASK
    return redact_tree(value)


def redact_tree(value: Any) -> Any:
    """A copy of a JSON-like value (mappings, lists, strings) with every secret masked."""
    if isinstance(value, Mapping):
        return {k: redact_value(k, v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(redact_tree(v) for v in value)
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text with URL passwords, the values of ``secret.key = value`` pairs and every known
    secret value (`secrets`, e.g. those of a config's secret keys) replaced by ``***``."""
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(secret, MASK)
        shown = repr(secret)[1:-1]  # as a repr() in a message shows it (escaped quotes, \n, ...)
        if shown != secret:
            text = text.replace(shown, MASK)
    text = redact_url(text)

    def pair(m: re.Match[str]) -> str:
        if not is_secret_key(m["key"]) or m["value"].strip("'\"") == MASK:
            return m.group(0)
        quote = m["value"][0] if m["value"][0] in "'\"" else ""
        return f"{m['key']}{m['q1']}{m['sep']}{quote}{MASK}{quote}"

    return _KEY_VALUE.sub(pair, text)


def secrets_of(tree: Any) -> list[str]:
    """Every secret value in a JSON-like tree: those of secret keys and the passwords of URLs."""
    found: list[str] = []

    def walk(key: object, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(k, v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(key, v)
        elif isinstance(value, str):
            if is_secret_key(key) and value:
                found.append(value)
            found.extend(m["pw"] for m in _URL_CREDENTIALS.finditer(value) if m["pw"])
        elif is_secret_key(key) and value is not None:
            found.append(str(value))

    walk(None, tree)
    return found
