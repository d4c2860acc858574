"""Iceberg's partition transforms as `output.partition_by` spells them: `day(placed_at)`,
`hour(kafka_timestamp)`, `month(...)`, `year(...)`, `bucket(16, customer)`. Only an Iceberg table
takes them (a Delta table is partitioned by columns). `truncate(W, col)` is refused: Spark's
DataFrame API, which creates the table, has no truncate transform."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The transform's name as written (Spark's plural spellings too), and its canonical name.
_NAMES = {
    "year": "year", "years": "year", "month": "month", "months": "month",
    "day": "day", "days": "day", "hour": "hour", "hours": "hour",
    "bucket": "bucket", "truncate": "truncate",
}  # fmt: skip
_CALL = re.compile(r"\s*([A-Za-z]+)\s*\(\s*(?:(\d+)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*")
# The source types Iceberg's spec allows per transform, as Spark's DDL base types spell them.
_TIME = ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ")
_SOURCES = {
    "year": _TIME,
    "month": _TIME,
    "day": _TIME,
    "hour": ("TIMESTAMP", "TIMESTAMP_NTZ"),
    "bucket": (
        "TINYINT",
        "SMALLINT",
        "INT",
        "INTEGER",
        "BIGINT",
        "LONG",
        "DECIMAL",
        "DATE",
        *_TIME[1:],
        "STRING",
    ),
}
# Output columns a transform may take besides the value's own (their types are fixed).
BUILTIN_SOURCES = {
    "kafka_timestamp": "TIMESTAMP",
    "event_date": "DATE",
    "kafka_topic": "STRING",
    "kafka_partition": "INT",
    "kafka_offset": "BIGINT",
}


@dataclass(frozen=True)
class Transform:
    """One partition field: `name` (year, month, day, hour, bucket) of `column`; `width`: bucket's N."""

    name: str
    column: str
    width: int | None = None

    def spelt(self) -> str:
        """The canonical spelling, e.g. day(placed_at) or bucket(16, customer)."""
        return (
            f"{self.name}({self.width}, {self.column})"
            if self.width is not None
            else f"{self.name}({self.column})"
        )


def parse(text: object) -> Transform | None:
    """The transform `text` spells, or None when it is no call (a column name). A call of an
    unknown transform is a ValueError with the fix."""
    if not isinstance(text, str) or "(" not in text:
        return None
    match = _CALL.fullmatch(text)
    name = _NAMES.get(match.group(1).lower()) if match else None
    if match is None or name is None:
        raise ValueError(
            "write a column, or one of Iceberg's transforms of a column: year(c), month(c), day(c), "
            "hour(c), bucket(N, c)"
        )
    if name == "truncate":
        raise ValueError(
            "truncate(W, c) is not supported (Spark's DataFrame API, which creates the table, has no "
            "truncate transform): use bucket(N, c) or the column itself"
        )
    width = int(match.group(2)) if match.group(2) is not None else None
    if (name == "bucket") != (width is not None):
        raise ValueError("bucket takes a count and a column, bucket(16, c); the others a column only, day(c)")
    if width is not None and not 1 <= width <= 1_000_000:
        raise ValueError("give bucket a count from 1 to 1000000")
    return Transform(name, match.group(3), width)


def misfit(transform: Transform, base_type: str) -> str | None:
    """Why a column of `base_type` cannot feed `transform` (the fix), or None when it can."""
    allowed = _SOURCES[transform.name]
    if base_type in allowed:
        return None
    return (
        f"{transform.name}() takes a column of type {', '.join(allowed)}; {transform.column} is {base_type}"
    )
