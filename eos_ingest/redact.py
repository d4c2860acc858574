"""Secrets out of every text a person sees: URL credentials and the values of secret keys.

Everything that echoes a value (config errors, the CLI, the UI plugin's pages and JSON, DAG import
errors, batch errors in the control DB, logs) passes it through here first. Values come after
``${VAR}`` expansion, so a password taken from the environment would otherwise be shown in clear.

* ``redact_url``: ``scheme://user:password@host`` -> ``scheme://user:***@host`` anywhere in a text,
  whatever the password holds (``/``, ``:``, ``@``, ``%2F``, a space, quotes, a backslash);
* ``is_secret_key``: librdkafka/JDBC-style keys whose value is a secret (case-insensitive);
* ``redact_value`` / ``redact_tree``: a key's value, or a whole JSON-like tree, with both rules;
* ``redact_text``: free text (an exception's message): URLs, ``secret.key = value`` pairs (the
  value to its end: a quoted one to its closing quote, else to the end of the line or the next
  ``key=``), and any of the known secret values given.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

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

# Where a URL's credentials start: `scheme://user:`, the user part maybe empty (redis://:pw@host),
# and the quote the URL is in, if any (a repr or JSON: ConfigError quotes every value). A `[` after
# `//` is an IPv6 host, not a user.
_URL_USERINFO = re.compile(
    r"""(?P<quote>['"]?)(?<![A-Za-z0-9+.\-])(?P<head>[A-Za-z][A-Za-z0-9+.\-]*+://[^\s:/'"\[]*+):"""
)
# What follows `host:` when it is a port, not a password: digits, then the path or the end.
_PORT = re.compile(r"\d*(?:[/?#]|$)")
_SPACE = re.compile(r"\s")
# The same quote, not escaped by a backslash (repr and JSON escape it so inside a value).
_CLOSING_QUOTE = {q: re.compile(rf"(?:[^{q}\\\n]|\\.)*{q}") for q in "'\""}
# A key whose value may be a secret: librdkafka's dotted names, JSON/dict keys, JAAS options. Whole
# words only, and possessive: a long token (a base64 blob in a message) is scanned once, not once
# per character (the lookbehind and `*+` keep these searches linear; here and in _URL_USERINFO).
_KEY = r"(?<![A-Za-z0-9_.])(?<![A-Za-z0-9_.]-)[A-Za-z_][A-Za-z0-9_.\-]*+"  # `--key` too
# `sasl.password = 'value'`, `"sasl.password": "value"`, `sasl.password=value`, `'ssl.key.password=v'`
# (a quote opened before the key, as a shell quotes an argument): the key and its separator; the
# value's extent is found by _value_end (only for keys is_secret_key accepts).
_KEY_SEP = re.compile(rf"""(?P<q0>['"])?(?P<key>{_KEY})(?P<q1>['"])?(?P<sep>\s*[=:]\s*)""")
_QUOTED_VALUE = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*\"""")
# Where an unquoted value ends, before the end of its line: the next `key=` (not `==`, base64's
# padding), a quoted `'key':` / `"key":` (a dict or JSON), or a `--option`, after a space (or a
# comma or semicolon and a space; or `;`, `&` alone: JDBC and URL query parameters). A value is
# masked to the end of its line otherwise: a space or a comma does not end it (a password may hold
# both), but stopping at the next setting keeps the rest of a real message readable (a JAAS line's
# `username="svc"`, a settings dump's `, bootstrap.servers=...`, a command line's next `--conf`).
# The price: an unquoted secret holding ` word=` shows from there on; a quoted one never does.
_NEXT_KEY = re.compile(
    rf"""(?:\s+|[,;]\s+|[;&])(?:{_KEY}[ \t]*=(?!=)|(?P<kq>['"]){_KEY}(?P=kq)[ \t]*:|--[A-Za-z])"""
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


def _url_passwords(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of the password of every ``scheme://user:password@host`` of `text`.

    A password ends at the LAST `@` of its URL, as a host holds none: `/`, `:` and `@` of a password
    not percent-encoded (``postgres://eos:Zm9v/YmFy@db/eos``) stay in it. (SQLAlchemy's make_url
    parses one whole URL, not one inside a message, and ends the password at the first `@`.) A URL
    in quotes (a repr, JSON) ends at the closing quote. Else it ends at a space; one without an `@`
    before that space is a `host:port`, or, when what follows `:` is no port, a password holding a
    space, which then runs to the next `@` of the line."""
    pos = 0
    while (m := _URL_USERINFO.search(text, pos)) is not None:
        start = pos = m.end()
        line_end = _line_end(text, start)
        if m["quote"]:
            closing = _CLOSING_QUOTE[m["quote"]].match(text, start, line_end)
            at = text.rfind("@", start, closing.end() - 1 if closing else line_end)
        else:
            token_end = _end_of_word(text, start, line_end)
            at = text.rfind("@", start, token_end)
            if at < 0 and token_end > start and not _PORT.match(text, start, token_end):
                first = text.find("@", token_end, line_end)
                at = text.rfind("@", first, _end_of_word(text, first, line_end)) if first >= 0 else -1
        if at >= 0:
            yield start, at
            pos = at + 1


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


def _end_of_word(text: str, start: int, end: int) -> int:
    found = _SPACE.search(text, start, end)
    return found.start() if found else end


def redact_url(text: str) -> str:
    """The text with the password of every ``scheme://user:password@host`` replaced by ``***``."""
    parts, pos = [], 0
    for start, end in _url_passwords(text):
        parts += [text[pos:start], MASK]
        pos = end
    return "".join(parts) + text[pos:]


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
        # As it is, and as a repr() or JSON in a message shows it (escaped quotes, backslashes, \n).
        for shown in dict.fromkeys((secret, repr(secret)[1:-1], json.dumps(secret)[1:-1])):
            text = text.replace(shown, MASK)
    return _redact_pairs(redact_url(text))


def _redact_pairs(text: str) -> str:
    """The value of every secret key of `text` masked: a quoted value between its quotes, else
    to the end of its line or the next setting (see _NEXT_KEY)."""
    parts, pos, search = [], 0, 0
    while (m := _KEY_SEP.search(text, search)) is not None:
        search = m.end("key")  # a key that is not a secret: its value may still hold one
        start = m.end()
        if not is_secret_key(m["key"]) or start == len(text):
            continue
        quoted = _QUOTED_VALUE.match(text, start)
        if quoted:
            start, end = start + 1, quoted.end() - 1
        else:
            end = _value_end(text, start, m["q0"] if not m["q1"] else None)
        if text[start:end] not in ("", MASK):
            parts += [text[pos:start], MASK]
            pos = end
        search = max(search, end)
    return "".join(parts) + text[pos:]


def _value_end(text: str, start: int, quote: str | None) -> int:
    """Where an unquoted value starting at `start` ends: the quote opened before its key
    (`quote`), the next setting (_NEXT_KEY) or the end of the line, without trailing spaces."""
    end = _line_end(text, start)
    if quote is not None and (closing := text.find(quote, start, end)) >= 0:
        end = closing
    if (stop := _NEXT_KEY.search(text, start + 1, end)) is not None:
        end = stop.start()
    while end > start and text[end - 1] in " \t\r":
        end -= 1
    return end


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
            for start, end in _url_passwords(value):
                password = value[start:end]
                if password and password != MASK:
                    # As written and percent-decoded (`%2F` is `/` once a driver has read it).
                    found.extend(dict.fromkeys((password, unquote(password))))
        elif is_secret_key(key) and value is not None:
            found.append(str(value))

    walk(None, tree)
    return found
