"""Spark DDL of a pipeline's values, checked without Spark, and the 'did you mean' of messages."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from eos_ingest.schema.columns import INTERNAL_COLUMNS, RESERVED_COLUMNS

_SPARK_TYPES = ("BOOLEAN", "TINYINT", "BYTE", "SMALLINT", "SHORT", "INT", "INTEGER", "BIGINT", "LONG",
                "FLOAT", "REAL", "DOUBLE", "DECIMAL", "DEC", "NUMERIC", "STRING", "VARCHAR", "CHAR",
                "BINARY", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "INTERVAL", "ARRAY",
                "MAP", "STRUCT", "VARIANT")  # fmt: skip
_COLUMN = re.compile(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)")


def hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_ddl(ddl: str) -> list[tuple[str, str]]:
    """Split a Spark DDL schema into ``(name, type)`` pairs; ValueError says what is wrong.

    Light on purpose (no Spark here): top-level commas split columns, the first word is the name,
    the type must start with a Spark type. Spark has the last word when the batch is parsed.
    """
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(ddl + ","):
        depth += (ch in "(<") - (ch in ")>")
        if depth < 0:
            raise ValueError(f"unbalanced {ch!r} at character {i}")
        if ch == "," and depth == 0:
            parts.append(ddl[start:i].strip())
            start = i + 1
    if depth:
        raise ValueError("a '(' or '<' is not closed")
    columns: list[tuple[str, str]] = []
    for part in parts:
        m = _COLUMN.match(part)
        col_type = part[m.end() :].strip().removeprefix(":").strip() if m else ""
        if not m or not col_type:
            raise ValueError(f"column {part!r} is not `name TYPE`")
        name = m.group(1) or m.group(2)
        base = base_type(col_type)
        if base not in _SPARK_TYPES:
            raise ValueError(f"column {name!r} has unknown type {base!r}{hint(base, _SPARK_TYPES)}")
        if name.lower() in (n.lower() for n, _ in columns):
            raise ValueError(f"column {name!r} is declared twice (Spark names are case-insensitive)")
        if name.lower() in RESERVED_COLUMNS:
            reserved = ", ".join(sorted(RESERVED_COLUMNS))
            raise ValueError(f"column {name!r} collides with an output column ({reserved}); rename it")
        if name.lower() in INTERNAL_COLUMNS:
            raise ValueError(
                f"column {name!r} is a name the parser uses for its own columns "
                f"({', '.join(INTERNAL_COLUMNS)}); leave it out of value.schema, or rename the field "
                "in the records and here"
            )
        columns.append((name, col_type))
    return columns


def base_type(col_type: str) -> str:
    return re.split(r"[\s(<]", col_type, maxsplit=1)[0].upper()
